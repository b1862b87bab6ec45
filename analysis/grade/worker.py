"""The grading worker: runs inside the outer sandbox (its own loopback), builds the
submission and runs every check against it in inner sandboxes, and writes evidence.json.

    python -m analysis.grade.worker CONFIG.json

Every check yields {"id", "title", "status": pass|fail|skip, "evidence": text lines,
...data}; points are added later from the weights (render.py). A crash or hang ends only the
step it happened in; grading carries on with the next one.
"""

import contextlib
import json
import math
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import kernel_sockets as ks
from .. import ports
from . import checks as C
from . import design as D
from . import kitload as K
from . import labs, safeio
from . import launcher as LA
from . import linearize as L
from . import packaging as P
from . import sandbox as S

TIMING = "server_output_time_aggregated"
LATENCY_FLOOR_S = 5e-6   # every kit access sleeps usleep(10), so a mean below this is garbage
SERVER_OUTPUT_KEEP = 16 << 10


def one_server_fixes(checks: list, lab) -> None:
    """A one-server lab's own fix for a check that did not pass and has none of its own."""
    if len(lab.servers) != 1:
        return
    for c in checks:
        own = C.BY_ID[c["id"]].fix_one if c["id"] in C.BY_ID else ""
        if c["status"] != "pass" and not c.get("fix") and own:
            c["fix"] = [own]


# What each check after the workload costs is its record's cost_in_runs (checks.py): under
# a time budget the kit workload leaves room for them, and a check that still does not fit
# is skipped rather than letting the whole grading run out of time.
MIN_RUNS = 3           # runs per setting a time budget never cuts below
PLAN_SHARE = 0.85      # of a time budget the checks plan for; the rest copies, cleans up and
                       # writes the pages
HAND_IN_SHARE = 0.93   # of a time budget: the worker hands in what it has, whatever runs
# Every check of a grading is in checks.ORDER: one not finished when the budget runs out
# is handed in as undetermined (not scored).


def initial_value(i: int) -> str:
    return f"String {i}: the initial value"


class Ctx:
    def __init__(self, cfg: dict, launcher):
        self.cfg = cfg
        self.launcher = launcher
        self.limits = dict(cfg.get("limits", {}))
        self._ports = ports.sequence(cfg.get("port_group", 0) % ports.GROUPS, ports.GROUPS)
        self.port_lock = threading.Lock()
        self.log_lines: list = []
        self.t0 = time.monotonic()
        self.budget_s = cfg.get("budget_s")  # the submission's time budget (s), or None
        self.run_s: list = []                # seconds of each kit run so far
        self.ev: dict = {"checks": []}       # the evidence so far (handed in on time)
        self.wl: dict = {}                   # the kit workload's results, once run
        self.probe: dict | None = None       # the clock probe's results, once run
        self.traced: dict = {}               # server -> the design its lock trace showed
        self.out_lock = threading.Lock()
        self.handed_in = False
        # the lab version: --lab's, else told apart after the first make (labs.detect)
        self.lab = labs.by_name(cfg["lab"]) if cfg.get("lab") else None
        self.lab_why = f"--lab {cfg['lab']}" if cfg.get("lab") else ""

    def next_port(self) -> int:
        """The next port of ports() whose twin is also free: in container mode the
        loopback is shared with whatever else the container runs, so a port already
        taken is never handed to a submission (its failing to bind would be ours)."""
        with self.port_lock:
            taken = ks.listening_ports()
            for p in self._ports:
                if p not in taken and ports.twin(p) not in taken:
                    return p
            raise OSError("no free port pair left")

    def left(self) -> float:
        """Seconds left of the time budget (infinite without one)."""
        if not self.budget_s:
            return math.inf
        return self.t0 + PLAN_SHARE * self.budget_s - time.monotonic()

    def cost(self, cid: str) -> float:
        """What the check `cid` is expected to take here, from this machine's kit runs."""
        per_run = statistics.median(self.run_s) if self.run_s else 0.3
        return (C.BY_ID[cid].cost_in_runs if cid in C.BY_ID else 0) * per_run

    def log(self, msg: str) -> None:
        self.log_lines.append(f"{time.strftime('%H:%M:%S')} {msg}")
        print(msg, file=sys.stderr, flush=True)


def spawn(ctx: Ctx, argv, ro: dict, rw: dict, chdir: str, limits: dict, keep: int,
          env: dict | None = None, trace: str = ""):
    """An inner sandbox whose output is drained into a capped Capture: (proc, capture).
    trace: the name of a lock trace file it inherits a descriptor on (LA.trace_path)."""
    r, w = os.pipe()
    try:
        proc = ctx.launcher.spawn(argv, ro, rw, chdir, limits, stdout=w, stderr=w, env=env,
                                  trace=trace)
    finally:
        os.close(w)
    return proc, safeio.Capture(r, keep)


