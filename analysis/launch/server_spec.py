"""The server under test: what to start (ServerSpec) and the one place that starts it
(launch), here or on a --server-host, ours or anyone's.

Two kinds, and only two rules each for ready and stopped (procs.py, remote.py):
  lockbench  one of our binaries, given our options (--delay-us, --time-file, -q, ...);
             ready when it prints its listening line (on a --server-host: when the
             host's socket table lists it); a normal stop is exit 0 after SIGTERM, with a
             summary line;
  kit        anyone's server (the kit's contract): its command line and nothing else; ready when it
             listens on the port or its byte-swapped twin (the kernel's socket table,
             never a connection); death by SIGTERM is a normal stop; no summary.
Either way the wait is the one readiness wait, kernel_sockets.wait_for_port, given
where to look. A spec may carry an environment and a wrapper (a command its server runs
under: a preload through `env`, `setarch -R`, `lockbench profile --`); either kind runs
here, on a --server-host or in the grader's sandbox (Place.sandbox: the launcher's
requests for one server; the sandbox gives its own server class, ready by the same wait
on the sandbox's socket table, stopped by SIGKILL).
Every server launch() returns is a ServerUnderTest. The runner, `lockbench demo`
(runner/demo.py), bench/perf.py, bench/soak.py, the grader (grade/measure/sandboxed.py) and the
tests all start servers through launch().
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from analysis.launch.procs import HOST, KIT_TIME_FILE, KitServer, Server, move_lines, split_words

KIT_SERVER_CMD = "{bin} {n} {ip} {port}"          # the kit's: mainN n ip port
SERVER_CMD_FIELDS = ("bin", "n", "ip", "port")


def parse_server_cmd(template: str) -> list:
    """Splits a --server-cmd template shell-style and checks its fields; ValueError naming
    the problem. Fields: {bin} (the server binary of the label, from --bin-dir), {n},
    {ip}, {port} (required); {{ and }} are literal braces."""
    tokens = split_words(template, "command")
    seen = set()
    for tok in tokens:
        try:
            parts = list(string.Formatter().parse(tok))
        except ValueError as exc:
            raise ValueError(f"{tok!r}: {exc} (use {{{{ and }}}} for literal braces)") from None
        for _, name, spec, conv in parts:
            if name is None:
                continue
            if name not in SERVER_CMD_FIELDS or spec or conv:
                raise ValueError(f"unknown field {{{name}}} in {tok!r}; allowed: "
                                 + ", ".join(f"{{{f}}}" for f in SERVER_CMD_FIELDS))
            seen.add(name)
    if "port" not in seen:
        raise ValueError(f"{template!r} has no {{port}}")
    return tokens


def expand_server_cmd(template: str, binary: Path | None, n: int, ip: str, port: int) -> list:
    """The argv of one server start from a (checked) template."""
    values = {"bin": str(binary) if binary else "", "n": str(n), "ip": ip, "port": str(port)}
    return [tok.format(**values) for tok in parse_server_cmd(template)]


@dataclass(frozen=True)
class Options:
    """Our servers' own options, for one start (a kit-style server gets none of them).
    time_file and trace are paths as the server sees them (launch() makes them relative
    to the remote folder on a --server-host)."""
    delay_us: float | None = None   # None: the server's default (the kit's 10 us)
    time_file: Path | str | None = None
    trace: Path | str | None = None
    trace_limit: int = 0
    extra: tuple = ()        # further options (--io, --no-twin, --no-timing, ...)


@dataclass(frozen=True)
class ServerSpec:
    """One server under test, independent of where it runs: its label, its kind, and how
    its command line is made. kind "lockbench": binary, then `pre` (lockserver's strategy
    arguments), then <n> <ip> <port> and Options. kind "kit": the template's words with
    {bin} {n} {ip} {port} filled, nothing added. Either: `wrap`, the words of a command
    the server runs under, before all of it; `env`, (name, value) pairs added to the
    environment of what is started (wrapper included; in the sandbox never of the
    sandbox's own tools)."""
    label: str
    kind: str
    binary: Path | None
    pre: tuple = ()
    template: str = KIT_SERVER_CMD
    quiet: bool = True       # -q: no per-request lines on stdout (ours only)
    env: tuple = ()
    wrap: tuple = ()

    @property
    def prog(self) -> str:
        """The server program's name (ours prefix their output lines with it; a remote
        stop checks it is still that program), whatever wraps it."""
        return Path(self.command(0, HOST, 0)[0]).name

    def argv(self, n: int, ip: str, port: int, opts: Options = Options()) -> list:
        """The whole command line: the wrapper, then the server's."""
        return [*map(str, self.wrap), *self.command(n, ip, port, opts)]

    def command(self, n: int, ip: str, port: int, opts: Options = Options()) -> list:
        """The server's own command line, without the wrapper."""
        if self.kind == "kit":
            return expand_server_cmd(self.template, self.binary, n, ip, port)
        argv = [str(self.binary), *self.pre, str(n), ip, str(port)]
        if opts.delay_us is not None:
            argv += ["--delay-us", f"{opts.delay_us:g}"]
        if opts.time_file is not None:
            argv += ["--time-file", str(opts.time_file)]
        argv += [*(["-q"] if self.quiet else []), *opts.extra]
        if opts.trace is not None and opts.trace_limit > 0:
            argv += ["--trace", str(opts.trace), "--trace-limit", str(opts.trace_limit)]
        return argv


def with_env(argv: list, env: tuple) -> list:
    """argv run with `env` added to its environment by /usr/bin/env: how an environment
    reaches a server started by a shell elsewhere or in the sandbox, and only the server
    (the sandbox's own tools, which run before its uid is dropped, never see it)."""
    return ["/usr/bin/env", *(f"{k}={v}" for k, v in env), *argv] if env else argv


class Sandbox(Protocol):
    """Place.sandbox: the launcher's requests for one server in the grader's sandbox (its
    binaries read-only, a fresh working folder, the limits, a trace descriptor, how much
    of its output is kept); it makes the server object, whose start goes through them."""

    def server(self, argv: list, n: int, port: int, *, label: str,
               ready_timeout: float) -> ServerUnderTest: ...


@dataclass
class Place:
    """Where servers run and leave their files: cwd and results folder here (pass_fds:
    descriptors it inherits), a --server-host (its own fresh folder per server) at addr,
    or the grader's sandbox."""
    cwd: Path
    host: object | None = None   # a remote host (runner.remote.Host): .server(...) starts one
    addr: str = HOST
    kit_work: Path | None = None     # a kit server's working folder (default cwd/work)
    ready_timeout: float = 15.0
    sandbox: Sandbox | None = None
    pass_fds: tuple = ()


class ServerUnderTest(Protocol):
    """What every server launch() returns answers. Started (start(), or entering it as a
    context manager) it is ready: it listens (StartError otherwise; the sandbox's server
    is then left for the grader's stop(), which reads what it printed, the others are
    stopped already).
    A client reaches it at `port` when real_port, else at the port's byte-swapped twin
    (the kit client's way)."""
    kind: str              # "lockbench" or "kit"
    name: str
    n: int
    port: int

    @property
    def real_port(self) -> bool: ...
    def start(self) -> ServerUnderTest: ...
    def alive(self) -> bool: ...
    def died(self) -> Exception: ...
    def stop(self) -> dict: ...            # the summary (ours), else {}
    def stopped_ok(self) -> bool: ...
    def time_lines(self) -> list: ...      # its timing file's complete lines, read where it runs
    def __enter__(self): ...
    def __exit__(self, *exc): ...


def launch(spec: ServerSpec, n: int, port: int, place: Place, *, log_file: Path | None = None,
           opts: Options = Options(), time_dest: Path | None = None) -> ServerUnderTest:
    """The one server launcher: the (not yet started) server object for spec at n on
    port, in place: Server or KitServer here, RemoteServer on a --server-host, the
    sandbox's server in the grader's sandbox. time_dest: where its timing lines end up
    (ours write them there directly when local; a kit server's are moved there from its
    working folder; a remote server's are fetched there)."""
    if place.sandbox is not None:
        return place.sandbox.server(with_env(spec.argv(n, place.addr, port, opts), spec.env),
                                    n, port, label=spec.label,
                                    ready_timeout=place.ready_timeout)
    if place.host is not None:
        remote_opts = Options(opts.delay_us, KIT_TIME_FILE if opts.time_file else None,
                              "trace.csv" if opts.trace_limit > 0 else None,
                              opts.trace_limit, opts.extra)
        return place.host.server(with_env(spec.argv(n, place.addr, port, remote_opts), spec.env),
                                 n, port, kind=spec.kind, label=spec.label, log_file=log_file,
                                 time_dest=time_dest, prog=spec.prog,
                                 trace_dest=opts.trace if opts.trace_limit > 0 else None)
    local = {"label": spec.label, "log_file": log_file, "ready_timeout": place.ready_timeout,
             "env": dict(spec.env), "pass_fds": place.pass_fds, "prog": spec.prog}
    if spec.kind == "lockbench":
        return Server(spec.argv(n, place.addr, port, opts), n, port, cwd=place.cwd,
                      time_file=opts.time_file, **local)
    work = place.kit_work or place.cwd / "work"
    if time_dest is not None:
        # Lines a server left behind when its runner was killed belong to no setting now.
        move_lines(work / KIT_TIME_FILE, time_dest.parent / f"orphan_{KIT_TIME_FILE}")
    return KitServer(spec.argv(n, place.addr, port), n, port, cwd=work, time_dest=time_dest,
                     **local)
