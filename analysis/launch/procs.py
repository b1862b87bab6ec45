"""Server and client processes: free ports, start, wait until listening, stop, parse output.

Every server started here is registered until stopped; an atexit hook (and the runner's
try/finally) stops any left over, so no server outlives the runner, even on Ctrl-C.
"""

import atexit
import contextlib
import json
import os
import queue
import random
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from analysis import ports
from analysis.kernel_sockets import describe_exit, listening_ports, wait_for_port
from analysis.ports import twin

HOST = "127.0.0.1"


class RunError(Exception):
    """An experiment cannot go on; the message is the one-line cause shown to the user."""


class StartError(RunError):
    """A server exited, or did not become ready, at start-up."""


def port_free(port: int) -> bool:
    """Whether a TCP listener could bind 127.0.0.1:port right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def pick_port(rng: random.Random | None = None, tries: int = 200) -> int:
    """A port P such that P and its twin are both free on 127.0.0.1 (ports.py's rule)."""
    p = ports.pick(lambda q: not port_free(q), rng, tries)
    if p is None:
        raise RunError("no free TCP port pair (P and its byte-swapped twin) found on "
                       "127.0.0.1")
    return p


def split_words(text: str, what: str) -> list:
    """text split shell-style into a command's words; ValueError naming the problem when
    it does not split or is empty (`what` names it: "command", "command prefix")."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} does not split into words ({exc})") from None
    if not words:
        raise ValueError(f"empty {what}")
    return words


def check_binary(path: Path) -> Path:
    if not path.is_file():
        what = "expected a binary, found a directory" if path.is_dir() else "binary not found"
        raise RunError(f"{what}: {path} (build first: cmake --preset release && "
                       "cmake --build --preset release)")
    if not os.access(path, os.X_OK):
        raise RunError(f"binary not executable: {path}")
    return path


def parse_summary(line: str) -> dict:
    """'mainN: summary k=v k=v ...' -> {k: float or str}."""
    out = {}
    _, _, rest = line.partition("summary")
    for tok in rest.split():
        k, sep, v = tok.partition("=")
        if not sep:
            continue
        try:
            out[k] = float(v)
        except ValueError:
            out[k] = v
    return out


_LIVE: set = set()


def stop_all() -> None:
    for srv in list(_LIVE):
        try:
            srv.stop()
        except RunError as exc:   # a remote one that could not be cleaned: say so, once
            print(" ".join(str(exc).split()), file=sys.stderr)


atexit.register(stop_all)


def last_complaint(log_file: Path) -> str:
    """A server's own complaint in its log: its last line that says 'error', else its last
    line (usage hints such as "Run 'main1 --help'" follow the error line); "" if none."""
    try:
        lines = [" ".join(ln.split()) for ln in
                 Path(log_file).read_text(errors="replace").splitlines()
                 if ln.strip() and not ln.startswith("# ")]
    except OSError:
        return ""
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or [""])[-1][:300]


class Server:
    """One running lockbench server (server_spec.ServerSpec of kind "lockbench" makes its
    argv); ready when it prints its listening line; a normal stop is exit 0 after SIGTERM,
    with a summary. time_file: where its timing lines appear (None: it writes none).
    Use as a context manager: started on enter, stopped on exit."""

    kind = "lockbench"
    real_port = False   # the client connects to the twin of `port` (kit mode) as usual

    def __init__(self, argv: list, n: int, port: int, *, cwd: Path, log_file: Path,
                 time_file: Path | None = None, label: str | None = None,
                 ready_timeout: float = 15.0, env: dict | None = None, pass_fds: tuple = (),
                 prog: str | None = None):
        self.argv = [str(a) for a in argv]
        # the prefix of the server's output lines: its program's, whatever wraps it
        self.prog = prog or Path(self.argv[0]).name
        self.name = label or self.prog            # the server label in results and messages
        self.n, self.port = n, port
        self.cwd, self.log_file, self.ready_timeout = cwd, log_file, ready_timeout
        self.time_file = time_file
        self.env = {**os.environ, **env} if env else None   # None: this process's
        self.pass_fds = tuple(pass_fds)
        self.announced: set = set()   # the ports its listening line names
        self.proc = None
        self.lines: queue.Queue = queue.Queue()
        self.summary_line = None
        self.exit_code = None
        self.cpu_s = None   # the server's user + system CPU seconds over its life, once reaped

    def time_lines(self) -> list:
        """The complete lines of the timing file so far (none before it exists). Every server
        under test answers this; a remote one reads the file where it runs."""
        if self.time_file is None:
            return []
        try:
            text = self.time_file.read_text()
        except FileNotFoundError:
            return []
        return text.split("\n")[:-1]  # complete lines only

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _popen(self, stdout) -> None:
        """Starts argv in cwd (its own session), stdout to `stdout`, stderr to the log."""
        self.proc = subprocess.Popen(self.argv, cwd=self.cwd, stdout=stdout,
                                     stderr=self._log if stdout is subprocess.PIPE
                                     else subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     text=True, start_new_session=True, env=self.env,
                                     pass_fds=self.pass_fds)
        self._log.write(f"# pid={self.proc.pid}\n")
        self._log.flush()
        _LIVE.add(self)

    def _listening(self) -> set:
        """The ports its listening line named, once printed (the lines before it are
        logged as they come). The line is printed once the server serves, which is later
        than the kernel lists its sockets: the stricter evidence for the same wait."""
        while not self.announced:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is None:
                self.lines.put(None)   # for stop()'s drain
                break
            self._log.write(line + "\n")
            if line.startswith(f"{self.prog}: listening on "):
                words = line.split()[3:]
                self.announced = {int(w.rpartition(":")[2]) for w in words[:1] + words[2:3]
                                  if w.rpartition(":")[2].isdigit()} or {self.port}
        return self.announced

    def start(self) -> "Server":
        """Starts it and waits until it is ready (kernel_sockets.wait_for_port, here on its
        listening line); StartError (and stopped) when it exits or does not get there."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_file, "a")  # noqa: SIM115 - open while it runs; stop() closes it
        self._log.write(f"# {' '.join(self.argv)}\n")
        self._log.flush()
        self._popen(subprocess.PIPE)
        threading.Thread(target=self._pump, daemon=True).start()
        _, why = wait_for_port([twin(self.port), self.port], self._listening, self.alive,
                               self.ready_timeout, 0.005)
        if why == "exited":
            self.proc.wait()
            with contextlib.suppress(queue.Empty):    # what it printed before it ended
                while (line := self.lines.get(timeout=1.0)) is not None:
                    self._log.write(line + "\n")
        if why:
            raise self._not_started(why, "did not print its listening line")
        return self

    def _not_started(self, why: str, not_ready: str) -> StartError:
        """Stops it, and says why it did not start: how it exited and its last line, or
        `not_ready` within the time it had."""
        code, last = self.proc.poll(), self._last_log_line()   # before stop() closes the log
        self.stop()
        if why == "exited":
            return StartError(f"{self.name} (n={self.n}) exited at start-up "
                              f"({describe_exit(code)}): {last or 'no message'}")
        return StartError(f"{self.name} (n={self.n}) {not_ready} within "
                          f"{self.ready_timeout:g} s; see {self.log_file}")

    def _last_log_line(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return last_complaint(self.log_file)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def died(self) -> RunError:
        return RunError(f"{self.name} (n={self.n}) died during the experiment "
                        f"({describe_exit(self.proc.poll())}); see {self.log_file}")

    def stopped_ok(self) -> bool:
        """Whether the server ended as a normal stop ends it (exit 0)."""
        return self.exit_code in (0, None)

    def _reaped(self, block: bool) -> bool:
        """Reaps the server if it has exited (block: waits until it has), with wait4 so its
        CPU time is kept (what bench/perf.py compares per request); True once reaped."""
        if self.proc.returncode is not None:
            return True
        try:
            pid, status, usage = os.wait4(self.proc.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:   # reaped by Popen already (poll()): no CPU time known
            self.proc.wait()
            return True
        if pid == 0:
            return False
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_s = usage.ru_utime + usage.ru_stime
        return True

    def _terminate(self, timeout: float) -> None:
        """SIGTERM to the server's process group (its own session: a wrapper and its
        children alike), wait, then SIGKILL whatever of the group is left."""
        if not self._reaped(block=False):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while not self._reaped(block=False) and time.monotonic() < deadline:
                time.sleep(0.01)
        # stragglers (children of a wrapper), or a leader that ignored SIGTERM
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._reaped(block=True)
        self.exit_code = self.proc.returncode
        _LIVE.discard(self)

    def stop(self, timeout: float = 5.0) -> dict:
        """SIGTERM, wait, SIGKILL the process group if needed; returns the parsed summary."""
        if self.proc is None:
            return {}
        self._terminate(timeout)
        while True:  # drain what the server printed before exiting
            try:
                line = self.lines.get(timeout=1.0)
            except queue.Empty:
                break
            if line is None:
                break
            self._log.write(line + "\n")
            if line.startswith(f"{self.prog}: summary"):
                self.summary_line = line
        self._log.write(f"# exit={self.exit_code}\n")
        self._log.close()
        return parse_summary(self.summary_line) if self.summary_line else {}

    def __enter__(self):
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc):
        if self.proc is not None and self.exit_code is None:
            self.stop()
        return False


KIT_TIME_FILE = "server_output_time_aggregated"   # the kit's, in the working directory


class KitServer(Server):
    """A kit-style server (anyone's lab, docs/analysis.md): `argv`
    is the expanded --server-cmd template, run in `cwd` with nothing added. Ready when it
    (or a child) listens on `port` or its byte-swapped twin, seen in the kernel's socket
    table, never by connecting (many crash on an empty connection). Its timing lines are
    cwd/server_output_time_aggregated; stop() moves them to `time_dest` (appended), as the
    kit's test.sh renames the file between settings. Death by SIGTERM is a normal stop
    (kit servers install no handler); there is no summary."""

    kind = "kit"

    def __init__(self, argv: list, n: int, port: int, *, cwd: Path, log_file: Path,
                 time_dest: Path | None, label: str, **how):
        """how: Server's ready_timeout, env, pass_fds, prog."""
        super().__init__(argv, n, port, cwd=cwd, log_file=log_file, time_file=cwd / KIT_TIME_FILE,
                         label=label, **how)
        self.time_dest = time_dest
        self.listen_port = None

    @property
    def real_port(self) -> bool:
        """True when the server listens on `port` itself and not on its twin (it uses
        htons): the client must then be told --real-port."""
        return self.listen_port == self.port and self.port != twin(self.port)

    def start(self) -> "KitServer":
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_file, "a")  # noqa: SIM115 - open while it runs; stop() closes it
        self._log.write(f"# {' '.join(self.argv)}\n# cwd={self.cwd}\n")
        self._log.flush()
        self._popen(self._log)
        self.listen_port, why = wait_for_port([twin(self.port), self.port],
                                              lambda: listening_ports([self.proc.pid]),
                                              self.alive, self.ready_timeout, 0.01)
        if why:
            raise self._not_started(why, f"did not listen on port {self.port} or its twin "
                                         f"{twin(self.port)}")
        self._log.write(f"# listening on {self.listen_port}\n")
        self._log.flush()
        return self

    def stopped_ok(self) -> bool:
        return self.exit_code in (0, None, -signal.SIGTERM)

    def stop(self, timeout: float = 5.0) -> dict:
        if self.proc is None:
            return {}
        if self.exit_code is None:
            self._terminate(timeout)
            self._log.write(f"# exit={self.exit_code}\n")
            self._log.close()
        self.collect_time_file()
        return {}

    def collect_time_file(self) -> None:
        """Appends cwd/server_output_time_aggregated to time_dest and removes it (leaves
        it where it is without a time_dest)."""
        if self.time_dest is not None:
            move_lines(self.time_file, self.time_dest)


def move_lines(src: Path, dest: Path) -> None:
    """Appends the file src to dest (created if needed) and removes src; nothing if src is
    missing."""
    try:
        data = src.read_bytes()
    except FileNotFoundError:
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "ab") as f:
        f.write(data)
    src.unlink()


