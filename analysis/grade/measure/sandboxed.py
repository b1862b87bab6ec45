"""The grading's context and its sandboxed servers, what every check is made of: Ctx (the
configuration, the launcher, the ports, the time budget), Server (one submission's server,
or one of the grader's own, in an inner sandbox with the kit command line), check() (one
check's record of evidence), and the steps the checks share (start, start_all,
await_lines, spread)."""

import contextlib
import math
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from analysis import kernel_sockets as ks
from analysis import ports
from analysis.grade import checks as C
from analysis.grade import labs
from analysis.grade.trust import launcher as LA
from analysis.grade.trust import safeio
from analysis.grade.trust import sandbox as S
from analysis.runner import server_spec as SS
from analysis.runner.procs import StartError

TIMING = "server_output_time_aggregated"
SERVER_OUTPUT_KEEP = 16 << 10


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
        self.pause: dict = {}                # the idle pause's results (pause.py), once run
        self.bin_dir: Path | None = None     # the folder the build check built in
        self.present: list = []              # the lab's servers built there
        self.probe: dict | None = None       # the clock probe's results, once run
        self.traced: dict = {}               # server -> the design its lock trace showed
        self.skips_delay: dict = {}          # server -> its hold times, when far under the
                                             # kit's usleep(10) (the design check's bursts)
        self.usleep_s: float | None = None   # the shortest usleep(10) here, once measured
        self.out_lock = threading.Lock()
        self.handed_in = False
        # the lab version: --lab's, else told apart after the first make (labs.detect)
        self.lab = labs.by_name(cfg["lab"]) if cfg.get("lab") else None
        self.lab_why = f"--lab {cfg['lab']}" if cfg.get("lab") else ""
        self.kit_told = False                # the kit told apart from common.h (build.py)

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


class Sandbox:
    """The launcher's requests for one server (server_spec.Place.sandbox): a fresh working
    folder runs/<tag> (/sub/run inside), its binaries read-only at /sub/bin (and
    extra_ro), the grading's limits, with `trace` a descriptor on the lock trace file
    LA.trace_path(tag)."""

    def __init__(self, ctx: Ctx, bin_dir: Path, tag: str, extra_ro: dict | None = None,
                 trace: bool = False):
        self.ctx, self.tag, self.trace = ctx, tag, trace
        self.ro = {bin_dir: "/sub/bin", **(extra_ro or {})}
        self.run_dir = Path(S.SCRATCH) / "runs" / tag

    def server(self, argv: list, n: int, port: int, *, label: str,
               ready_timeout: float) -> "Server":
        return Server(self, argv, n, port, label, ready_timeout)

    def spawn(self, argv: list) -> tuple:
        """The inner sandbox running argv: (proc, its capped output)."""
        self.ctx.launcher.call(op="mkdir", path=f"runs/{self.tag}")
        return spawn(self.ctx, argv, self.ro, {self.run_dir: "/sub/run"}, "/sub/run",
                     self.ctx.limits, SERVER_OUTPUT_KEEP, trace=self.tag if self.trace else "")


class Server:
    """One sandboxed server process (kit command line) in its own fresh working folder, as
    server_spec.launch makes it for a Place with a Sandbox: ready by the one socket-table
    wait, stopped by SIGKILL. `port` is where it listens once ready (the asked port's twin,
    the kit's quirk, or the asked port), so a client always reaches it at `port`."""

    kind = "kit"
    real_port = True

    def __init__(self, sandbox: Sandbox, argv: list, n: int, asked: int, label: str,
                 ready_timeout: float):
        self.sandbox, self.argv, self.n, self.asked = sandbox, argv, n, asked
        self.name, self.ready_timeout = label, ready_timeout
        self.run_dir = sandbox.run_dir
        self.trace = LA.trace_path(sandbox.tag) if sandbox.trace else None
        self.proc = self.output = self.port = None
        self.stopped_by_us = False
        self.why = ""    # why it is not ready, once start() said so

    def start(self) -> "Server":
        """Started and listening; else StartError saying why (the server is left for
        stop(), which the grader calls whatever happened)."""
        self.proc, self.output = self.sandbox.spawn(self.argv)
        self.why = self.wait_ready(self.ready_timeout)
        if self.why:
            raise StartError(self.why)
        return self

    def __enter__(self):
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

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

    def died(self) -> Exception:
        return StartError(f"{self.name} (n={self.n}) {self.death()}")

    def stopped_ok(self) -> bool:
        return True    # a SIGKILL is how it is stopped

    def time_lines(self) -> list:
        return self.timing_lines()[0] or []

    @property
    def quirk(self) -> bool:
        return self.port == ports.twin(self.asked)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def death(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        sig = S.exit_signal(code)
        if sig:
            return ks.describe_exit(-sig)
        return ks.describe_exit(code)

    def ended(self) -> str:
        """'' while it runs, else how it ended."""
        return "" if self.alive() else self.death()

    def stop(self) -> dict:
        """Stops it (SIGKILL to the sandbox: a kit server has no handler anyway); no
        summary. ended() before it says whether it was still running."""
        if self.proc is None:
            return {}
        if self.alive():
            self.stopped_by_us = True
            self.proc.kill()
        self.output.join()
        return {}

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


def start(ctx, bin_dir, name, n, tag, *, env=(), wrap=(), extra_ro=None,
          trace=False) -> tuple:
    """(server, '' or why it is not ready): the server `name` of bin_dir with the kit's
    command line, through the one launcher in a sandbox of its own (env, wrap: as
    ServerSpec's; extra_ro: more read-only folders; trace: a lock trace descriptor)."""
    spec = SS.ServerSpec(name, "kit", Path("/sub/bin") / name, env=tuple(env),
                         wrap=tuple(wrap))
    place = SS.Place(Path(S.SCRATCH), sandbox=Sandbox(ctx, bin_dir, tag, extra_ro, trace),
                     ready_timeout=ctx.cfg["ready_timeout_s"])
    s = SS.launch(spec, n, ctx.next_port(), place)
    with contextlib.suppress(StartError):   # s.why says it
        s.start()
    return s, s.why


def await_lines(ctx, s: Server, count: int) -> None:
    """The last batch's line is written after the last reply: gives it a moment."""
    deadline = time.monotonic() + ctx.cfg["timing_wait_s"]
    while (time.monotonic() < deadline and s.alive()
           and len(s.timing_lines()[0] or []) < count):
        time.sleep(0.05)


def start_all(ctx, bin_dir, names, n, suffix) -> tuple:
    servers, ev = {}, []
    for name in names:
        s, why = start(ctx, bin_dir, name, n, f"{name}_{suffix}")
        if why:
            s.stop()
            ev.append(f"{name}: did not start ({why})")
        else:
            servers[name] = s
    return servers, ev


def spread(n: int, k: int) -> list:
    """k distinct strings spread over [0, n)."""
    return sorted({i * n // k for i in range(k)})
