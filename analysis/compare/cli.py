"""lockbench compare: which lock for your program. Runs it without the preload (native),
through liblockprof.so without swapping (pthread), and with every pthread mutex (or
rwlock) swapped for each lock of a list, in rounds, and compares a metric: the program's
wall time, or a number read from its output (or from a load's, for a server).
docs/compare.md tells how.

    ./lockbench compare [--locks LIST|all|none] [--rwlocks LIST|all] [--rounds R]
                        [--load CMD --port P] [--metric REGEX [--lower-is-better]]
                        [--check CMD] [--timeout S] [--json F] [--markdown F] [--plot F.png]
                        -- PROGRAM ARGS...

Exit status: 0 compared; 1 something failed after the first run started (the program broke
without the preload or under pthread's own locks, no run's output matched --metric, an output
could not be written), one line on stderr; 2 a bad command line or a program the preload
cannot see into, refused before anything runs, one line. Standard library only for --help.
"""

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from analysis import kernel_sockets as ks
from analysis.compare import report as R
from analysis.lockprof import preload as P
from analysis.lockprof import table as T
from analysis.lockprof.symbols import name_sites
from analysis.numbers import float_above, int_in
from analysis.progress import Progress

PROG = "lockbench compare"
STOPPED = (0, -signal.SIGTERM, 128 + signal.SIGTERM)   # a server's normal end at our SIGTERM
OUTPUT_MAX = 16 << 20   # bytes of a run's output searched for --metric
STOP_WAIT_S = 10.0
PROFILE_TOP = 5


@dataclass(frozen=True)
class Config:
    """One way to run the program: its name in the table and the preload's settings."""
    name: str
    preload: bool = True
    swap: str | None = None
    swap_rw: str | None = None


ALWAYS = "pthread"   # the configuration every comparison has: the preload, no swap


def lock_list(allowed: tuple, all_: tuple, what: str):
    """A comma list of lock names from `allowed`; 'all' is all_, 'none' is nothing."""
    def parse(text: str) -> list:
        if text in ("all", "none"):
            return list(all_) if text == "all" else []
        names = [t.strip() for t in text.split(",")]
        if not all(names):
            raise argparse.ArgumentTypeError(f"{text!r} has an empty item")
        for n in names:
            P.lock_name(n)
            if n not in allowed:
                raise argparse.ArgumentTypeError(
                    f"unknown {what} {n!r} (allowed: {', '.join(allowed)}, all, none)")
        return list(dict.fromkeys(names))
    return parse


def metric_regex(text: str) -> re.Pattern:
    try:
        rx = re.compile(text, re.M)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {e}") from None
    if rx.groups < 1:
        raise argparse.ArgumentTypeError(f"{text!r} has no capturing group: put the number in "
                                         "parentheses, e.g. 'TPS: ([0-9.]+)'")
    return rx


