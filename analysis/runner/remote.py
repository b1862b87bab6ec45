"""Servers and load agents on other hosts, reached through a command prefix.

A host is a command prefix that runs a command there: `ssh user@host` in real use,
`ip netns exec NAME` in the tests, `env` for this machine. Every command sent through a
prefix is the same two words, `sh -s`, with the script on its standard input, so no
quoting differs between ssh (which joins its arguments into one remote shell line) and
prefixes that exec their arguments (ip netns exec, env).

What runs on a host: the binary check (`sha256sum` of the same paths as here), the facts
for the report (kernel, cores, CPU model), the server (started in a fresh folder under
/tmp, its pid reported by the shell that waits for it; ready when its port or twin
listens in that host's /proc/net/tcp{,6}; stopped by `kill -TERM` over the prefix; its
timing file, log and trace brought back with `cat`); the load agents that run there are
agents.py's.
"""

import contextlib
import os
import queue
import random
import shlex
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from analysis import ports
from analysis.kernel_sockets import describe_exit, parse_table, wait_for_port
from analysis.launch.procs import (
    _LIVE,
    KIT_TIME_FILE,
    RunError,
    StartError,
    last_complaint,
    parse_summary,
    split_words,
)
from analysis.ports import twin

_LISTEN = "0A"


class HostError(RunError):
    """A host cannot be used (unreachable, binaries missing or different)."""


