"""lockbench profile: runs any dynamically linked program with liblockprof preloaded
(profile/lockprof*.cpp) and reports every lock object it used: acquisitions per mode, how
often they were contended, wait and hold times; optionally with every pthread mutex and
rwlock swapped for a lock of ours (--swap-lock). docs/profile.md tells how and at what cost.

    ./lockbench profile [--json FILE] [--markdown FILE] [--swap-lock NAME] [--swap-rwlock NAME]
                        [--top N] [--stacks N [--folded FILE]] [--timeline FILE]
                        -- PROGRAM ARGS...

SIGINT and SIGTERM sent to this command are forwarded to the program (which runs in a
process group of its own, so a Ctrl-C reaches it once); the profile is read when it ends.

Exit status: 0 the program ended (by itself with status 0, or by a signal forwarded to it)
and its profile was read; 1 something failed after the start (the program exited with
another status or wrote no profile; the table is still printed when there is one), one line
on stderr; 2 a bad command line or a program the profiler cannot see into (missing,
statically linked, another architecture), refused before anything starts, one line.
Standard library only: --help answers with any Python 3.11.
"""

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from . import profile_dump, profile_stacks, profile_timeline
from .grade.trust import names
from .numbers import int_in
from .profile_symbols import name_sites

PROG = "lockbench profile"
REPO = Path(__file__).resolve().parents[1]
SWAP_LOCK_LIST = REPO / "common" / "swap_locks.h"


def read_swap_locks(path: Path = SWAP_LOCK_LIST) -> tuple[dict, dict]:
    """What the interposer can swap in, from its one list (common/swap_locks.h, which
    `lockserver --list-locks` prints and liblockprof.so is built on): the mutex locks and the
    rwlock-only ones, name -> what it is. Read as text, so that --help needs no build."""
    mutex, rw_only = {}, {}
    for m in re.finditer(r'^\s*\{"([a-z0-9-]+)", (true|false), "((?:[^"\\]|\\.)*)"\},\s*$',
                         path.read_text(), re.M):
        (rw_only if m[2] == "true" else mutex)[m[1]] = m[3]
    return mutex, rw_only


MUTEX_LOCK_TEXT, RW_ONLY_LOCK_TEXT = read_swap_locks()
MUTEX_LOCKS = tuple(MUTEX_LOCK_TEXT)
RW_ONLY_LOCKS = tuple(RW_ONLY_LOCK_TEXT)
SWAP_LOCKS = (*MUTEX_LOCKS, *RW_ONLY_LOCKS)
# the names these locks had before they took their strategy names
RENAMED = {"ticket": "ticketlock", "ttas": "ttas-backoff", "futex": "futex-mutex",
           "phase-fair": "pflock", "bravo": "bravo-pflock"}
RW_LOCKS = (*RW_ONLY_LOCKS, *MUTEX_LOCKS, "pthread")
NOT_A_LOCK = {"flat-combining": "flat combining cannot replace a pthread lock: a combiner "
              "runs the critical sections it is handed, but the one between a pthread lock "
              "and unlock call is the caller's own code, which cannot be handed over"}
FORWARDED = (signal.SIGINT, signal.SIGTERM)
MAX_STACK = 64  # the frames a stack keeps at most (kStackMax, profile/lockprof.h)
DEFAULT_FOLDED = "lockstacks.folded"
# the trace's variables outside the LOCKPROF_ family, which the interposer ignores
RENAMED_ENV = {f"LOCKTRACE_{v}": f"LOCKPROF_TRACE_{v}" for v in ("FD", "FILE", "MAX")}
PT_INTERP = 3


class RefusedError(Exception):
    """Bad input found before the program starts (exit 2, one line)."""


class FailedError(Exception):
    """A failure after the program started (exit 1, one line)."""