def shell_command(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty command")
    return text


def build_parser() -> argparse.ArgumentParser:
    ap = P.Parser(prog=PROG, description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="examples:\n"
                       f"  {PROG} --check 'zstd -d -c in.zst | cmp - in' -- zstd -T2 -q -f in\n"
                       f"  {PROG} --locks mcs,futex-mutex --port 11311 --load 'memcaslap -s "
                       "127.0.0.1:11311 -t 2s' --metric 'TPS: ([0-9]+)' -- memcached -p 11311\n"
                       "environment: LOCKPROF_LIB, the interposer (default "
                       "build/release/liblockprof.so, else lib/liblockprof.so beside the "
                       "installed tools on PATH)")
    mutexes, rw = ", ".join(P.MUTEX_LOCKS), [n for n in P.RW_LOCKS if n != "pthread"]
    ap.add_argument("--locks", type=lock_list((*P.MUTEX_LOCKS, ALWAYS), P.MUTEX_LOCKS,
                                              "mutex lock"),
                    default=list(P.MUTEX_LOCKS), metavar="LIST",
                    help=f"the mutex locks swapped in, one configuration each ({mutexes}; "
                         f"default all; rwlocks stay pthread's; {ALWAYS} and native are "
                         "always rows)")
    ap.add_argument("--rwlocks", type=lock_list(tuple(rw), P.RW_ONLY_LOCKS, "rwlock"),
                    default=[], metavar="LIST",
                    help="the rwlock swaps, one configuration each, named rw:NAME (pflock, "
                         "bravo-pflock, or a mutex lock taken exclusively; all: the rwlock "
                         "ones; default none; mutexes stay pthread's)")
    ap.add_argument("--rounds", type=int_in(1, 1000), default=R.MIN_ROUNDS, metavar="R",
                    help="rounds, each running every configuration once in a shuffled order "
                         f"(default {R.MIN_ROUNDS}, the fewest with a 95 %% interval of a median)")
    ap.add_argument("--load", type=shell_command, metavar="CMD",
                    help="for a server: a shell command run once it listens on --port; the "
                         "metric is read from its output (its wall time by default)")
    ap.add_argument("--port", type=int_in(1, 65535), metavar="P",
                    help="the port the server listens on (with --load)")
    ap.add_argument("--metric", type=metric_regex, metavar="REGEX",
                    help="the metric: the number the first capturing group of the first "
                         "match captures in the output (higher is better); default wall time")
    ap.add_argument("--lower-is-better", action="store_true",
                    help="with --metric: a lower number is better (a latency)")
    ap.add_argument("--check", type=shell_command, metavar="CMD",
                    help="a shell command run after each run that must exit 0, or the lock "
                         "broke the program")
    ap.add_argument("--timeout", type=float_above(0, 86400), default=600.0, metavar="S",
                    help="seconds each run (and each check) may take (default 600)")
    ap.add_argument("--top", type=int_in(0, 1000), default=PROFILE_TOP, metavar="N",
                    help=f"the most contended locks shown from the profiling run (default "
                         f"{PROFILE_TOP}; 0: no profiling run)")
    for opt, what in (("--json", "the whole comparison as JSON"),
                      ("--markdown", "a Markdown section for a report"),
                      ("--plot", "a PNG of the medians and their intervals")):
        ap.add_argument(opt, type=Path, metavar="FILE", help=f"also write {what}")
    ap.add_argument("command", nargs=argparse.REMAINDER, metavar="-- PROGRAM ARGS",
                    help="the program to run and its arguments")
    return ap


def parse(argv) -> argparse.Namespace:
    ap = build_parser()
    a = P.parse_command(ap, argv)
    if not a.command:
        ap.error("no program to run; give it after '--': -- PROGRAM ARGS...")
    if a.load is not None and a.port is None:
        ap.error("--load needs --port: the port the server listens on")
    if a.port is not None and a.load is None:
        ap.error("--port needs --load: the command that loads the server")
    if a.lower_is_better and a.metric is None:
        ap.error("--lower-is-better needs --metric (wall time is always lower-is-better)")
    if a.plot is not None and a.plot.suffix.lower() != ".png":
        ap.error(f"--plot {a.plot}: the plot is a PNG, its name ends in .png")
    for opt in ("json", "markdown", "plot"):
        path = getattr(a, opt)
        if path is not None and not path.parent.is_dir():
            ap.error(f"--{opt} {path}: folder {path.parent} does not exist")
    return a


def always_a_row(a) -> str:
    """--locks naming pthread, a row of every comparison already: dropped from the swaps,
    and the note that says so (once), else ''."""
    if ALWAYS not in a.locks:
        return ""
    a.locks.remove(ALWAYS)
    return (f"'{ALWAYS}' is always a row (the preload without a swap), as is native: "
            "--locks names the swaps beside them")


def configs(a) -> list:
    """native, pthread, then each mutex swap (rwlocks pthread's) and each rwlock swap
    (mutexes pthread's): one thing changed at a time."""
    out = [Config("native", preload=False), Config("pthread")]
    out += [Config(n, swap=n, swap_rw="pthread") for n in a.locks]
    out += [Config(f"rw:{n}", swap_rw=n) for n in a.rwlocks]
    return out


def metric_of(a) -> dict:
    of = "load" if a.load else "program"
    if a.metric is None:
        return {"kind": "wall", "of": of, "regex": None, "lower_is_better": True}
    return {"kind": "regex", "of": of, "regex": a.metric.pattern,
            "lower_is_better": a.lower_is_better}


# ---- one run -----------------------------------------------------------------------------------

class RunFailedError(Exception):
    """This run broke: the program failed, or its check did, or the metric is missing."""


def base_env() -> dict:
    """The caller's environment without the preload's settings (a configuration sets its own)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("LOCKPROF_")}


def config_env(c: Config, lib: Path, dump_dir: Path | None = None) -> dict:
    env = base_env()
    if c.preload:
        env["LD_PRELOAD"] = " ".join(filter(None, [str(lib), env.get("LD_PRELOAD", "")]))
    for var, value in (("LOCKPROF_SWAP", c.swap), ("LOCKPROF_SWAP_RW", c.swap_rw)):
        if value:
            env[var] = value
    if dump_dir is not None:
        env["LOCKPROF_FILE"] = str(dump_dir / "lockprof.%p.json")
    return env


def read_output(f) -> str:
    f.seek(0)
    return f.read(OUTPUT_MAX).decode("utf-8", "replace")


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return f": {lines[-1][:160]}" if lines else ""


def kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_shell(cmd: str, timeout: float, what: str) -> tuple:
    """(seconds, output) of a shell command (--load, --check) in a process group of its own;
    RunFailedError when it fails or overruns."""
    def shell(out):
        return subprocess.Popen(["/bin/sh", "-c", cmd], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=base_env(), process_group=0)
    return _to_end(shell, timeout, f"the {what} ")


def run_program(command: list, env: dict, timeout: float) -> tuple:
    """(wall seconds, output) of the program run to its end."""
    return _to_end(lambda out: start(command, env, out), timeout, "")


def _to_end(begin, timeout: float, who: str) -> tuple:
    """(wall seconds, output) of the process begin(output file) starts, waited for to its
    end (its group killed past `timeout`); RunFailedError, naming `who`, when it fails or
    overruns."""
    with tempfile.TemporaryFile() as out:
        t0 = time.monotonic()
        proc = begin(out)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise RunFailedError(f"{who}ran longer than --timeout {timeout:g} s") from None
        finally:
            if proc.poll() is None:
                kill_group(proc)
        took, text = time.monotonic() - t0, read_output(out)
    if code != 0:
        raise RunFailedError(f"{who}{P.describe_exit(code)}{last_line(text)}")
    return took, text


def start(command: list, env: dict, out) -> subprocess.Popen:
    try:
        return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, process_group=0)
    except OSError as e:
        raise RunFailedError(f"cannot start {command[0]}: {e.strerror or e}") from None


def run_server(command: list, env: dict, a) -> tuple:
    """(the load's wall seconds, the load's output): the program started, waited for on
    --port in the socket table, the load run against it, then the program stopped by
    SIGTERM (SIGKILL after STOP_WAIT_S) and its end checked."""
    with tempfile.TemporaryFile() as out:
        proc = start(command, env, out)
        try:
            _, why = ks.wait_for_port([a.port], lambda: ks.listening_ports([proc.pid]),
                                      lambda: proc.poll() is None, a.timeout, 0.01)
            if why:
                code = proc.poll()
                raise RunFailedError(f"{P.describe_exit(code)} before listening on port {a.port}"
                                if why == "exited" else
                                f"did not listen on port {a.port} within {a.timeout:g} s")
            took, text = run_shell(a.load, a.timeout, "load")
            if proc.poll() is not None:
                raise RunFailedError(f"{P.describe_exit(proc.returncode)} during the load")
            code = stop(proc)
        finally:
            if proc.poll() is None:
                kill_group(proc)
        if code not in STOPPED:
            said = last_line(read_output(out))
            raise RunFailedError(f"{P.describe_exit(code)} when stopped{said}")
    return took, text


def stop(proc: subprocess.Popen) -> int:
    """SIGTERM to the program (as profile forwards one), SIGKILL to its group if it lingers."""
    try:
        proc.send_signal(signal.SIGTERM)
        return proc.wait(STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return proc.returncode


def measure(c: Config, a, lib: Path, dump_dir: Path | None = None) -> float:
    """One run of configuration c: its metric, or RunFailedError saying why it broke."""
    env = config_env(c, lib, dump_dir)
    if a.load:
        took, text = run_server(a.command, env, a)
    else:
        took, text = run_program(a.command, env, a.timeout)
    if a.check:
        run_shell(a.check, a.timeout, "check")
    if a.metric is None:
        return took
    m = a.metric.search(text)
    if m is None:
        raise RunFailedError(f"no match of --metric {a.metric.pattern!r} in the "
                             f"{metric_of(a)['of']}'s output")
    try:
        return float(m.group(1).replace(",", ""))
    except (TypeError, ValueError):
        raise RunFailedError(f"--metric captured {m.group(1)!r}, not a number") from None


# ---- the rounds --------------------------------------------------------------------------------

def rounds(a, lib: Path, cfgs: list, bar: Progress) -> tuple:
    """({name: [value or None per round]}, {name: why it broke}, the orders run). A
    configuration that broke runs no more; native or pthread broken ends the comparison
    after its round."""
    rng = random.Random(0x10CB)
    values = {c.name: [None] * a.rounds for c in cfgs}
    broke, orders, matched = {}, [], 0
    for i in range(a.rounds):
        order = list(cfgs)
        rng.shuffle(order)
        orders.append([c.name for c in order])
        for c in order:
            if c.name in broke:
                bar.advance(1.0, f"round {i + 1}: {c.name} skipped (broke)")
                continue
            try:
                values[c.name][i] = measure(c, a, lib)
                matched += 1
            except RunFailedError as e:
                broke[c.name] = f"{e} (round {i + 1})"
                bar.note(f"{PROG}: {c.name}: broke the program: {e}")
            bar.advance(1.0, f"round {i + 1}: {c.name}")
        fatal(broke, a, matched)
    return values, broke, orders


def fatal(broke: dict, a, matched: int) -> None:
    """Without native and pthread there is nothing to compare with: the end (exit 1)."""
    if a.metric is not None and matched == 0:
        raise P.FailedError(f"no run's output matched --metric {a.metric.pattern!r} "
                            f"(native: {broke.get('native', '?')})")
    for name, how in (("native", "without the preload"),
                      ("pthread", "under the preload without a swap")):
        if name in broke:
            raise P.FailedError(f"{a.command[0]} fails {how}: {broke[name]}")


def profile_run(a, lib: Path) -> dict:
    """One profiling run under pthread's locks, not timed: its most contended locks, with
    the profiler's own table cells (lockprof/table.py)."""
    with tempfile.TemporaryDirectory(prefix="lockcompare-") as tmp:
        try:
            measure(Config("pthread"), a, lib, Path(tmp))
        except RunFailedError as e:
            return {"error": f"the profiling run broke: {e}"}
        docs, bad = T.load(Path(tmp))
    if not docs:
        return {"error": "the profiling run wrote no profile" + (f" ({bad[0]})" if bad else "")}
    recs = [r for r in T.records(docs) if r["kind"] != "cond"]
    hot = sorted((r for r in recs if r["contended"]),
                 key=lambda r: (-r["wait_ns"].get("total", 0), -r["contended"]))[:a.top]
    name_sites(hot)
    head, rows = T.table_rows(hot, len(docs) > 1)
    return {"summary": T.summary(docs, recs), "head": head, "rows": rows, "locks": hot}


def compare(a) -> dict:
    lib = P.find_lib()
    program = P.find_program(a.command[0])
    P.check_linkage(program, lib)
    cfgs = configs(a)
    total = len(cfgs) * a.rounds + (1 if a.top else 0)
    bar = Progress(total, total)
    prof = None
    if a.top:
        prof = profile_run(a, lib)
        bar.advance(1.0, "the profiling run")
    values, broke, orders = rounds(a, lib, cfgs, bar)
    metric = metric_of(a)
    rows = R.summarise([c.name for c in cfgs], values, broke, metric)
    return {"command": a.command, "rounds": a.rounds, "metric": metric, "orders": orders,
            "configs": [vars(c) for c in cfgs], "rows": rows,
            "best": R.best(rows, values, metric), "profile": prof}


def write_outputs(doc: dict, a) -> None:
    try:
        if a.json:
            a.json.write_text(json.dumps(R.json_doc(doc), indent=1) + "\n")
        if a.markdown:
            a.markdown.write_text(R.markdown(doc))
        if a.plot:
            R.plot(doc, a.plot)
    except OSError as e:
        raise P.FailedError(f"cannot write the output: {e}") from None


def main(argv=None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    note = always_a_row(a)
    if note:
        print(f"{PROG}: {note}", file=sys.stderr)
    try:
        doc = compare(a)
        print(R.render(doc))
        write_outputs(doc, a)
        return 0
    except P.RefusedError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except P.FailedError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted", file=sys.stderr)
        return 130