def _need(d: dict, *path):
    cur = d
    for k in path:
        if not isinstance(cur, dict) or k not in cur:
            raise RunError(f"client JSON has no field {'.'.join(path)}")
        cur = cur[k]
    return cur


def client_row(doc: dict) -> dict:
    """The client's JSON object -> the flat result columns of a CSV row (load.py)."""
    r = _need(doc, "results")
    lat = _need(doc, "results", "latency_us")
    err = _need(doc, "results", "errors")
    total = err.get("total") if isinstance(err, dict) else err
    return {
        "ok": _need(doc, "results", "ok"), "errors": total,
        "elapsed_s": _need(doc, "results", "elapsed_s"),
        "throughput_rps": _need(doc, "results", "throughput_rps"),
        **{f"lat_{k}_us": lat.get(k) for k in ("mean", "p50", "p90", "p95", "p99", "p999", "max")},
        "saturated": r.get("saturated"),
        **{f"fair_{k}": (r.get("fairness") or {}).get(k) for k in ("jain", "rsd", "max_min")},
    }


def run_client(binary: Path, n: int, port: int, args: list, timeout: float,
               ip: str = HOST) -> list:
    """Runs the client with --format json; returns its JSON objects (one per run point)."""
    argv = [str(binary), str(n), ip, str(port), *args, "--format", "json", "--quiet"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RunError(f"client did not finish within {timeout:g} s: {' '.join(argv)}") from None
    # Exit 1 with a JSON result means the run finished but some requests failed: the
    # failures are in the result (its errors column and the report's observations), as
    # the lab records them. Exit 1 without a result, or any other status, is a failure.
    msg = (p.stderr.strip().splitlines() or ["no message"])[-1]
    if p.returncode not in (0, 1):
        raise RunError(f"client exited with code {p.returncode} ({msg}): {' '.join(argv)}")
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError as exc:
        if p.returncode != 0:
            raise RunError(f"client exited with code 1 ({msg}): {' '.join(argv)}") from None
        raise RunError(f"client output is not JSON ({exc}): {' '.join(argv)}") from None
    docs = doc if isinstance(doc, list) else [doc]
    if not docs or not all(isinstance(d, dict) for d in docs):
        raise RunError(f"client JSON is not an object or a list of objects: {' '.join(argv)}")
    return docs