class Parser(argparse.ArgumentParser):
    """argparse with one line on a bad command line (--help shows the usage)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def lock_name(name: str) -> str:
    """A swap lock's name; a lock that cannot stand in for a pthread one says why, and an
    old name gives the new one."""
    if name in NOT_A_LOCK:
        raise argparse.ArgumentTypeError(NOT_A_LOCK[name])
    if name in RENAMED:
        raise argparse.ArgumentTypeError(f"{name!r} is now called {RENAMED[name]!r} "
                                         "(the name of its lockserver strategies)")
    return name


def list_locks() -> str:
    """The locks --swap-lock and --swap-rwlock take, one a line."""
    rows = [(name, "mutex, rwlock", text) for name, text in MUTEX_LOCK_TEXT.items()]
    # (a mutex lock stands in for an rwlock taken exclusively: readers then exclude each other)
    rows += [(name, "rwlock", text) for name, text in RW_ONLY_LOCK_TEXT.items()]
    rows.append(("pthread", "rwlock", "glibc's own (--swap-rwlock only: keep the rwlocks)"))
    return "".join(f"  {name:<14} {kinds:<14} {text}\n" for name, kinds, text in rows)


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog=PROG, description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="examples:\n"
                       f"  {PROG} -- build/release/main2 100 127.0.0.1 3000\n"
                       f"  {PROG} --swap-lock mcs --json prof.json -- ./main2 100 127.0.0.1 "
                       "3000\n"
                       "environment: LOCKPROF_LIB, the interposer (default "
                       "build/release/liblockprof.so, else lib/liblockprof.so beside the "
                       "installed tools on PATH)")
    ap.add_argument("--json", type=Path, metavar="FILE",
                    help="also write the profile (every lock object's record) as JSON")
    ap.add_argument("--markdown", type=Path, metavar="FILE",
                    help="also write the table as a Markdown report section")
    mutexes = ", ".join(MUTEX_LOCKS)
    ap.add_argument("--swap-lock", type=lock_name, choices=SWAP_LOCKS, metavar="NAME",
                    help=f"replace every pthread mutex by this lock ({mutexes}; rwlocks "
                         "then become pflock), or only rwlocks (pflock, bravo-pflock)")
    ap.add_argument("--swap-rwlock", type=lock_name, choices=RW_LOCKS, metavar="NAME",
                    help="what replaces rwlocks: pflock (default with --swap-lock), "
                         "bravo-pflock, a mutex lock taken exclusively "
                         f"({mutexes}), or pthread")
    ap.add_argument("--list-locks", action="store_true",
                    help="list the locks --swap-lock and --swap-rwlock take, and exit")
    ap.add_argument("--top", type=int_in(0, 1_000_000), default=20, metavar="N",
                    help="rows in the printed table, most acquired first (0: all; default "
                         "20); --json and --markdown get every row")
    ap.add_argument("--stacks", type=int_in(1, MAX_STACK), metavar="N",
                    help="take up to N frames (1 to 64) of the call stack of every "
                         "acquisition that waits; write them as folded stacks (--folded) and "
                         "a flame graph of the time waited (the same name, .svg)")
    ap.add_argument("--folded", type=Path, metavar="FILE",
                    help=f"the folded stacks of --stacks (default {DEFAULT_FOLDED})")
    ap.add_argument("--timeline", type=Path, metavar="FILE",
                    help="also write every wait and hold as a trace (Trace Event Format "
                         "JSON) that chrome://tracing and ui.perfetto.dev open")
    ap.add_argument("command", nargs=argparse.REMAINDER, metavar="-- PROGRAM ARGS",
                    help="the program to run and its arguments")
    return ap


def parse_command(ap: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """ap's options before '--' (or before the first word that is not one), and in
    `command` the program and its arguments after it; exit 2 on anything wrong."""
    if "--" in argv:
        cut = argv.index("--")
        a = ap.parse_args(argv[:cut])
        if a.command:
            ap.error(f"unexpected {a.command[0]!r} before '--'")
        a.command = argv[cut + 1:]
        return a
    return ap.parse_args(argv)


def parse(argv) -> argparse.Namespace:
    """The options before '--' (or before the first word that is not one), the program
    after; exit 2 on anything wrong."""
    ap = build_parser()
    a = parse_command(ap, argv)
    if a.list_locks:
        return a
    if not a.command:
        ap.error("no program to run; give it after '--': -- PROGRAM ARGS...")
    if a.folded is not None and a.stacks is None:
        ap.error("--folded needs --stacks N")
    if a.stacks is not None and a.folded is None:
        a.folded = Path(DEFAULT_FOLDED)
    for opt, path in (("--json", a.json), ("--markdown", a.markdown), ("--folded", a.folded),
                      ("--timeline", a.timeline)):
        if path is not None and not path.parent.is_dir():
            ap.error(f"{opt} {path}: folder {path.parent} does not exist")
    return a


# ---- the program and the interposer, checked before anything starts --------------------------

def find_program(name: str) -> Path:
    """The executable `name` names (a path, or a command on PATH)."""
    found = name if "/" in name else shutil.which(name)
    if found is None:
        raise RefusedError(f"program {name!r} not found on PATH")
    path = Path(found)
    if not path.is_file():
        raise RefusedError(f"program {name} not found")
    if not os.access(path, os.X_OK):
        raise RefusedError(f"program {name} is not executable")
    return path.resolve()


def elf_header(path: Path, head: bytes) -> tuple:
    """(class, machine, has PT_INTERP) of a 64- or 32-bit ELF file whose first bytes are
    head; a program with no PT_INTERP is linked statically (a static PIE too)."""
    little = head[5] == 1
    end = "<" if little else ">"
    machine = struct.unpack_from(end + "H", head, 18)[0]
    if head[4] != 2:
        return head[4], machine, True
    phoff, = struct.unpack_from(end + "Q", head, 32)
    phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
    with path.open("rb") as f:
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    types = [struct.unpack_from(end + "I", table, i * phentsize)[0] for i in range(phnum)
             if (i + 1) * phentsize <= len(table)]
    return 2, machine, PT_INTERP in types


def check_linkage(program: Path, lib: Path) -> None:
    """RefusedError unless the preloaded library can see the program's lock calls: a script (its
    interpreter is checked when it runs), or a dynamically linked ELF program of the
    library's class and machine."""
    try:
        with program.open("rb") as f:
            head = f.read(64)
        if head[:2] == b"#!":
            return
        if head[:4] != b"\x7fELF" or len(head) < 64:
            raise RefusedError(f"{program} is neither an ELF program nor a script")
        cls, machine, dynamic = elf_header(program, head)
        _, lib_machine, _ = elf_header(lib, lib.read_bytes()[:64])
    except OSError as e:
        raise RefusedError(f"cannot read {program}: {e.strerror or e}") from None
    if cls != 2 or machine != lib_machine:
        raise RefusedError(f"{program} is built for another architecture than the interposer "
                      f"{lib.name}; it cannot be preloaded")
    if not dynamic:
        raise RefusedError(f"{program} is statically linked: an LD_PRELOAD interposer cannot see "
                      "its locks (link it dynamically to profile it)")


