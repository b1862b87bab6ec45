"""The grading's sandboxed servers, what every check is made of: Server (one submission's
server, or one of the grader's own, in an inner sandbox with the kit command line) and the
steps the checks share (start, start_all, await_lines, spread); the grading's context and
check() are in analysis/grade/context.py."""

import contextlib
import os
import time
from pathlib import Path

from analysis import kernel_sockets as ks
from analysis import ports
from analysis.grade.context import Ctx
from analysis.grade.trust import launcher as LA
from analysis.grade.trust import safeio
from analysis.grade.trust import sandbox as S
from analysis.launch import server_spec as SS
from analysis.launch.procs import StartError

TIMING = "server_output_time_aggregated"
SERVER_OUTPUT_KEEP = 16 << 10


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