class Server:
    """One sandboxed server process (kit command line) in its own fresh working folder."""

    def __init__(self, ctx: Ctx, bin_dir: Path, name: str, n: int, tag: str, wrap=(),
                 extra_ro: dict | None = None, trace: bool = False):
        """trace: the server inherits a descriptor on a lock trace file (self.trace)."""
        self.ctx, self.name, self.n = ctx, name, n
        ctx.launcher.call(op="mkdir", path=f"runs/{tag}")
        self.run_dir = Path(S.SCRATCH) / "runs" / tag
        self.trace = LA.trace_path(tag) if trace else None
        self.asked = ctx.next_port()
        argv = [*wrap, f"/sub/bin/{name}", str(n), "127.0.0.1", str(self.asked)]
        self.proc, self.output = spawn(ctx, argv, {bin_dir: "/sub/bin", **(extra_ro or {})},
                                       {self.run_dir: "/sub/run"}, "/sub/run", ctx.limits,
                                       SERVER_OUTPUT_KEEP, trace=tag if trace else "")
        self.port = None
        self.stopped_by_us = False

    def wait_ready(self, timeout: float) -> str:
        """'' when listening (self.port set), else why not. Seen in this sandbox's own
        socket table (the server runs as another uid, so its descriptors are not ours to
        read); ports are never reused within a grading."""
        want = [ports.twin(self.asked), self.asked]
        self.port, why = ks.wait_for_port(want, ks.listening_ports, self.alive, timeout, 0.05)
        if why == "exited":
            return f"exited before listening ({self.death()})"
        if why:
            return (f"not listening on port {want[0]} (kit quirk) or {self.asked} "
                    f"within {timeout:g} s")
        return ""

    @property
    def quirk(self) -> bool:
        return self.port == ports.twin(self.asked)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def death(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        sig = S.exit_signal(code)
        if sig:
            return ks.describe_exit(-sig)
        return ks.describe_exit(code)

    def stop(self) -> str:
        """Stops it (SIGKILL to the sandbox: a kit server has no handler anyway). Returns
        '' if it was still running, else how it had ended."""
        ended = "" if self.alive() else self.death()
        if not ended:
            self.stopped_by_us = True
            self.proc.kill()
        self.output.join()
        return ended

    def timing_lines(self) -> tuple:
        """(lines or None when absent, '' or why the file was not read). Never follows a
        link, never reads more than safeio.READ_CAP bytes."""
        try:
            text, cut = safeio.read_text(self.run_dir / TIMING)
        except FileNotFoundError:
            return None, ""
        except safeio.Unsafe as e:
            return None, f"{TIMING} is {e}: not read"
        lines = text.splitlines()
        return lines, (f"only the first {safeio.READ_CAP} bytes read ({cut} more)" if cut
                       else "")


def check(cid, title, status, evidence, **data) -> dict:
    return {"id": cid, "title": title, "status": status,
            "evidence": evidence if isinstance(evidence, list) else [evidence], **data}


# ---- build ------------------------------------------------------------------------------

SOURCES = (".c", ".cpp", ".cc")


def _make(ctx: Ctx, bdir: Path, args: list, limits: dict, fcommon: bool) -> tuple:
    """One make in an inner sandbox: (exit status or None on timeout, output text, line)."""
    ro, env = {}, None
    if fcommon:
        tools = ctx.launcher.call(op="tools")["dir"]
        ro, env = {tools: "/sub/tools"}, {"PATH": "/sub/tools:/usr/bin:/bin"}
    code, text, took = _run(ctx, bdir, ["make", *args], limits, ro, env)
    return code, text, took.replace(":", " (with -fcommon):", 1) if fcommon else took


def _run(ctx: Ctx, bdir: Path, argv: list, limits: dict, ro=None, env=None) -> tuple:
    """A build command in the copy: (exit status or None on timeout, output, one line)."""
    t0 = time.monotonic()
    proc, out = spawn(ctx, argv, ro or {}, {bdir: "/sub/src"}, "/sub/src", limits,
                      safeio.KEEP, env)
    try:
        code = proc.wait(ctx.cfg["build_timeout_s"])
    except subprocess.TimeoutExpired:
        proc.kill()
        code = None
    out.join()
    what = " ".join(argv)
    took = (f"{what}: did not finish within {ctx.cfg['build_timeout_s']:g} s"
            if code is None else f"{what}: exit status {code} after "
            f"{time.monotonic() - t0:.1f} s" + (
                f", {out.total} bytes of output (cut: only the first and last "
                f"{safeio.KEEP >> 10} KiB kept)" if out.total > 2 * safeio.KEEP else ""))
    return code, out.text(), took


def built(bdir: Path, names=labs.FOUR) -> list:
    """The executables of `names` in bdir."""
    return [m for m in names if (bdir / m).is_file() and os.access(bdir / m, os.X_OK)]


def _tell_lab(ctx, bdir: Path) -> None:
    """The lab version, when --lab did not say: from what the first make built (or what
    was handed in) and the submission's own common.h."""
    if ctx.lab is not None:
        return
    common, makefile = (_first_bytes(bdir / name) for name in ("common.h", "Makefile"))
    if makefile is None:
        makefile = _first_bytes(bdir / "makefile")
    ctx.lab, ctx.lab_why = labs.detect(built(bdir, labs.CANDIDATES), common, makefile)


def _first_bytes(path: Path) -> bytes | None:
    """Up to 64 KiB of a file the submission wrote (never through a link), or None."""
    try:
        return safeio.read_bytes(path, 1 << 16)[0]
    except (FileNotFoundError, safeio.Unsafe):
        return None


def _steps(ctx, bdir, extra, limits) -> tuple:
    """make as a TA would: plain make, then `make all`, then each missing server by name;
    a step whose link failed on multiple definitions is tried again with -fcommon.
    Returns (evidence lines, servers the plain make built, fcommon needed, the first
    failing step's output)."""
    lines, first, fcommon, failure = [], None, False, []
    plan = [list(extra)]
    while plan:
        args = plan.pop(0)
        code, text, took = _make(ctx, bdir, args, limits, fcommon)
        if code not in (0, None) and not fcommon and P.multiple_definitions(text):
            lines += [took, P.FCOMMON_FIX]
            fcommon = True  # -B: objects the failed make compiled are up to date, not fixed
            code, text, took = _make(ctx, bdir, ["-B", *args], limits, fcommon)
        if first is None:
            _tell_lab(ctx, bdir)
        servers = ctx.lab.servers
        have = built(bdir, servers)
        lines.append(took + f"; built so far: {', '.join(have) or 'none'}")
        if code != 0 and not failure:  # the first failure says most
            failure = text.splitlines()[-15:]
        if first is None:
            first = have
            plan = [[*extra, *step] for step in P.make_steps([m for m in servers
                                                               if m not in have])]
        elif len(have) == len(servers):
            break
    return lines, first or [], fcommon, failure


def _layout(ctx, tag: str, bdir: Path, extra: list, limits: dict) -> list:
    """The course's --layout (mainN=NAME: the server mainN is built as NAME): each missing
    mainN becomes a link to NAME, made with `make NAME` first if needed. Without a layout,
    a hint when another executable is there."""
    layout, lines = ctx.cfg.get("layout") or {}, []
    for server, name in layout.items():
        if (bdir / server).exists():
            continue
        if name.endswith(SOURCES) and (bdir / name).is_file():
            compiler = "cc" if name.endswith(".c") else "c++"
            _, text, took = _run(ctx, bdir, [compiler, "-O2", "-pthread", "-o", server, name,
                                             "-lpthread"], limits)
            lines += [took, *text.splitlines()[-5:]]
            continue
        if not (bdir / name).is_file():
            code, _, took = _make(ctx, bdir, [*extra, name], limits, False)
            lines.append(took)
        if (bdir / name).is_file():
            ctx.launcher.call(op="alias", tag=tag, name=server, target=name)
            lines.append(f"layout: {server} is {name}")
    servers = ctx.lab.servers
    missing = [m for m in servers if m not in built(bdir, servers)]
    others = sorted(p.name for p in bdir.iterdir() if p.is_file() and not p.is_symlink()
                    and (p.name.endswith(SOURCES) or os.access(p, os.X_OK)
                         and not P.describe_binary(_head(p)))
                    and p.name not in servers)[:8] if missing and not layout else []
    if others:
        lines.append(f"{', '.join(missing)} missing; executables and sources found: "
                     f"{', '.join(others)}. If they are the servers, grade with --layout "
                     + ",".join(f"{m}={P.layout_guess(m, others)}" for m in missing)
                     + " (a make target, a built file, or a .c/.cpp file compiled alone)")
    return lines


def _head(path: Path) -> bytes:
    try:
        return safeio.read_bytes(path, 64)[0]
    except (OSError, safeio.Unsafe):
        return b""


def build(ctx: Ctx, tag: str, extra_make: list, limits: dict) -> tuple:
    """The submission copied into scratch/`tag` by the launcher, or unpacked there when it
    is a zip (links that leave it and anything over the size caps are not copied, and said
    so; with a Makefile the handed-in servers are set aside so make must build them), then
    make as a TA would. Returns (status, evidence lines, bin_dir, fraction)."""
    copied = ctx.launcher.call(op="copy", dst=tag, set_aside=list(labs.CANDIDATES))
    unpacked = copied.get("unpacked")  # a zip handed in: its notes say what was left out
    notes = [*([unpacked] if unpacked else []),
             *(n if unpacked is not None else f"not copied: {n}" for n in copied["notes"])]
    for name, head in copied["set_aside"].items():
        what = P.describe_binary(bytes.fromhex(head)) or "a binary"
        notes.append(f"handed-in {name} ({what}) set aside: make must build it")
    bdir = Path(S.SCRATCH) / tag
    if not copied["makefile"]:
        for m in labs.CANDIDATES:
            try:
                head, _ = safeio.read_bytes(bdir / m, 64)
            except (FileNotFoundError, safeio.Unsafe):
                continue
            what = P.describe_binary(head)
            if what:
                notes.append(f"handed-in {m} is {what}: not used")
                ctx.launcher.call(op="unlink", path=f"{tag}/{m}")
        _tell_lab(ctx, bdir)
        layout = _layout(ctx, tag, bdir, [], limits)
        return "skip", ["no Makefile: using the binaries as handed in", *layout, *notes], \
            bdir, 0.0
    lines, first, fcommon, failure = _steps(ctx, bdir, extra_make, limits)
    lines += _layout(ctx, tag, bdir, extra_make, limits)
    servers = ctx.lab.servers
    have = built(bdir, servers)
    lines += notes
    if len(first) == len(servers) and not fcommon:
        return "pass", lines, bdir, 1.0
    if len(have) < len(servers):
        lines.append(f"not built by any step: {', '.join(m for m in servers if m not in have)}"
                     "; the first make that failed said:")
        lines += failure
    elif len(first) < len(servers):
        lines.append("plain `make` built " + (f"only {', '.join(first)}" if first else
                                              f"none of {ctx.lab.names()}")
                     + f": make the first target (or `all`) build {' '.join(servers)}")
    return "fail", lines, bdir, len(first) / len(servers) if not fcommon else 0.0


# ---- checks -----------------------------------------------------------------------------

def start(ctx, bin_dir, name, n, tag):
    s = Server(ctx, bin_dir, name, n, tag)
    why = s.wait_ready(ctx.cfg["ready_timeout_s"])
    return s, why


def check_initial(ctx, bin_dir, servers) -> tuple:
    """Starts each server with the kit command line; checks port quirk and initial values."""
    n = ctx.cfg["init_n"]
    cmdline_ev, init_ev, cmd_ok, init_ok = [], [], True, True
    for name in servers:
        s, why = start(ctx, bin_dir, name, n, f"{name}_initial")
        if why:
            cmd_ok = init_ok = False
            cmdline_ev.append(f"{name} {n} 127.0.0.1 {s.asked}: {why}")
            init_ev.append(f"{name}: not checked (did not start)")
            s.stop()
            continue
        if s.quirk:
            cmdline_ev.append(f"{name} {n} 127.0.0.1 {s.asked}: listening on {s.port} "
                              "(the kit's byte-swapped port)")
        else:
            cmd_ok = False
            cmdline_ev.append(f"{name} {n} 127.0.0.1 {s.asked}: listening on {s.port}, not on "
                              f"{ports.twin(s.asked)}: the kit client cannot reach it (htons?)")
        bad = []
        for i in range(n):
            got, err = K.exchange(s.port, K.frame(K.request_text(i, True, "")),
                                  ctx.cfg["request_timeout_s"])
            if err:
                bad.append(f"slot {i}: {err}" + ("" if s.alive() else f" (server {s.death()})"))
                break
            if got != initial_value(i):
                bad.append(f"slot {i}: {got!r}, expected {initial_value(i)!r}")
        if bad:
            init_ok = False
            init_ev.append(f"{name} (n={n}): {len(bad)} deviation(s): " + "; ".join(bad[:3])
                           + (" ..." if len(bad) > 3 else ""))
        else:
            init_ev.append(f"{name} (n={n}): all {n} strings are 'String i: the initial value'")
        s.stop()
    return (check("cmdline", C.title("cmdline", ctx.lab), "pass" if cmd_ok else "fail",
                  cmdline_ev),
            check("initial", C.title("initial"),
                  "pass" if init_ok else "fail", init_ev))


def describe_failure(s: Server, failed: list) -> str:
    first = min(failed, key=lambda r: r.start)
    if not s.alive():
        inflight = [r for r in failed if r.error and "refused" not in r.error]
        culprit = min(inflight, key=lambda r: r.start) if inflight else first
        return (f"crashed: {s.death()}; the first request that got no reply: "
                f"{K.request_text(culprit.pos, culprit.is_read, culprit.text)!r} "
                f"({len(inflight)} in flight)")
    timeouts = [r for r in failed if "no reply" in r.error]
    if timeouts:
        return (f"hangs: {len(timeouts)} request(s) got no reply within "
                f"{ctx_timeout(timeouts)}, e.g. {first.describe()}")
    return f"errors: {first.describe()}"


def ctx_timeout(reqs):
    return reqs[0].error.split("within ")[-1]


def _new_entry() -> dict:
    return {"runs": 0, "runs_done": 0, "requests_ok": 0, "failure": "", "client_mean_s": [],
            "client_wall_s": [], "timing": None, "timing_problem": "", "history": None}


def _one_run(ctx, s, entry, n, r) -> None:
    """One kit client run (1000 requests) against a started server; records its outcome."""
    done, wall = K.drive(s.port, K.kit_plan(n), ctx.cfg["request_timeout_s"])
    ok = [q for q in done if q.ok]
    failed = [q for q in done if not q.ok]
    entry["requests_ok"] += len(ok)
    if r == 0:
        entry["history"] = done
    if failed or len(done) < K.THREADS * K.PER_THREAD:
        time.sleep(0.2)
        entry["failure"] = (f"run {r + 1}: " + describe_failure(s, failed) if failed
                            else f"run {r + 1}: only {len(done)} requests finished")
        return
    entry["runs_done"] += 1
    entry["client_mean_s"].append(statistics.fmean(q.end - q.start for q in ok))
    entry["client_wall_s"].append(wall)
    ctx.run_s.append(wall)
    if ctx.cfg["pause_s"]:
        time.sleep(ctx.cfg["pause_s"])


def _await_lines(ctx, s: Server, count: int) -> None:
    """The last batch's line is written after the last reply: gives it a moment."""
    deadline = time.monotonic() + ctx.cfg["timing_wait_s"]
    while (time.monotonic() < deadline and s.alive()
           and len(s.timing_lines()[0] or []) < count):
        time.sleep(0.05)


def _finish(ctx, s, entry, tag, runs) -> None:
    _await_lines(ctx, s, entry["runs_done"])
    ended = s.stop()
    if ended and not entry["failure"]:
        entry["failure"] = f"ended after the runs: {ended}"
    entry["timing"], entry["timing_problem"] = s.timing_lines()
    ctx.log(f"  {tag}: {entry['runs_done']}/{entry['runs']} runs"
            + (f", {entry['failure']}" if entry["failure"] else ""))


def _slot_end(ctx, sizes_left: int) -> float:
    """When the runs at this n must stop under a time budget: what is left once the later
    checks are provided for (at this machine's pace so far), split evenly over the sizes
    still to run; infinite without a budget."""
    if not ctx.budget_s:
        return math.inf
    later = sum(ctx.cost(c.id) for c in C.CHECKS if c.cost_in_runs)
    now = time.monotonic()
    return now + max(0.0, ctx.left() - later) / sizes_left


def workload(ctx, bin_dir, servers, sizes, runs, tag_prefix="") -> dict:
    """The kit workload like test.sh: per server and n a fresh server, `runs` client runs
    (fewer, never below MIN_RUNS, when a time budget would run out: entry['runs'] says how
    many were asked of that setting). The servers of one n are started side by side and
    take their runs in turns, in a shuffled order each round, so a burst of noise on the
    machine hits them alike and the speed check can compare them round by round. Returns
    {name: {n: {...}}}."""
    res: dict = {}
    rng = random.Random(20261124)
    for i, n in enumerate(sizes):
        stop_at = _slot_end(ctx, len(sizes) - i)
        live = {}
        for name in servers:
            tag = f"{tag_prefix}{name}_n{n}"
            entry = res.setdefault(name, {})[n] = _new_entry()
            s, why = start(ctx, bin_dir, name, n, tag)
            if why:
                entry["failure"] = f"did not start: {why}"
                s.stop()
                continue
            live[name] = (s, entry, tag)
        order, asked = list(live), runs
        for r in range(runs):
            if r >= MIN_RUNS and time.monotonic() > stop_at:
                asked = r
                break
            rng.shuffle(order)
            for name in order:
                s, entry, _ = live[name]
                if not entry["failure"]:
                    _one_run(ctx, s, entry, n, r)
        for name in servers:
            res[name][n]["runs"] = asked
        for s, entry, tag in live.values():
            _finish(ctx, s, entry, tag, runs)
    return res


def check_workload(wl, runs) -> dict:
    ev, ok = [], True
    for name, per_n in wl.items():
        for n, e in per_n.items():
            asked = e.get("runs") or runs
            if e["failure"]:
                ok = False
                ev.append(f"{name} n={n}: {e['failure']} ({e['runs_done']}/{asked} runs "
                          "complete)")
            else:
                ev.append(f"{name} n={n}: {asked} runs, {e['requests_ok']} requests, no errors")
    cut = sorted({e.get("runs") for v in wl.values() for e in v.values()
                  if e.get("runs") and e["runs"] < runs})
    if cut:
        ev.append(f"the grader's time budget cut the runs per setting from {runs} to "
                  f"{', '.join(map(str, cut))}")
    total = sum(len(v) for v in wl.values())
    good = sum(1 for v in wl.values() for e in v.values() if not e["failure"])
    return check("workload", C.title("workload"),
                 "pass" if ok else "fail", ev, fraction=good / total if total else 0.0)


def parse_timing(line: str, lab=None):
    """A timing line's mean latency (s): the number, or for a lab whose lines are sums
    (2018) the number / 1000; None when it is not a number."""
    try:
        v = float(line.strip())
    except ValueError:
        return None
    return v / 1000 if lab is not None and lab.timing == "sum" else v


def _floor(lab) -> float:
    """The lowest plausible mean: every access sleeps usleep(10), except in the 2018 kit."""
    return LATENCY_FLOOR_S if lab is None or lab.delay else 0.0


AFTER_LOCK_SHARE = 0.25  # main1's probe lines below this share of its lock waiting: left out
TIMING_FIXES = {
    "missing": f"write {TIMING} in the server's working folder: after every 1000 requests "
               "append their mean latency in seconds with fprintf(f, \"%e\\n\", mean)",
    "format": "print one number per line with %e (a double, not a pointer or an integer)",
    "count": "write exactly one line per 1000 requests (a batch), no more, no less",
    "late": "write a batch's line as soon as its 1000th request has been served (after "
            "joining that batch's threads), not when the next batch's first connection "
            "arrives: the file must not stay one line behind while the server runs",
    "floor": "each request sleeps usleep(10) in the array access, so a mean below 5 us "
             "means the clock or the division is wrong",
    "sum": "the lines look like the sum of the 1000 latencies: divide by 1000 for the mean",
    "after_lock": "the timing lines leave out the lock waiting the grader's client saw: start "
                  "the clock when the request has been read, before pthread_mutex_lock, and "
                  "keep each request's start time in a local variable of its own thread (a "
                  "start time in a global shared by all threads is a race: a thread then "
                  "measures from whichever request started last)",
    "above": "a latency above what the client itself waited cannot be: check the clock "
             "(one start and end time per thread, not shared globals) and the units",
    "unsafe": f"{TIMING} must be a regular file the server writes, not a link",
}


def _line_problems(lines, clients, lab=None) -> list:
    """[(kind, text)] for the lines of one setting, at most 4."""
    out, floor = [], _floor(lab)
    sums = lab is not None and lab.timing == "sum"
    for i, line in enumerate(lines):
        v = parse_timing(line, lab)
        quoted = repr(line[:40])
        client = clients[i] if i < len(clients) else None
        if v is None or not math.isfinite(v) or v <= 0:
            out.append(("format", f"line {i + 1} {quoted} is not a positive finite number"))
        elif v < floor:
            out.append(("floor", f"line {i + 1} {quoted} is below {floor:g} s, "
                                 "impossible with usleep(10) per access"))
        elif client is not None and v > client * 1.5:
            sum_like = not sums and floor <= v / 1000 <= client * 1.5
            out.append(("sum" if sum_like else "above",
                        f"line {i + 1} {quoted} is above the client's own mean latency "
                        f"{client:.3e} s" + (" (about 1000 times a mean: a sum?)"
                                             if sum_like else "")))
        if len(out) >= 4:
            break
    return out


def _setting_problems(e, lab=None) -> list:
    lines, done = e["timing"], e["runs_done"]
    if lines is None:
        return [("unsafe" if e.get("timing_problem") else "missing",
                 e.get("timing_problem") or f"no {TIMING} file")]
    out = [("unsafe", e["timing_problem"])] if e.get("timing_problem") else []
    if len(lines) == done - 1 and not e.get("failure"):
        out.append(("late", f"{len(lines)} lines for {done} complete runs of 1000 requests: "
                            "the last batch's line was not written while the server ran on"))
    elif len(lines) != done:
        out.append(("count", f"{len(lines)} lines for {done} complete runs of 1000 requests"))
    return out + _line_problems(lines, e["client_mean_s"], lab)


PROBE_OUTSTANDING = 100  # requests the clock probe keeps in a server at once: the kit's
                         # 100 client threads
UNACCEPTED_MAX = 10      # connections a server leaves unaccepted while idle: more, and
                         # requests wait before it reads them (a fixed pool of threads)
PROBE_BATCHES = 3        # batches of 1000 requests per server, one timing line each


def _probe_plan(n: int) -> list:
    """The kit's 1000 requests at n, request j of every client thread before request j+1
    of any (the order the kit's 100 threads would roughly send them in)."""
    plan = K.kit_plan(n)
    return [mine[j] for j in range(K.PER_THREAD) for mine in plan]


def _probe_servers(ctx, bin_dir, present: list) -> tuple:
    """(the server whose lines are judged, [(label, folder, executable)] of those whose
    clients' waiting it is compared with, their names in words) or (None, why not). The
    four-server lab: main1 against main2 and main4; a one-server lab: main against the
    grader's own kit-style rwlock per string."""
    if ctx.lab.speed:
        others = [(m, bin_dir, m) for m in ("main2", "main4") if m in present]
        if "main1" not in present or not others:
            return None, "needs main1 and main2 or main4"
        return "main1", others, "main2's and main4's"
    judged, refs = ctx.lab.first, Path(S.REFERENCE)
    if not ctx.lab.delay:
        return None, NO_DELAY
    if judged not in present:
        return None, f"needs {judged}"
    if not (refs / REF_PER_STRING).is_file():
        return None, f"needs a server to compare with: {NO_REFS}"
    return judged, [(REF_PER_STRING, refs, REF_PER_STRING)], \
        f"the grader's rwlock per string's ({REF_PER_STRING})"


def clock_probe(ctx, bin_dir, present: list) -> dict:
    """What the timing lines must contain, measured by the grader: the judged server and
    those it is compared with (_probe_servers), at the largest n, each take PROBE_BATCHES
    batches of the kit's 1000 requests with PROBE_OUTSTANDING of them waiting in the server
    at once (K.window), in turns, and write one line per batch. Against the grader's own
    servers, each is started afresh for each batch and stopped after its line: nothing of
    the submission runs during theirs, and each is measured alike. Returns {'n',
    'judged', 'against', label: {'client': [mean s a batch], 'lines', 'why'}} or {'why':
    what kept it from running}."""
    judged, *rest = _probe_servers(ctx, bin_dir, present)
    if judged is None:
        return {"why": rest[0]}
    others, against = rest
    n, fresh = max(ctx.cfg["sizes"]), not ctx.lab.speed
    res: dict = {"n": n, "judged": judged, "against": against}
    where = {label: (folder, exe) for label, folder, exe in [(judged, bin_dir, judged), *others]}
    servers: dict = {}

    def up(label: str, tag: str) -> None:
        s, why = start(ctx, *where[label], n, tag)
        if why:
            s.stop()
            res[label]["why"] = f"did not start ({why})"
        else:
            servers[label] = s

    def down(label: str) -> None:
        s = servers.pop(label)
        _await_lines(ctx, s, len(res[label]["client"]) - res[label]["before"])
        s.stop()
        res[label]["lines"] = (res[label]["lines"] or []) + (s.timing_lines()[0] or [])
        res[label]["before"] = len(res[label]["client"])

    for label in where:
        res[label] = {"client": [], "lines": None, "unaccepted": 0, "why": "", "before": 0}
        if not fresh:
            up(label, f"{label}_clock")
    rng = random.Random(20261126)
    order = list(where)
    for b in range(PROBE_BATCHES):
        rng.shuffle(order)
        for label in order:
            e = res[label]
            if fresh and not e["why"]:
                up(label, f"{label}_clock{b}")
            if e["why"]:
                continue
            _probe_batch(ctx, servers[label].port, n, e)
            if fresh:
                down(label)
    for label in list(servers):
        down(label)
    for e in res.values():
        if isinstance(e, dict):
            e.pop("before", None)
    return res


def _probe_batch(ctx, port: int, n: int, e: dict) -> None:
    """One probe batch on the server at `port`; its client mean, or why it failed, in e."""
    reqs = _probe_plan(n)
    err, waiting = K.window(port, reqs, PROBE_OUTSTANDING, ctx.cfg["request_timeout_s"],
                            lambda: ks.accept_queue(port) or 0)
    e["unaccepted"] = max(e["unaccepted"], waiting or 0)
    if err:
        e["why"] = err
    else:
        e["client"].append(statistics.fmean(r.end - r.start for r in reqs))


def _probe_problem(probe) -> tuple:
    """(True when the judged server's probe lines leave the lock waiting out | False | None
    not judged, evidence line). A probe without 'judged' is the four-server lab's."""
    judged = (probe or {}).get("judged", "main1")
    against = (probe or {}).get("against", "main2's and main4's")
    head = f"{judged} under the grader's clock probe"
    if probe is None or probe.get("why"):
        return None, f"{head}: not run ({probe['why'] if probe else 'no kit workload'})"
    head += (f" (n={probe['n']}, batches of 1000 requests with {PROBE_OUTSTANDING} waiting "
             "in the server at once)")
    one = probe[judged]
    vals = [parse_timing(x) for x in one["lines"] or []]
    if (one["why"] or len(vals) != len(one["client"])
            or not all(v is not None and math.isfinite(v) for v in vals)):
        why = one["why"] or (f"{len(vals)} timing lines for {len(one['client'])} batches"
                             if len(vals) != len(one["client"]) else
                             "a timing line that is not a finite number")
        return None, f"{head}: not judged ({why})"
    if one["unaccepted"] > UNACCEPTED_MAX:
        return None, (f"{head}: {one['unaccepted']} of 1000 open connections stayed "
                      "unaccepted, so requests wait before the server reads them (a fixed "
                      "pool of threads?) "
                      "and a clock started at the read rightly leaves that out: not judged")
    others = {m: statistics.median(e["client"]) for m, e in probe.items()
              if isinstance(e, dict) and m != judged and e.get("client")}
    mine = statistics.median(one["client"])
    if not others or mine < 1.5 * min(others.values()):
        return None, (f"{head}: its clients waited {mine:.3e} s, {against} "
                      f"{min(others.values(), default=math.nan):.3e} s: no lock waiting "
                      "stands out, so the clock is not judged on it")
    wait, line = mine - min(others.values()), statistics.median(vals)
    if wait > 1e-3 and line < AFTER_LOCK_SHARE * wait:
        return True, (f"{head}: median line {line:.3e} s is below {AFTER_LOCK_SHARE:g} x "
                      f"the {wait:.3e} s of lock waiting the client saw (its wait beyond "
                      f"{against}): the lock waiting is left out (a clock started "
                      "after the lock, or start times shared between threads)")
    return False, (f"{head}: median line {line:.3e} s against {wait:.3e} s of lock waiting "
                   f"the client saw beyond {against}: the lock waiting is in")


def check_timing(wl, runs, probe=None, lab=None) -> dict:
    """The lab's deliverable, judged against what the grader measured itself: the kit
    workload's lines, and main1's lines under the clock probe. It can cost only this
    check's points. lab: whose lines are means or sums (the 2018 kit's)."""
    ev, kinds, good = [], [], 0
    for name, per_n in wl.items():
        for n, e in per_n.items():
            problems = _setting_problems(e, lab)
            if problems:
                ev.append(f"{name} n={n}: " + "; ".join(text for _, text in problems))
                kinds += [k for k, _ in problems if k not in kinds]
            else:
                good += 1
                ev.append(f"{name} n={n}: {len(e['timing'])} plausible %e lines"
                          + (" (sums of 1000 latencies, as the 2018 kit writes)"
                             if lab is not None and lab.timing == "sum" else ""))
    total = sum(len(v) for v in wl.values())
    left_out, line = _probe_problem(probe)
    ev.append(line)
    if left_out is not None:
        total, good = total + 1, good + (not left_out)
    if left_out:
        kinds.append("after_lock")
    return check("timing", C.title("timing", lab), "fail" if kinds else "pass", ev,
                 fraction=good / total if total else 0.0, fix=[TIMING_FIXES[k] for k in kinds])


def _attack(ctx, s, n: int) -> tuple:
    """Rounds of attacker-shaped load on four slots, each history checked from what the
    slots held before it; ([(slot, violation)], [what could not be checked])."""
    slots = [k * n // 4 for k in range(4)]
    initial = K.read_slots(s.port, slots, ctx.cfg["request_timeout_s"])
    bad, unchecked = [], []
    for rnd in range(ctx.cfg["attack_rounds"]):
        plan = K.attack_plan(n, seed=rnd + 1, requests=ctx.cfg["attack_requests"])
        done, _ = K.drive(s.port, plan, ctx.cfg["request_timeout_s"])
        failed = [q for q in done if not q.ok]
        if failed:  # a crash or hang is the workload check's finding; no verdict here
            unchecked.append(f"attacker load: {len(failed)} request(s) failed ("
                             + describe_failure(s, failed) + ")")
            break
        for slot, r in L.check_history(done, initial, ctx.cfg["max_states"]).items():
            if r.ok is False:
                bad.append((slot, r))
            elif r.ok is None:
                unchecked.append(f"attacker load, slot {slot}: search {r.explanation}")
        if bad or not s.alive():
            break
        # next round starts from what the slots hold now
        initial = K.read_slots(s.port, slots, ctx.cfg["request_timeout_s"])
    return bad, unchecked


def _kit_histories(ctx, per_n: dict, unchecked: list) -> list:
    """The first kit run of each n, checked; [(n, slot, violation)]."""
    bad = []
    for n_kit, e in per_n.items():
        if e["history"] and e["failure"]:
            unchecked.append(f"kit run at n={n_kit}: requests failed")
        elif e["history"]:
            for slot, r in L.check_history(e["history"], None, ctx.cfg["max_states"]).items():
                if r.ok is False:
                    bad.append((n_kit, slot, r))
                elif r.ok is None:
                    unchecked.append(f"kit run at n={n_kit}, slot {slot}: "
                                     f"search {r.explanation}")
    return bad


WRITE_PROBE = "lockbench write probe"
OLD_VALUE_FIX = ("answer a write with the string after it: set the string, then read it "
                 "back for the reply (under the same lock), not the other way round")


def _write_reply(ctx, s, name: str) -> str:
    """One read, then one write, alone, of string 0 of a fresh server: '' when the write's
    reply is the string it wrote, else what is wrong (the string it replaced named)."""
    timeout = ctx.cfg["request_timeout_s"]
    before, _ = K.exchange(s.port, K.frame(K.request_text(0, True, "")), timeout)
    got, err = K.exchange(s.port, K.frame(K.request_text(0, False, WRITE_PROBE)), timeout)
    if err or got == WRITE_PROBE:
        return ""  # no answer at all is the workload's and robustness's to judge
    old = " (the string it replaced: get before set)" if got == before else ""
    return (f"{name}: a write of {WRITE_PROBE!r} to string 0, alone, was answered "
            f"{got!r}{old}, not the string it wrote")


def check_consistency(ctx, bin_dir, servers, wl) -> dict:
    """Attacker-shaped load with a recorded history, per-slot linearizability; plus the
    histories of the first kit run of every setting. Before the load, one write alone: its
    reply must be what it wrote."""
    n = 100
    ev, ok, examples, fix = [], True, [], []
    for name in servers:
        s, why = start(ctx, bin_dir, name, n, f"{name}_attack")
        if why:
            ev.append(f"{name}: not checked ({why})")
            ok = False
            s.stop()
            continue
        reply = _write_reply(ctx, s, name)
        if reply:
            ok = False
            ev.append(reply)
            fix = [OLD_VALUE_FIX]
        bad_here, unchecked = _attack(ctx, s, n)
        died = "" if s.alive() else s.death()
        s.stop()
        kit_bad = _kit_histories(ctx, wl.get(name, {}), unchecked)
        if bad_here or kit_bad:
            ok = False
            ev.append(f"{name}: NOT linearizable: {len(bad_here)} slot(s) under the attacker's "
                      f"load, {len(kit_bad)} under the kit workload")
            for slot, r in bad_here[:1]:
                examples.append(f"{name}, slot {slot} (attacker load):\n{r.explanation}")
            for n_kit, slot, r in kit_bad[:1]:
                examples.append(f"{name}, n={n_kit}, slot {slot} (kit workload):\n{r.explanation}")
        elif unchecked:
            ev.append(f"{name}: no violation seen, but not fully checked: " + "; ".join(unchecked))
        else:
            ev.append(f"{name}: every slot linearizable (attacker load x{ctx.cfg['attack_rounds']}"
                      f" and the first kit run of each n)" + (f"; server {died}" if died else ""))
    return check("consistency", C.title("consistency"),
                 "pass" if ok else "fail", ev, counterexamples=examples,
                 **({"fix": fix} if fix else {}))


def idle_one(ctx, bin_dir, name) -> tuple:
    s, why = start(ctx, bin_dir, name, 10, f"{name}_idle")
    if why:
        s.stop()
        return False, f"{name}: not checked ({why})"
    try:
        idle = socket.create_connection(("127.0.0.1", s.port), timeout=2)
    except OSError as e:
        s.stop()
        return False, f"{name}: cannot connect ({e})"
    time.sleep(0.2)
    done, wall = K.drive(s.port, K.kit_plan(10, threads=20), ctx.cfg["idle_timeout_s"])
    served = sum(q.ok for q in done)
    idle.close()
    s.stop()
    if served < 200:
        return False, (f"{name}: with one silent connection open, {served} of 200 kit requests "
                       f"were served (each given {ctx.cfg['idle_timeout_s']:g} s)")
    return True, f"{name}: 200 of 200 requests served in {wall:.2f} s beside a silent connection"


def check_idle(ctx, bin_dir, servers) -> dict:
    """A client that connects and sends nothing must not stop others being served (the
    servers are checked side by side: this is not a measurement)."""
    with ThreadPoolExecutor(len(servers)) as pool:
        res = list(pool.map(lambda name: idle_one(ctx, bin_dir, name), servers))
    ok = all(r[0] for r in res)
    return check("idle", C.title("idle"), "pass" if ok else "fail",
                 [r[1] for r in res])


BURST = 32              # simultaneous requests of one burst (distinct slots)


def _rounds(ctx, targets: dict, rounds: int, spans: dict, failed: dict) -> None:
    """`rounds` more rounds of bursts, every target once a round in a shuffled order, so
    noise on the machine hits them alike. targets {key: (Server, positions, reads?)};
    appends to spans {key: [seconds]} and records failures {key: why}."""
    rng = random.Random(20261125 + len(next(iter(spans.values()), [])))
    order = list(targets)
    for _ in range(rounds):
        rng.shuffle(order)
        for key in order:
            if key in failed:
                continue
            s, positions, read = targets[key]
            span, err = K.burst(s.port, positions, ctx.cfg["request_timeout_s"], read=read,
                                queued=lambda port=s.port: ks.accept_queue(port))
            if err:
                failed[key] = err + ("" if s.alive() else f" (server {s.death()})")
            else:
                spans[key].append(span)


def _slower(ctx, spans: dict, slow: str, fast: str, at: tuple | None = None) -> tuple:
    """The sequential rule of the speed and design checks, on the round-by-round ratio
    spans[slow] / spans[fast]: (True when its 99 % interval lies above at[0], False when
    below at[1], else None; low, median, high, rounds). at: (speed_ratio_serial,
    speed_ratio) unless given."""
    above, below = at or (ctx.cfg["speed_ratio_serial"], ctx.cfg["speed_ratio"])
    ratios = [a / b for a, b in zip(spans[slow], spans[fast]) if b > 0]
    lo, mid, hi = median_ci(ratios, 2 * SPEED_ALPHA)
    verdict = True if lo > above else False if hi < below else None
    return verdict, lo, mid, hi, len(ratios)


def median_ci(xs: list, alpha: float) -> tuple:
    """(low, median, high): the median and a distribution-free confidence interval for it
    at level 1 - alpha, from order statistics (binomial with p = 1/2)."""
    xs, m = sorted(xs), len(xs)
    k, tail = 0, 0.0
    while k < m // 2:
        nxt = tail + math.comb(m, k) / 2 ** m
        if nxt > alpha / 2:
            break
        tail, k = nxt, k + 1
    if k == 0:
        return (float("-inf"), statistics.median(xs), float("inf"))
    return xs[k - 1], statistics.median(xs), xs[m - k]


def usleep_floor(samples: int = 200) -> float:
    """The shortest time a usleep(10) took here (seconds): a server holding one lock
    across every access cannot serve k accesses in less than k times this."""
    best = 1.0
    for _ in range(samples):
        t0 = time.monotonic()
        time.sleep(10e-6)
        best = min(best, time.monotonic() - t0)
    return best


def _start_all(ctx, bin_dir, names, n, suffix) -> tuple:
    servers, ev = {}, []
    for name in names:
        s, why = start(ctx, bin_dir, name, n, f"{name}_{suffix}")
        if why:
            s.stop()
            ev.append(f"{name}: did not start ({why})")
        else:
            servers[name] = s
    return servers, ev


SPEED_ALPHA = 0.005   # per look and side of the interval; at most SPEED_LOOKS looks
SPEED_LOOKS = 4


def _judge_speed(ctx, spans: dict, k: int, floor: float) -> tuple:
    """(status, evidence lines). Per round the ratio main1 / mainX of the paired bursts;
    its median with a 99 % interval. Concurrent (pass) when the interval lies above
    speed_ratio_serial (what two servers that both serve one at a time measure), one at a
    time (fail) when it lies below speed_ratio; otherwise 'undetermined' (measure more)."""
    pass_at, fail_at = ctx.cfg["speed_ratio"], ctx.cfg["speed_ratio_serial"]
    main1 = statistics.median(spans["main1"])
    ev = [f"main1 took {main1 * 1e3:.2f} ms (median) from the first of {k} simultaneous "
          "writes to distinct slots to the last reply; each ratio below is main1's burst "
          "over the other server's burst of the same round"]
    if main1 < k * floor:
        ev.append(f"main1 took less than {k} x usleep(10) = {k * floor * 1e3:.2f} ms, so it "
                  "does not hold one lock across every access")
    words = []
    for fast in ("main2", "main4"):
        verdict, lo, mid, hi, rounds = _slower(ctx, spans, "main1", fast)
        word = {True: "pass", False: "fail", None: "undetermined"}[verdict]
        words.append(word)
        ev.append(f"main1 / {fast}, round by round: median {mid:.2f}, 99 % interval "
                  f"{lo:.2f}-{hi:.2f} over {rounds} rounds: " + {
                      "pass": f"above {fail_at:g}, {fast} serves these requests concurrently",
                      "fail": f"below {pass_at:g}, {fast} is not clearly faster than main1: "
                              "it serves these requests one at a time (one lock for all, "
                              "or a thread joined at once)",
                      "undetermined": f"not clearly above {fail_at:g} nor below {pass_at:g}"
                  }[word])
    status = "fail" if "fail" in words else "undetermined" if "undetermined" in words else "pass"
    return status, ev


def check_speed(ctx, bin_dir, present: list) -> dict:
    """main2 and main4 clearly faster than main1, judged only from what the grader measures
    itself: fresh main1, main2 and main4 at the largest n take bursts of BURST write
    requests to distinct slots, all sent at once over connections opened beforehand, in
    turns. One lock held across each access's usleep(10) makes the replies come out at
    least one delay apart; a lock per slot lets them overlap. A sequential test: rounds
    are added until the interval decides, at most SPEED_LOOKS looks, else undetermined
    (not scored). Nothing the submission writes is used."""
    n = max(ctx.cfg["sizes"])
    title = C.title("speed")
    need = ("main1", "main2", "main4")
    missing = [m for m in need if m not in present]
    if missing:
        return check("speed", title, "skip", f"not measured: {', '.join(missing)} missing")
    positions = _spread(n, BURST)
    floor = usleep_floor()
    servers, ev = _start_all(ctx, bin_dir, need, n, "burst")
    spans: dict = {name: [] for name in servers}
    failed: dict = {}
    try:
        looks = 0
        for _ in range(SPEED_LOOKS):
            looks += 1
            _rounds(ctx, {name: (s, positions, False) for name, s in servers.items()},
                    ctx.cfg["burst_rounds"], spans, failed)
            if ev or failed:
                break
            status, lines = _judge_speed(ctx, spans, len(positions), floor)
            if status != "undetermined":
                break
    finally:
        for s in servers.values():
            s.stop()
    ev += [f"{name}: a burst of {len(positions)} requests failed: {why}"
           for name, why in failed.items()]
    if ev:
        return check("speed", title, "fail", ev)
    lines.insert(0, f"n={n}; {looks} look(s) of {ctx.cfg['burst_rounds']} rounds, the three "
                    f"servers in turns; error rate at most {2 * SPEED_ALPHA * looks:.0%}")
    cpus = ctx.cfg.get("cpus") or len(os.sched_getaffinity(0))
    if status == "fail" and cpus < 2:
        status = "undetermined"
        lines.append(f"undetermined on {cpus:g} CPU: with less than two CPUs the servers' "
                     "threads cannot run side by side, so not being faster here is not held "
                     "against main2 and main4")
    return check("speed", title, status, lines)


MALFORMED = [
    ("empty connection (connect, send nothing, close)", None),
    ("frame with no '-'", K.frame("hello")),
    ("position out of range", K.frame("100000000-1-")),
    ("negative position", K.frame("-5-1-")),
    ("100 bytes without a NUL", b"7" * 100),
    ("is_read neither 0 nor 1", K.frame("3-7-x")),
    ("client leaves before the reply (RST)", "early"),
]


def _send_probe(port: int, payload) -> None:
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=2)
        if payload == "early":
            c.sendall(K.frame("3-1-"))
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
        elif payload is not None:
            c.sendall(payload)
            c.settimeout(1)
            with contextlib.suppress(OSError):
                c.recv(100)
        c.close()
    except OSError:
        pass


def probe(ctx, bin_dir, name, payload, i) -> tuple:
    """(True survived | False did not | None not checked, what happened). After the probe
    the next request, then a whole batch of the kit workload (a kit-style server may
    survive the probe and crash when that batch completes), then a look that it lives."""
    s, why = start(ctx, bin_dir, name, 10, f"{name}_probe{i}")
    if why:
        s.stop()
        return None, f"not checked: the fresh server did not start ({why})"
    _send_probe(s.port, payload)
    time.sleep(0.15)
    _, err = K.exchange(s.port, K.frame("2-1-"), 2)
    if not err and s.alive():
        done, _ = K.drive(s.port, K.kit_plan(10), ctx.cfg["request_timeout_s"])
        time.sleep(0.3)
        failed = [q for q in done if not q.ok]
        if not s.alive():
            out = (False, "answered the next request, then died when the batch of 1000 "
                          f"requests that followed completed: {s.death()}")
        elif failed:
            out = (False, f"answered the next request, then {len(failed)} of the following "
                          f"1000 failed, e.g. {failed[0].describe()}")
        else:
            out = (True, "survived; the next request and a batch of 1000 served")
    elif not s.alive():
        out = (False, f"server died: {s.death()}")
    else:
        out = (False, f"server stopped answering ({err})")
    s.stop()
    return out


def check_robustness(ctx, bin_dir) -> dict:
    """Each probe on a fresh server (main1, or the lab's one server); a probe that could
    not run is not checked and costs nothing."""
    ev, findings, checked = [], [], 0
    who, name = C.title("robustness", ctx.lab), ctx.lab.first
    with ThreadPoolExecutor(len(MALFORMED)) as pool:  # independent fresh servers
        outs = list(pool.map(lambda a: probe(ctx, bin_dir, name, a[1][1], a[0]),
                             enumerate(MALFORMED)))
    for (what, _payload), (ok, text) in zip(MALFORMED, outs):
        ev.append(f"{what}: {text}")
        if ok is not None:
            checked += 1
        if ok is False:
            findings.append(what)
    if not checked:
        return check("robustness", who, "undetermined", ev)
    return check("robustness", who, "fail" if findings else "pass", ev,
                 findings=findings, fraction=1 - len(findings) / checked)


def tables(wl, lab=None) -> dict:
    """{name: {n: {"mean", "median" (timing file, s, None if implausible), "client"}}}."""
    out = {}
    for name, per_n in wl.items():
        for n, e in per_n.items():
            vals = [parse_timing(ln, lab) for ln in (e["timing"] or [])]
            vals = [v for v in vals if v is not None and math.isfinite(v)
                    and v >= _floor(lab)]
            out.setdefault(name, {})[str(n)] = {
                "mean": statistics.fmean(vals) if vals else None,
                "median": statistics.median(vals) if vals else None,
                "lines": len(e["timing"] or []),
                "client": statistics.median(e["client_mean_s"]) if e["client_mean_s"] else None}
    return out


TRACER = Path(S.REFERENCE) / "liblocktrace.so"
TRACE_CAP = 8 << 20
DESIGN_THREADS = 30   # of the kit client's 100, ten requests each
NO_DELAY = ("this lab's kit has no delay in the accesses, so how long a lock is held cannot "
            "be timed")


def _design_one(ctx, bin_dir, name) -> tuple:
    """(True conforms | False another design | None undetermined, evidence line, fix): one
    server with the lock tracer preloaded under 300 requests of the kit workload at
    n = 1000 (30 of its 100 threads: enough strings requested twice), then the grader's
    bursts on it; the trace file is the launcher's, the server only holds a descriptor on
    it."""
    n = 1000
    s = Server(ctx, bin_dir, name, n, f"{name}_design",
               wrap=("/usr/bin/env", "LD_PRELOAD=/sub/liblocktrace.so"),
               extra_ro={TRACER: "/sub/liblocktrace.so"}, trace=True)
    why = s.wait_ready(ctx.cfg["ready_timeout_s"])
    measured = D.Measured(error=why or NO_DELAY)
    if not why:
        K.drive(s.port, K.kit_plan(n, threads=DESIGN_THREADS), ctx.cfg["request_timeout_s"])
        if ctx.lab.delay:
            measured = _measure_design(ctx, s)
        time.sleep(0.2)
    s.stop()
    if why:
        return None, f"{name}: not checked ({why})", ""
    # a course's weights may name the designs of a one-server version's main
    allowed = ctx.cfg.get("designs", {}).get(ctx.lab.name)
    trace = D.traced(_trace_text(s.trace), n)
    ctx.traced[name] = trace.kind
    return D.judge(name, trace, measured,
                   tuple(allowed) if allowed else ctx.lab.designs.get(name, ()))


def _trace_text(path: Path) -> str | None:
    """The trace's whole lines (a cut at TRACE_CAP drops the partial last one), or None
    when there is no readable trace."""
    try:
        text, cut = safeio.read_text(path, TRACE_CAP)
    except (FileNotFoundError, safeio.Unsafe):
        return None
    return text[:text.rfind("\n") + 1] if cut else text


# kind: (reads?, all to one string?), BURST requests each
BURSTS = {"w1": (False, True), "wk": (False, False), "r1": (True, True)}
# finding of D.Measured: (the burst that takes longer when it holds, the one it is compared
# with, the ratio it is decided at: None for the speed check's pair)
FINDINGS = {"per_string": ("w1", "wk", None),
            "readers_overlap": ("w1", "r1", (D.OVERLAP_RATIO, D.OVERLAP_RATIO))}


def _measure_design(ctx, s: Server) -> D.Measured:
    """Bursts of each kind of BURSTS on a running server at n = 1000, in shuffled turns,
    until the findings its design needs are clear (the sequential rule of the speed check,
    at most SPEED_LOOKS looks)."""
    spans, failed = {kind: [] for kind in BURSTS}, {}
    targets = {kind: (s, [0] * BURST if one else _spread(s.n, BURST), read)
               for kind, (read, one) in BURSTS.items()}
    got: dict = {}
    for _ in range(SPEED_LOOKS):
        _rounds(ctx, targets, ctx.cfg["burst_rounds"], spans, failed)
        if failed:
            return D.Measured(error=f"a burst failed: {next(iter(failed.values()))}")
        got = {f: _slower(ctx, spans, slow, fast, at)
               for f, (slow, fast, at) in FINDINGS.items()}
        if None not in (verdict for verdict, *_ in got.values()):
            break
    return D.Measured(*(got[f][0] for f in FINDINGS), ratios=tuple(got[f][2] for f in FINDINGS))


def _spread(n: int, k: int) -> list:
    """k distinct strings spread over [0, n)."""
    return sorted({i * n // k for i in range(k)})


def check_design(ctx, bin_dir, present: list) -> dict:
    """The lock design each mainN really uses: its lock calls traced by an LD_PRELOAD
    interposer under the kit workload at n = 1000, confirmed by the grader's own bursts
    (design.judge). A server neither can judge is undetermined and costs nothing."""
    who = C.title("design", ctx.lab)
    if not TRACER.is_file():
        return check("design", who, "undetermined",
                     "not checked: the lock tracer (liblocktrace.so) is not built")
    res = [_design_one(ctx, bin_dir, name) for name in present]
    decided = [ok for ok, _, _ in res if ok is not None]
    status = ("fail" if False in decided else
              "pass" if decided and len(decided) == len(res) else "undetermined")
    return check("design", who, status, [line for _, line, _ in res],
                 fraction=sum(decided) / len(decided) if decided else 0.0,
                 fix=[f for _, _, f in res if f])


# The grader's own kit-style servers a one-server lab's `main` is measured against
# (analysis/grade/kitref.c): one mutex, and an rwlock per string.
REF_ONE_LOCK, REF_PER_STRING = "kitref1", "kitref4"
NO_REFS = ("the grader's own kit-style servers (kitref1, kitref4) are not built beside its "
           "lock tracer (./lockbench setup builds them)")
ONE_LOCK = (D.ONE_MUTEX, D.ONE_RWLOCK)


def _turn(ctx, where: tuple, positions: list, tag: str) -> tuple:
    """(seconds of one burst, '') on a server started afresh for it, after one burst
    unmeasured to warm it, and stopped after it; else (None, why not)."""
    s, why = start(ctx, *where, max(positions) + 1, tag)
    try:
        if why:
            return None, f"did not start for its turn ({why})"
        queued = lambda: ks.accept_queue(s.port)  # noqa: E731
        K.burst(s.port, positions, ctx.cfg["request_timeout_s"], queued=queued)
        span, err = K.burst(s.port, positions, ctx.cfg["request_timeout_s"], queued=queued)
        if err:
            return None, f"a burst failed: {err}" + ("" if s.alive() else
                                                    f" (server {s.death()})")
        return span, ""
    finally:
        s.stop()


def _turns(ctx, servers: dict, positions: list, spans: dict, rounds: int) -> tuple:
    """`rounds` rounds of write bursts, every server of servers {key: (folder,
    executable)} once a round in a shuffled order, each started afresh for its turn and
    stopped after it (_turn): nothing of one runs during another's turn, and each is
    measured alike. Returns ('', '') or (the key whose turn failed, why)."""
    rng = random.Random(20261128 + len(spans["sub"]))
    order = list(servers)
    for _ in range(rounds):
        rng.shuffle(order)
        for key in order:
            span, why = _turn(ctx, servers[key], positions, f"{key}_turn{len(spans[key])}")
            if why:
                return key, why
            spans[key].append(span)
    return "", ""


def check_concurrency(ctx, bin_dir, present: list) -> dict:
    """A one-server lab's `main` against the grader's own kit-style servers, in turns:
    bursts of BURST simultaneous writes to distinct strings at the largest n. Round by
    round, kitref1's (one mutex) burst over main's decides by the speed check's
    sequential rule whether main serves them concurrently; kitref4's (an rwlock per
    string) over main's is main's speed for the leaderboard (above 1: faster than it).
    Serving them one at a time passes only with a one-lock design traced (the slower
    choice the lab discusses), fails with a lock per string traced (serialised somewhere
    else), and is undetermined otherwise."""
    name, title = ctx.lab.first, C.title("concurrency", ctx.lab)
    refs_dir = Path(S.REFERENCE)
    if not all((refs_dir / m).is_file() for m in (REF_ONE_LOCK, REF_PER_STRING)):
        return check("concurrency", title, "undetermined",
                     f"not measured: {NO_REFS}; not scored")
    if not ctx.lab.delay:
        return check("concurrency", title, "undetermined", f"not measured: {NO_DELAY}")
    positions = _spread(max(ctx.cfg["sizes"]), BURST)
    servers = {"sub": (bin_dir, name), **{m: (refs_dir, m) for m in (REF_ONE_LOCK,
                                                                       REF_PER_STRING)}}
    spans: dict = {key: [] for key in servers}
    failed, why, looks, verdict = "", "", 0, None
    while not why and verdict is None and looks < SPEED_LOOKS:
        looks += 1
        failed, why = _turns(ctx, servers, positions, spans, ctx.cfg["burst_rounds"])
        verdict = None if why else _slower(ctx, spans, REF_ONE_LOCK, "sub")[0]
    if failed == "sub":
        return check("concurrency", title, "fail", f"{name}: {why}")
    if why:  # the grader's own server: its failure costs nothing
        return check("concurrency", title, "undetermined",
                     f"not measured: {failed}: {why}; not scored")
    return _judge_concurrency(ctx, name, title, spans, looks)


def _judge_concurrency(ctx, name, title, spans, looks) -> dict:
    verdict, lo, mid, hi, rounds = _slower(ctx, spans, REF_ONE_LOCK, "sub")
    b_lo, b_mid, b_hi, _ = _slower(ctx, spans, REF_PER_STRING, "sub")[1:]
    k = len(_spread(max(ctx.cfg["sizes"]), BURST))
    lines = [f"n={max(ctx.cfg['sizes'])}; bursts of {k} simultaneous writes to distinct "
             f"strings, {name} and the grader's own kit-style {REF_ONE_LOCK} (one mutex) and "
             f"{REF_PER_STRING} (an rwlock per string) in turns, each started afresh for each "
             f"of its turns, {looks} look(s) of {ctx.cfg['burst_rounds']} rounds; error rate "
             f"at most {2 * SPEED_ALPHA * looks:.0%}",
             f"{REF_ONE_LOCK}'s burst over {name}'s, round by round: median "
             f"{mid:.2f}, 99 % interval {lo:.2f}-{hi:.2f} over {rounds} rounds",
             f"speed against {REF_PER_STRING} (its burst over {name}'s; above 1, {name} is "
             f"faster than it): median {b_mid:.2f}, 99 % interval {b_lo:.2f}-{b_hi:.2f}"]
    board = {"speed": b_mid, "low": b_lo, "high": b_hi, "rounds": rounds,
             "against": "the grader's kit-style rwlock per string (kitref4)"}
    traced = ctx.traced.get(name, D.UNDETERMINED)
    if verdict is None:
        status = "undetermined"
        lines.append(f"not clearly faster than one mutex (above "
                     f"{ctx.cfg['speed_ratio_serial']:g}) nor as slow (below "
                     f"{ctx.cfg['speed_ratio']:g}): undetermined, not scored")
    elif verdict:
        status = "pass"
        lines.append(f"{name} serves writes to different strings concurrently")
    elif traced in ONE_LOCK:
        status = "pass"
        lines.append(f"{name} serves writes to different strings one at a time, as its "
                     f"design ({traced}, traced) does: the slower choice the lab discusses")
    elif traced in (D.MUTEX_PER_STRING, D.RWLOCK_PER_STRING):
        status = "fail"
        lines.append(f"{name} locks {traced} (traced) yet serves writes to different "
                     "strings one at a time, no faster than one mutex: its requests are "
                     "serialised somewhere else")
    else:
        status = "undetermined"
        lines.append(f"{name} serves writes to different strings one at a time, as one lock "
                     "for the whole array would; its design was not traced, so this is not "
                     "held against it")
    cpus = ctx.cfg.get("cpus") or len(os.sched_getaffinity(0))
    if status == "fail" and cpus < 2:
        status = "undetermined"
        lines.append(f"undetermined on {cpus:g} CPU: threads cannot run side by side")
    return check("concurrency", title, status, lines, leaderboard=board)


def _race_one(ctx, bdir, name) -> tuple:
    """(True racy | False clean | None not checked, evidence line)."""
    s = Server(ctx, bdir, name, 10, f"{name}_tsan", wrap=["setarch", os.uname().machine, "-R"])
    why = s.wait_ready(ctx.cfg["ready_timeout_s"])
    if not why:
        K.drive(s.port, K.kit_plan(10), ctx.cfg["request_timeout_s"])
        time.sleep(0.2)
    s.stop()
    log = s.output.text()
    races = log.count("WARNING: ThreadSanitizer: data race")
    if races:
        first = [ln.strip() for ln in log.splitlines() if ln.strip().startswith("#")][:4]
        return True, (f"{name}: {races} data race report(s); first stack: "
                      + " | ".join(first))
    fatal = next((ln for ln in log.splitlines() if "FATAL" in ln), "")
    if fatal:
        return None, f"{name}: not checked: ThreadSanitizer could not run: {fatal[:200]}"
    if why:
        return None, f"{name}: not checked ({why})"
    return False, f"{name}: no data race reported under one kit run (n=10)"


def race_check(ctx, servers) -> dict:
    """Rebuilt with -fsanitize=thread, each server under one kit run. PASS only when every
    server was checked and none raced; a server not checked makes it SKIP, never PASS."""
    lim = {**ctx.limits, "no_as": True}
    status, ev, bdir, _ = build(ctx, "build_tsan", ["CC=gcc", "CFLAGS=-O1 -g -fsanitize=thread",
                                                    "LDFLAGS=-fsanitize=thread"], lim)
    have = built(bdir)
    if not have:
        return check("races", C.title("races"), "skip",
                     ["not checked: could not rebuild with -fsanitize=thread", *ev[-3:]])
    saved, ctx.limits = ctx.limits, lim
    try:
        res = [_race_one(ctx, bdir, name) if name in have else
               (None, f"{name}: not checked: not built with -fsanitize=thread")
               for name in servers]
    finally:
        ctx.limits = saved
    racy = [r for r, _ in res]
    status = "fail" if True in racy else "skip" if None in racy or not res else "pass"
    return check("races", C.title("races"), status, [line for _, line in res])


# ---- the whole submission ---------------------------------------------------------------

# Checks that judge each server: a server that is missing fails them, for its share.


def charge_missing(checks: list, missing: list, lab) -> None:
    """A missing server fails every check that needed it: each per-server check keeps only
    the present servers' share of its points and names the missing ones; a check that is
    absent because nothing could run is added as a failure, so every page has the same
    maximum score."""
    if not missing:
        return
    have = {c["id"] for c in checks}
    for cid in C.PER_SERVER:
        if cid not in have:
            checks.append(check(cid, C.title(cid, lab), "fail", [], fraction=0.0))
    for c in checks:
        if c["id"] in C.PER_SERVER:
            base = c.get("fraction", 1.0 if c["status"] == "pass" else 0.0)
            c["fraction"] = base * (len(lab.servers) - len(missing)) / len(lab.servers)
            c["status"] = "fail"
            c["evidence"] = [f"{m}: missing, so it fails this check" for m in missing] + \
                c["evidence"]
    needs = [("robustness", (lab.first,))]
    if lab.speed:
        needs.append(("speed", ("main1", "main2", "main4")))
    for cid, need in needs:
        gone = [m for m in need if m in missing]
        if gone:
            checks[:] = [c for c in checks if c["id"] != cid]
            checks.append(check(cid, C.title(cid, lab), "fail", f"needs {', '.join(gone)}, "
                                "which is missing", fraction=0.0))


def _over_budget(ctx: Ctx, cid: str) -> str:
    """'' when what `cid` is expected to cost fits in what is left of the time budget,
    else why not."""
    need, left = ctx.cost(cid), ctx.left()
    if left >= need:
        return ""
    ctx.log(f"{cid}: skipped, {left:.0f} s of the time budget left, about {need:.0f} s needed")
    return (f"the grader's time budget ({ctx.budget_s:g} s) had {max(left, 0):.0f} s left "
            f"and this check takes about {need:.0f} s here")


def within_budget(ctx: Ctx, cid: str, run) -> dict:
    """run() when the check's expected cost fits in what is left of the time budget, else
    the check undetermined (not scored): the grader's budget never costs a point."""
    why = _over_budget(ctx, cid)
    if why:
        return check(cid, C.title(cid, ctx.lab), "undetermined",
                     f"not checked: {why}; not scored")
    ctx.log(cid)
    return run()


def probe_within_budget(ctx: Ctx, bin_dir, present) -> dict:
    """The clock probe when it fits in what is left of the time budget; else why not (the
    timing lines are then judged without it)."""
    why = _over_budget(ctx, "timing")
    if why:
        return {"why": why}
    ctx.log("clock probe")
    return clock_probe(ctx, bin_dir, present)


def grade(ctx: Ctx) -> dict:
    cfg = ctx.cfg
    checks: list = []
    ev: dict = {"checks": checks,
                "config": {k: cfg.get(k) for k in ("runs", "sizes", "quick", "budget_s",
                                                   "cpus")}}
    ctx.ev = ev
    t0 = time.monotonic()
    ctx.log("build")
    status, lines, bin_dir, frac = build(ctx, "build", [], ctx.limits)
    lab = ctx.lab
    ev["lab"] = {"name": lab.name, "servers": list(lab.servers), "what": lab.what,
                 "why": ctx.lab_why}
    checks.append(check("build", C.title("build", lab), status, lines, fraction=frac))
    present = built(bin_dir, lab.servers)
    missing = [m for m in lab.servers if m not in present]
    checks.append(check("binaries", C.title("binaries", lab), "fail" if missing else "pass",
                        f"missing: {', '.join(missing)}" if missing else
                        f"{lab.names()} present"))
    wl: dict = {}
    if present:
        wl = _kit_checks(ctx, bin_dir, present, checks)
    charge_missing(checks, missing, lab)
    if cfg.get("race"):
        ctx.log("race detector")
        checks.append(race_check(ctx, present))
    one_server_fixes(checks, lab)
    ev["tables"] = tables(wl, lab)
    ev["seconds"] = time.monotonic() - t0
    return ev


def _kit_checks(ctx: Ctx, bin_dir: Path, present: list, checks: list) -> dict:
    """Every check that runs the servers, in page order, appended to checks; returns the
    kit workload's results."""
    cfg, lab = ctx.cfg, ctx.lab
    ctx.log("command line, port quirk, initial values")
    checks.extend(check_initial(ctx, bin_dir, present))
    ctx.log(f"kit workload: {cfg['runs']} runs x n={cfg['sizes']}")
    wl = workload(ctx, bin_dir, present, cfg["sizes"], cfg["runs"])
    ctx.wl = wl
    checks.append(check_workload(wl, cfg["runs"]))
    later = {"consistency": lambda: check_consistency(ctx, bin_dir, present, wl),
             "idle": lambda: check_idle(ctx, bin_dir, present),
             "speed": lambda: check_speed(ctx, bin_dir, present),
             "design": lambda: check_design(ctx, bin_dir, present),
             "concurrency": lambda: check_concurrency(ctx, bin_dir, present),
             "robustness": lambda: check_robustness(ctx, bin_dir)}
    checks.extend(within_budget(ctx, cid, later[cid]) for cid in lab.checks if cid in later
                  and (cid != "robustness" or lab.first in present))
    ctx.probe = probe_within_budget(ctx, bin_dir, present)
    checks.append(check_timing(wl, cfg["runs"], ctx.probe, lab))
    return wl


def reference(ctx: Ctx) -> dict:
    wl = workload(ctx, Path(S.REFERENCE), labs.FOUR, ctx.cfg["sizes"], ctx.cfg["runs"],
                  tag_prefix="ref_")
    return {"tables": tables(wl)}


def hand_in(ctx: Ctx, ev: dict) -> bool:
    """Writes the evidence to stdout once (the grader reads it there); False when it was
    already handed in."""
    with ctx.out_lock:
        if ctx.handed_in:
            return False
        ctx.handed_in = True
        ev["log"] = ctx.log_lines
        sys.stdout.write(json.dumps(ev, default=str))
        sys.stdout.flush()
        return True


def out_of_time(ctx: Ctx) -> None:
    """The budget's hand-in time came with checks still running: what finished is handed
    in, every check not finished is undetermined (the grader's budget, not the
    submission's fault), and the worker ends before the outer limit stops it unheard."""
    ev = dict(ctx.ev)
    checks = list(ev.get("checks", []))
    have = {c["id"] for c in checks}
    if "timing" not in have and ctx.wl:
        checks.append(check_timing(ctx.wl, ctx.cfg["runs"], ctx.probe, ctx.lab))
        have.add("timing")
    left = [cid for cid in (ctx.lab.checks if ctx.lab else C.ORDER) if cid not in have]
    checks += [check(cid, C.title(cid, ctx.lab), "undetermined",
                     f"not finished within the grader's time budget ({ctx.budget_s:g} s); "
                     "not scored") for cid in left]
    ev.update(checks=checks, tables=tables(ctx.wl, ctx.lab), seconds=time.monotonic() - ctx.t0)
    ctx.log(f"time budget: handed in with {len(left)} check(s) unfinished")
    if hand_in(ctx, ev):
        os._exit(0)


def main() -> int:
    """Runs as an unprivileged uid inside the outer sandbox; the evidence goes to stdout
    (the grader writes every file on the host itself), the log to stderr."""
    cfg = json.loads(os.environ.pop("LOCKBENCH_GRADE"))
    ctx = Ctx(cfg, LA.Client())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if ctx.budget_s and cfg.get("mode") != "reference":
        timer = threading.Timer(HAND_IN_SHARE * ctx.budget_s, out_of_time, (ctx,))
        timer.daemon = True
        timer.start()
    ev = reference(ctx) if cfg.get("mode") == "reference" else grade(ctx)
    hand_in(ctx, ev)
    return 0


if __name__ == "__main__":
    sys.exit(main())