def refuse_renamed_env() -> None:
    """RefusedError when the caller's environment sets a trace variable by its old name."""
    for old, new in RENAMED_ENV.items():
        if os.environ.get(old):
            raise RefusedError(f"${old} is now called ${new}; set that instead (the "
                               "interposer ignores the old name)")


TOOLS = ("client", "lockserver", "main1")  # installed beside liblockprof.so (CMakeLists.txt)


def installed_libs() -> list:
    """Where an install (cmake --install ... --prefix P) put liblockprof.so, found from its
    tools on PATH: P/bin/client -> P/lib (or P/lib64, P/lib/<multiarch>, as GNUInstallDirs
    names the folder)."""
    out = []
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            prefix = Path(found).resolve().parent.parent
            out += [prefix / "lib" / "liblockprof.so", prefix / "lib64" / "liblockprof.so",
                    *sorted(prefix.glob("lib/*-linux-gnu*/liblockprof.so"))]
    return out


def find_lib() -> Path:
    """The interposer: $LOCKPROF_LIB; else the build's ($LOCKBENCH_BIN_DIR, default
    build/release); else an installed one, beside the first of TOOLS on PATH."""
    refuse_renamed_env()
    given = os.environ.get("LOCKPROF_LIB")
    if given:
        if not Path(given).is_file():
            raise RefusedError(f"the interposer {given} ($LOCKPROF_LIB) is not a file")
        return Path(given).resolve()
    built = Path(os.environ.get("LOCKBENCH_BIN_DIR", REPO / "build" / "release"))
    for lib in (built / "liblockprof.so", *installed_libs()):
        if lib.is_file():
            return lib.resolve()
    raise RefusedError(f"the interposer {built / 'liblockprof.so'} is not built (cmake --preset "
                       "release && cmake --build --preset release), and no installed one is "
                       f"beside {' or '.join(TOOLS)} on PATH")


# ---- running it --------------------------------------------------------------------------------

def program_env(lib: Path, out: Path, a) -> dict:
    """The program's environment: ours preloaded first, the dump one file per process."""
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(filter(None, [str(lib), env.get("LD_PRELOAD", "")]))
    env["LOCKPROF_FILE"] = str(out / "lockprof.%p.json")
    for var in ("LOCKPROF_SWAP", "LOCKPROF_SWAP_RW", "LOCKPROF_STACKS", "LOCKPROF_TIMELINE"):
        env.pop(var, None)
    if a.stacks:
        env["LOCKPROF_STACKS"] = str(a.stacks)
    if a.timeline:
        env["LOCKPROF_TIMELINE"] = "1"
    if a.swap_lock:
        env["LOCKPROF_SWAP"] = a.swap_lock
    if a.swap_rwlock:
        env["LOCKPROF_SWAP_RW"] = a.swap_rwlock
    return env