@dataclass(frozen=True)
class Host:
    """One host: `prefix` is the command (shell-split) that runs a command there."""
    prefix: tuple
    role: str = "server"

    @staticmethod
    def parse(text: str, role: str = "server") -> "Host":
        """ValueError naming the problem for an unsplittable or empty prefix."""
        return Host(tuple(split_words(text, "command prefix")), role)

    @property
    def label(self) -> str:
        return shlex.join(self.prefix)

    def argv(self) -> list:
        return [*self.prefix, "sh", "-s"]

    def run(self, script: str, timeout: float = 30.0,
            what: str | None = None) -> subprocess.CompletedProcess:
        """Runs the shell script there. HostError if the prefix cannot run or does not
        answer within `timeout` (then it is killed with everything it started here); with
        `what` (a script that ends in `exit 0`) also if it exits non-zero, which only the
        prefix itself does (ssh's 255), naming `what` and its last complaint. Any bytes
        decode: a prefix or a server may print anything."""
        try:
            p = subprocess.Popen(self.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, errors="replace",
                                 start_new_session=True)
        except OSError as exc:
            raise HostError(f"host {self.label!r}: cannot run {self.prefix[0]!r} "
                            f"({exc.strerror})") from None
        try:
            out, err = p.communicate(script, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            raise HostError(f"host {self.label!r}: no answer within {timeout:g} s"
                            + (f" ({what})" if what else "")) from None
        except BrokenPipeError:   # it exited before taking the script
            out, err = p.communicate()
        if what is not None and p.returncode != 0:
            lines = [" ".join(ln.split()) for ln in err.splitlines() if ln.strip()]
            raise HostError(f"host {self.label!r}: {what} failed (exit status "
                            f"{p.returncode}: {(lines or ['no message'])[-1][:200]})")
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def server(self, argv: list, n: int, port: int, **kw) -> "RemoteServer":
        """A server to start on this host (the launcher's place for --server-host)."""
        return RemoteServer(self, argv, n, port, **kw)

    def popen(self, script: str, stderr) -> subprocess.Popen:
        try:
            p = subprocess.Popen(self.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=stderr, text=True, errors="replace",
                                 start_new_session=True)
            p.stdin.write(script)
            p.stdin.close()
        except OSError as exc:
            raise HostError(f"host {self.label!r}: cannot run {self.prefix[0]!r} "
                            f"({exc.strerror})") from None
        p.stdin = None      # communicate() must not flush it
        return p


def _kill_group(p: subprocess.Popen) -> None:
    """Kills a prefix started here and everything it started here (its own session), so no
    pipe is held open after it; what it started on the host is the caller's to clean."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
    p.communicate()


# ---- checks and facts ---------------------------------------------------------------------

def sha256(path: Path) -> str:
    import hashlib
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def check_binaries(host: Host, paths: list) -> float:
    """Each of `paths` (local files) must exist on the host at the same path with the same
    sha256. Returns the round-trip time of the check in seconds; HostError (one line)
    otherwise."""
    paths = [Path(p) for p in dict.fromkeys(paths)]
    t0 = time.monotonic()
    r = host.run("sha256sum -- " + " ".join(shlex.quote(str(p)) for p in paths)
                 + " 2>/dev/null; exit 0\n")
    rtt = time.monotonic() - t0
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise HostError(f"host {host.label!r} does not answer ({msg})")
    remote = {}
    for line in r.stdout.splitlines():
        digest, _, name = line.partition("  ")
        remote[name.strip()] = digest.strip()
    for p in paths:
        if str(p) not in remote:
            raise HostError(f"host {host.label!r}: {p} not found there (copy the build to "
                            "the same path on every host)")
        if remote[str(p)] != sha256(p):
            raise HostError(f"host {host.label!r}: {p} differs from this machine's "
                            f"(sha256 {remote[str(p)][:12]} there, {sha256(p)[:12]} here); "
                            "copy the same build to every host")
    return rtt


FACTS_SCRIPT = r"""uname -r; nproc; hostname
sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1
"""


def host_facts(host: Host) -> dict:
    """{role, prefix, kernel, cores, hostname, cpu_model} collected over the prefix."""
    lines = host.run(FACTS_SCRIPT).stdout.splitlines() + ["", "", "", ""]
    try:
        cores = int(lines[1])
    except ValueError:
        cores = None
    return {"role": host.role, "prefix": host.label, "kernel": lines[0].strip() or "unknown",
            "cores": cores, "hostname": lines[2].strip(),
            "cpu_model": lines[3].strip() or "unknown"}


def listening_ports(host: Host) -> set:
    """TCP ports in LISTEN state on the host (its network namespace), from its
    /proc/net/tcp and tcp6 read there."""
    r = host.run("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; exit 0\n", timeout=15,
                 what="reading its socket table")
    return {port for port, st, _ in parse_table(r.stdout) if st == _LISTEN}


def pick_port(host: Host, rng: random.Random | None = None) -> int:
    """A port P with P and its twin not listening on the host, both in 1024..32767."""
    up = listening_ports(host)
    p = ports.pick(up.__contains__, rng)
    if p is None:
        raise RunError(f"no free port pair on host {host.label!r}")
    return p


def remote_exit(code: int) -> int:
    """A shell's `$?` of a waited job -> Popen's convention (negative: killed by signal)."""
    return -(code - 128) if 128 < code < 160 else code


# ---- the server -----------------------------------------------------------------------------

# How long one step over the prefix may take (a kill, a cat, the rm); once the host has
# failed to answer, every later step of that server gets CLEANUP_TIMEOUT, so a hung host
# costs seconds, not minutes.
KILL_TIMEOUT = 10.0
STEP_TIMEOUT = 15.0
FETCH_TIMEOUT = 60.0
CLEANUP_TIMEOUT = 5.0


class RemoteServer:
    """A server on `host`, run as `argv` in a fresh folder there. The same interface as
    procs.Server/KitServer: start(), stop() -> summary, alive(), died(), stopped_ok(),
    time_lines(); a context manager. `kind` 'lockbench' (argv carries the time file
    option; its summary line is parsed from the log) or 'kit' (the kit's
    server_output_time_aggregated; SIGTERM is a normal stop).

    Every failure of the prefix (no answer in time, its own non-zero exit) is a HostError
    whose one line also says what became of the server and its folder: it is stopped by
    pid and the folder removed over the same prefix, every step bounded, and what could
    not be is named as left on the host."""

    def __init__(self, host: Host, argv: list, n: int, port: int, *, kind: str, label: str,
                 log_file: Path, time_dest: Path, trace_dest: Path | None = None,
                 ready_timeout: float = 15.0, work: str | None = None,
                 prog: str | None = None):
        self.host, self.kind, self.name, self.n, self.port = host, kind, label, n, port
        self.prog = prog or Path(argv[0]).name   # the program's, whatever wraps it
        self.argv = [str(a) for a in argv]
        self.work = work or f"/tmp/lockbench-{uuid.uuid4().hex[:12]}"
        self.log_file, self.time_dest, self.trace_dest = log_file, time_dest, trace_dest
        self.time_file = time_dest          # local copy (filled at stop)
        self.ready_timeout = ready_timeout
        self.proc, self.pid, self.exit_code = None, None, None
        self.summary_line, self.listen_port = None, None
        self.lines: queue.Queue = queue.Queue()
        self._stopped = False
        self._host_failed = False    # the prefix failed once: cleanup steps are short
        self._gone_there = False     # the server is known to have ended on the host
        self._removed = False        # its folder is gone
        self._stop_error = None      # the HostError stop() raised (already says it all)

    @property
    def real_port(self) -> bool:
        return self.listen_port == self.port and self.port != twin(self.port)

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _next(self, timeout: float):
        try:
            return self.lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return ""

    def _run(self, script: str, timeout: float, what: str) -> subprocess.CompletedProcess:
        """host.run for this server's steps, noting a failure of the prefix."""
        try:
            return self.host.run(script, CLEANUP_TIMEOUT if self._host_failed else timeout,
                                 what)
        except HostError:
            self._host_failed = True
            raise

    def _what(self, exc: HostError) -> str:
        """A HostError's line without its leading "host '...': "."""
        return str(exc).removeprefix(f"host {self.host.label!r}: ")

    def cleanup_note(self) -> str:
        """What stopping left on the host, for the end of an error line."""
        pid = f"pid {self.pid}" if self.pid is not None else "pid unknown"
        left = ([] if self._gone_there else [f"the server ({pid})"]) + \
            ([] if self._removed else [self.work])
        if not left:
            return f"the server ({pid}) was stopped and {self.work} removed there"
        return f"left on host {self.host.label!r}: {' and '.join(left)} (remove by hand)"

    def _with_cleanup(self, exc: BaseException) -> HostError:
        """A failure of the prefix, once the server is stopped: exc's line and what became
        of the server and its folder."""
        if exc is self._stop_error:
            return exc
        try:
            self.stop()
        except HostError as stop_exc:   # says what is left
            return HostError(f"{' '.join(str(exc).split())}; then {stop_exc}")
        return HostError(f"{' '.join(str(exc).split())}; {self.cleanup_note()}")

    def start(self) -> "RemoteServer":
        try:
            return self._start()
        except HostError as exc:
            raise self._with_cleanup(exc) from None

    def _start(self) -> "RemoteServer":
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        w = shlex.quote(self.work)
        script = (f"mkdir -p {w} && cd {w} || exit 97\n"
                  f"{shlex.join(self.argv)} >>server.log 2>&1 </dev/null &\n"
                  "echo pid=$!\nwait $!\necho exit=$?\n")
        with open(self.log_file, "a") as log:
            log.write(f"# host: {self.host.label}\n# {shlex.join(self.argv)}\n"
                      f"# cwd={self.work}\n")
        self._err = open(self.log_file, "a")  # noqa: SIM115 (closed by stop())
        self.proc = self.host.popen(script, stderr=self._err)
        _LIVE.add(self)
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + self.ready_timeout
        while self.pid is None:
            line = self._next(deadline - time.monotonic())
            if line is None or time.monotonic() > deadline:
                self.stop()
                raise StartError(f"{self.name} (n={self.n}) could not be started on host "
                                 f"{self.host.label!r}; see {self.log_file}; "
                                 f"{self.cleanup_note()}")
            if line.startswith("pid=") and line[4:].isdigit():
                self.pid = int(line[4:])
        port, why = wait_for_port([twin(self.port), self.port], self._listening, self.alive,
                                  max(0.0, deadline - time.monotonic()), 0.05)
        if why == "exited" or (port is not None and not self.alive()):
            self.stop()
            last = self._last_log_line()
            raise StartError(f"{self.name} (n={self.n}) exited at start-up "
                             f"({describe_exit(self.exit_code)}) on host "
                             f"{self.host.label!r}: {last or 'no message'}")
        if why:
            self.stop()
            raise StartError(f"{self.name} (n={self.n}) did not listen on port "
                             f"{self.port} or its twin {twin(self.port)} within "
                             f"{self.ready_timeout:g} s on host {self.host.label!r}; "
                             f"see {self.log_file}; {self.cleanup_note()}")
        self.listen_port = port
        with open(self.log_file, "a") as log:
            log.write(f"# pid={self.pid} (on the host)\n# listening on {port}\n")
        return self

    def _listening(self) -> set:
        """The ports listening on the host (a host that fails to answer is noted)."""
        try:
            return listening_ports(self.host)
        except HostError:
            self._host_failed = True
            raise

    def _last_log_line(self) -> str:
        return last_complaint(self.log_file)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def died(self) -> RunError:
        self.stop()
        return RunError(f"{self.name} (n={self.n}) died during the experiment on host "
                        f"{self.host.label!r} ({describe_exit(self.exit_code)}); "
                        f"see {self.log_file}")

    def stopped_ok(self) -> bool:
        return self.exit_code in ((0, None) if self.kind == "lockbench"
                                  else (0, None, -15))

    def time_lines(self) -> list:
        """The complete lines of the server's timing file so far, read on the host."""
        r = self._run(f"cat {shlex.quote(self.work)}/{KIT_TIME_FILE} 2>/dev/null; exit 0\n",
                      10.0, "reading the timing file")
        return r.stdout.split("\n")[:-1]

    def stop(self, timeout: float = 5.0) -> dict:
        """SIGTERM over the prefix (SIGKILL after `timeout`), then brings back the timing
        file (appended to time_dest), the log and the trace, and removes the folder. Each
        step is bounded and tried whatever became of the others; if the prefix failed in
        any, HostError (one line: what failed, and what is left on the host)."""
        if self.proc is None or self._stopped:
            return parse_summary(self.summary_line) if self.summary_line else {}
        self._stopped = True
        _LIVE.discard(self)
        problems = []
        try:
            self._terminate(timeout, problems)
            self._fetch(problems)
        finally:
            self._err.close()
        with open(self.log_file, "a") as log:
            log.write(f"# exit={self.exit_code}\n")
        if problems:
            self._stop_error = HostError(f"host {self.host.label!r}: stopping {self.name}: "
                                         f"{'; '.join(problems)}; {self.cleanup_note()}")
            raise self._stop_error
        return parse_summary(self.summary_line) if self.summary_line else {}

    def _terminate(self, timeout: float, problems: list) -> None:
        """kill -TERM by pid over the prefix, -KILL after `timeout`; then the local end of
        the prefix (the shell there reports the server's exit status through it), killed if
        it still waits."""
        if self.pid is not None:   # also when the local end is gone (ssh dropped)
            for sig in ("TERM", "KILL"):
                try:
                    self._run(self._kill_script(sig), KILL_TIMEOUT,
                              f"kill -{sig} of pid {self.pid}")
                    self._gone_there |= sig == "KILL"
                except HostError as exc:
                    problems.append(self._what(exc))
                if sig == "TERM":
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.proc.wait(timeout=timeout)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        code = None
        while True:
            line = self._next(1.0)
            if not line:
                break
            if line.startswith("exit=") and line[5:].isdigit():
                code = remote_exit(int(line[5:]))
                self._gone_there = True   # the shell there saw it end
        self.exit_code = code if code is not None else self.proc.returncode

    def _kill_script(self, sig: str) -> str:
        """kill -SIG the server's pid there, only if that pid is still this server (its
        command line names the program), never a process that got the pid later."""
        return (f"tr '\\000' ' ' </proc/{self.pid}/cmdline 2>/dev/null | "
                f"grep -qF -- {shlex.quote(self.prog)} && kill -{sig} {self.pid} "
                "2>/dev/null; exit 0\n")

    def _fetch(self, problems: list) -> None:
        """Brings back the log, the timing file and the trace, then removes the folder;
        each step on its own, so one the host does not answer still ends in the rm."""
        w = shlex.quote(self.work)
        steps = [("server.log", "bringing back the server log", self._keep_log),
                 (KIT_TIME_FILE, "bringing back the timing file", self._keep_time)]
        if self.trace_dest is not None:
            steps.append(("trace.csv", "bringing back the trace", self._keep_trace))
        for name, what, keep in steps:
            try:
                keep(self._run(f"cat {w}/{name} 2>/dev/null; exit 0\n", FETCH_TIMEOUT,
                               what).stdout)
            except HostError as exc:
                problems.append(self._what(exc))
        try:
            self._run(f"rm -rf {w}; exit 0\n", STEP_TIMEOUT, f"removing {self.work}")
            self._removed = True
        except HostError as exc:
            problems.append(self._what(exc))

    def _keep_log(self, text: str) -> None:
        with open(self.log_file, "a") as log:
            log.write(text)
        for line in text.splitlines():
            if line.startswith(f"{self.prog}: summary"):
                self.summary_line = line

    def _keep_time(self, text: str) -> None:
        if text:
            self.time_dest.parent.mkdir(parents=True, exist_ok=True)
            with open(self.time_dest, "a") as f:
                f.write(text)

    def _keep_trace(self, text: str) -> None:
        if text:
            self.trace_dest.write_text(text)

    def __enter__(self):
        return self if self.proc is not None else self.start()

    def __exit__(self, exc_type, exc, tb):
        if isinstance(exc, HostError):
            raise self._with_cleanup(exc) from None
        try:
            self.stop()
        except HostError as stop_exc:
            if exc is None:
                raise
            if not isinstance(exc, Exception):   # an interrupt stays one
                with open(self.log_file, "a") as log:
                    log.write(f"# {stop_exc}\n")
                return False
            raise HostError(f"{' '.join(str(exc).split())}; then {stop_exc}") from None
        return False