def run(command: list, env: dict) -> tuple:
    """Runs the program to its end, forwarding SIGINT and SIGTERM; (its returncode, the
    signals forwarded)."""
    try:
        proc = subprocess.Popen(command, env=env, process_group=0)
    except OSError as e:
        raise FailedError(f"cannot start {command[0]}: {e.strerror or e}") from None
    forwarded: list = []

    def forward(sig, _frame):
        forwarded.append(sig)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)

    old = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        return proc.wait(), forwarded  # resumed after each forward (PEP 475)
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with status {code}"


def ended_well(code: int, forwarded: list) -> bool:
    return code == 0 or (code < 0 and -code in forwarded)


# ---- the profile -------------------------------------------------------------------------------

def load(out: Path) -> tuple:
    """(every process's dump (a forked child writes its own), by pid, those with no lock (a
    wrapper such as timeout or env) left out unless no process has one; one line for each
    dump that cannot be used: the program may have written it, profile_dump.py)."""
    docs, bad = [], []
    for f in sorted(out.glob("lockprof.*.json")):
        try:
            docs.append(profile_dump.read(f))
        except profile_dump.BadDumpError as e:
            bad.append(f"the profile {names.console(f.name)} {e}: left out")
    docs.sort(key=lambda d: d["pid"])
    return [d for d in docs if d["locks"]] or docs[:1], bad


def total(rec: dict) -> int:
    return sum(rec["acquisitions"].values())


def records(docs: list) -> list:
    """All lock records, each with its pid, most acquired first."""
    out = [dict(r, pid=d["pid"]) for d in docs for r in d["locks"]]
    return sorted(out, key=lambda r: (-total(r), r["pid"], r["addr"]))


# ---- the table ---------------------------------------------------------------------------------

def fmt_ns(v: int) -> str:
    if v < 1000:
        return f"{v}ns"
    for unit, scale in (("us", 1e3), ("ms", 1e6)):
        if v < scale * 1000:
            return f"{v / scale:.3g}{unit}"
    return f"{v / 1e9:.3g}s"


def fmt_acq(r: dict) -> str:
    a = r["acquisitions"]
    if r["kind"] == "mutex":
        return str(a["mutex"])
    if r["kind"] == "rwlock":
        fast = f" ({r['fast_reads']} fast)" if "fast_reads" in r else ""
        return f"r {a['read']}{fast} w {a['write']}"
    return f"wait {a['wait']} sig {a['signal']} bc {a['broadcast']}"


def row(r: dict, with_pid: bool) -> list:
    locks = r["kind"] != "cond"
    n = total(r)
    cont = f"{100 * r['contended'] / n:.1f}%" if locks and n else "-"
    hold = r.get("hold_ns")
    cells = [r["kind"], r["impl"], fmt_acq(r), cont, fmt_ns(r["wait_ns"]["p50"]),
             fmt_ns(r["wait_ns"]["p99"]), fmt_ns(hold["p50"]) if hold else "-",
             fmt_ns(hold["p99"]) if hold else "-", r["site"]]
    return ([str(r["pid"])] if with_pid else []) + cells


HEADER = ["kind", "lock", "acquisitions", "contended", "wait p50", "wait p99", "hold p50",
          "hold p99", "site"]


def table_rows(recs: list, with_pid: bool) -> tuple:
    return (["pid"] if with_pid else []) + HEADER, [row(r, with_pid) for r in recs]


SITE_WIDTH = 100  # the printed table's; --json and --markdown keep the whole name


def text_table(head: list, rows: list) -> str:
    rows = [[*r[:-1], r[-1] if len(r[-1]) <= SITE_WIDTH else r[-1][:SITE_WIDTH - 3] + "..."]
            for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip()
             for line in [head, *rows]]
    return "\n".join(lines)


def summary(docs: list, recs: list) -> str:
    """One line: how many objects in how many processes, which locks served them."""
    swap = docs[0]["swap"] if docs else {"mutex": "pthread", "rwlock": "pthread"}
    untracked = sum(d.get("untracked_ops", 0) for d in docs)
    line = (f"{len(recs)} lock object(s) in {len(docs)} process(es); mutexes: "
            f"{swap['mutex']}, rwlocks: {swap['rwlock']}")
    if untracked:
        line += f"; {untracked} call(s) on objects the full table could not take"
    return line


def note(docs: list) -> str:
    """How to read the times, and which clock took them."""
    clock = docs[0].get("clock") if docs else None
    by = "the TSC, calibrated against CLOCK_MONOTONIC" if clock == "tsc" else "CLOCK_MONOTONIC"
    sample = docs[0].get("hold_sample") if docs else None
    held = (f"; holds: every contended one timed, and one uncontended in {sample} (each "
            f"counting for {sample})" if isinstance(sample, int) and sample > 1 else "")
    return ("wait and hold: upper edges of log2 buckets of nanoseconds (within a factor of 2), "
            f"timed by {by}; wait is 0 for an acquisition whose trylock succeeded{held}")


def print_table(docs: list, recs: list, a) -> None:
    shown = recs if a.top == 0 else recs[:a.top]
    head, rows = table_rows(shown, len(docs) > 1)
    print(f"{PROG}: {shlex.join(a.command)}: {summary(docs, recs)}")
    if rows:
        print(text_table(head, rows))
    if len(shown) < len(recs):
        print(f"... {len(recs) - len(shown)} more (--top 0 shows all)")
    print(f"({note(docs)})")


def markdown(docs: list, recs: list, command: list) -> str:
    """A report section: the summary, every lock object as a table row, the note."""
    head, rows = table_rows(recs, len(docs) > 1)
    esc = [[str(c).replace("|", "\\|") for c in r] for r in rows]
    lines = ["## Lock profile", "", f"`{shlex.join(command)}`: {summary(docs, recs)}.",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    said = note(docs)
    return "\n".join([*lines, "", f"{said[0].upper()}{said[1:]}.", ""])


SECTIONS = ("locks", "stacks", "objects", "timeline")  # not a process's header


def write_outputs(docs: list, recs: list, a, code: int, lib: Path) -> None:
    if a.json:
        doc = {"command": a.command, "exit": code, "interposer": str(lib),
               "swap": docs[0]["swap"] if docs else None,
               "processes": [{k: v for k, v in d.items() if k not in SECTIONS} for d in docs],
               "locks": recs}
        a.json.write_text(json.dumps(doc, indent=1) + "\n")
    if a.markdown:
        a.markdown.write_text(markdown(docs, recs, a.command))
    if a.stacks:
        svg = a.folded.with_suffix(".svg")
        said = profile_stacks.write(docs, a.folded, svg, f"Lock waits: {shlex.join(a.command)}")
        print(stacks_line(said, a.folded, svg))
    if a.timeline:
        said = profile_timeline.write(docs, recs, a.timeline, a.command)
        lost = f"; {said['lost']} more did not fit in the buffer" if said["lost"] else ""
        print(f"timeline: {said['events']} waits and holds of {said['threads']} thread(s) -> "
              f"{a.timeline} (chrome://tracing, ui.perfetto.dev){lost}")


def stacks_line(said: dict, folded: Path, svg: Path) -> str:
    """What --stacks wrote, and what the stack tables had no room for."""
    line = (f"contended stacks: {said['stacks']} stack(s), {said['waits']} wait(s), "
            f"{fmt_ns(said['wait_ns'])} waited -> {folded}, flame graph {svg}")
    if said["lost"]:
        line += (f"; {said['lost']} wait(s) ({fmt_ns(said['lost_wait_ns'])}) found no room in "
                 "the stack table")
    return line


# ---- the command -------------------------------------------------------------------------------

def profile(a) -> int:
    lib = find_lib()
    program = find_program(a.command[0])
    check_linkage(program, lib)
    with tempfile.TemporaryDirectory(prefix="lockprof-") as tmp:
        code, forwarded = run(a.command, program_env(lib, Path(tmp), a))
        docs, bad = load(Path(tmp))
    for line in bad:
        print(f"{PROG}: {line}", file=sys.stderr)
    if not docs:
        raise FailedError(f"{a.command[0]} {describe_exit(code)} and wrote no "
                          f"{'usable ' if bad else ''}lock profile (ended without exit or a "
                          "stop signal, or never loaded the interposer)")
    recs = records(docs)
    name_sites(recs)
    print_table(docs, recs, a)
    try:
        write_outputs(docs, recs, a, code, lib)
    except OSError as e:
        raise FailedError(f"cannot write the output: {e}") from None
    if not ended_well(code, forwarded):
        raise FailedError(f"{a.command[0]} {describe_exit(code)}")
    return 1 if bad else 0


def main(argv=None) -> int:
    a = parse(sys.argv[1:] if argv is None else argv)
    if a.list_locks:
        sys.stdout.write(list_locks())
        return 0
    try:
        return profile(a)
    except RefusedError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except FailedError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
