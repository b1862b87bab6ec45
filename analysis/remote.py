"""Servers and load agents on other hosts, reached through a command prefix (issue 14).

A host is a command prefix that runs a command there: `ssh user@host` in real use,
`ip netns exec NAME` in the tests, `env` for this machine. Every command sent through a
prefix is the same two words, `sh -s`, with the script on its standard input, so no
quoting differs between ssh (which joins its arguments into one remote shell line) and
prefixes that exec their arguments (ip netns exec, env).

What runs on a host: the binary check (`sha256sum` of the same paths as here), the facts
for the report (kernel, cores, CPU model), the server (started in a fresh folder under
/tmp, its pid reported by the shell that waits for it; ready when its port or twin
listens in that host's /proc/net/tcp{,6}; stopped by `kill -TERM` over the prefix; its
timing file, log and trace brought back with `cat`), and the load agents (the client,
started together at an agreed wall-clock time, each writing its latency histogram).
"""

import contextlib
import json
import math
import queue
import random
import shlex
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from .kernel_sockets import parse_table, twin
from .procs import (
    _LIVE,
    KIT_TIME_FILE,
    RunError,
    StartError,
    last_complaint,
    parse_summary,
    split_words,
)

_LISTEN = "0A"
HIST_MARK = "@@lockbench-histogram@@"


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

    def run(self, script: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
        """Runs the shell script there; HostError if the prefix cannot run or times out."""
        try:
            return subprocess.run(self.argv(), input=script, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HostError(f"host {self.label!r}: no answer within {timeout:g} s") from None
        except OSError as exc:
            raise HostError(f"host {self.label!r}: cannot run {self.prefix[0]!r} "
                            f"({exc.strerror})") from None

    def popen(self, script: str, stderr) -> subprocess.Popen:
        try:
            p = subprocess.Popen(self.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=stderr, text=True, start_new_session=True)
        except OSError as exc:
            raise HostError(f"host {self.label!r}: cannot run {self.prefix[0]!r} "
                            f"({exc.strerror})") from None
        p.stdin.write(script)
        p.stdin.close()
        p.stdin = None      # communicate() must not flush it
        return p


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
    r = host.run("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; exit 0\n", timeout=15)
    return {port for port, st, _ in parse_table(r.stdout) if st == _LISTEN}


def pick_port(host: Host, rng: random.Random | None = None) -> int:
    """A port P with P and its twin not listening on the host, both in 1024..32767."""
    rng = rng or random.Random()
    up = listening_ports(host)
    for _ in range(200):
        p = (rng.randint(4, 127) << 8) | rng.randint(4, 127)
        if p != twin(p) and p not in up and twin(p) not in up:
            return p
    raise RunError(f"no free port pair on host {host.label!r}")


def remote_exit(code: int) -> int:
    """A shell's `$?` of a waited job -> Popen's convention (negative: killed by signal)."""
    return -(code - 128) if 128 < code < 160 else code


# ---- the server -----------------------------------------------------------------------------

class RemoteServer:
    """A server on `host`, run as `argv` in a fresh folder there. The same interface as
    procs.Server/KitServer: start(), stop() -> summary, alive(), died(), stopped_ok(),
    time_lines(); a context manager. `kind` 'lockbench' (argv carries the time file
    option; its summary line is parsed from the log) or 'kit' (the kit's
    server_output_time_aggregated; SIGTERM is a normal stop)."""

    def __init__(self, host: Host, argv: list, n: int, port: int, *, kind: str, label: str,
                 log_file: Path, time_dest: Path, trace_dest: Path | None = None,
                 ready_timeout: float = 15.0, work: str | None = None):
        self.host, self.kind, self.name, self.n, self.port = host, kind, label, n, port
        self.prog = Path(argv[0]).name
        self.argv = [str(a) for a in argv]
        self.work = work or f"/tmp/lockbench-{uuid.uuid4().hex[:12]}"
        self.log_file, self.time_dest, self.trace_dest = log_file, time_dest, trace_dest
        self.time_file = time_dest          # local copy (filled at stop)
        self.ready_timeout = ready_timeout
        self.proc, self.pid, self.exit_code = None, None, None
        self.summary_line, self.listen_port = None, None
        self.lines: queue.Queue = queue.Queue()
        self._stopped = False

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

    def start(self) -> "RemoteServer":
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
                                 f"{self.host.label!r}; see {self.log_file}")
            if line.startswith("pid="):
                self.pid = int(line[4:])
        while True:
            up = listening_ports(self.host)
            for p in (twin(self.port), self.port):
                if p in up and self.alive():
                    self.listen_port = p
                    with open(self.log_file, "a") as log:
                        log.write(f"# pid={self.pid} (on the host)\n# listening on {p}\n")
                    return self
            if not self.alive():
                self.stop()
                last = self._last_log_line()
                from .kernel_sockets import describe_exit
                raise StartError(f"{self.name} (n={self.n}) exited at start-up "
                                 f"({describe_exit(self.exit_code)}) on host "
                                 f"{self.host.label!r}: {last or 'no message'}")
            if time.monotonic() > deadline:
                self.stop()
                raise StartError(f"{self.name} (n={self.n}) did not listen on port "
                                 f"{self.port} or its twin {twin(self.port)} within "
                                 f"{self.ready_timeout:g} s on host {self.host.label!r}; "
                                 f"see {self.log_file}")
            time.sleep(0.05)

    def _last_log_line(self) -> str:
        return last_complaint(self.log_file)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def died(self) -> RunError:
        self.stop()
        from .kernel_sockets import describe_exit
        return RunError(f"{self.name} (n={self.n}) died during the experiment on host "
                        f"{self.host.label!r} ({describe_exit(self.exit_code)}); "
                        f"see {self.log_file}")

    def stopped_ok(self) -> bool:
        return self.exit_code in ((0, None) if self.kind == "lockbench"
                                  else (0, None, -15))

    def time_lines(self) -> list:
        """The complete lines of the server's timing file so far, read on the host."""
        r = self.host.run(f"cat {shlex.quote(self.work)}/{KIT_TIME_FILE} 2>/dev/null; "
                          "exit 0\n", timeout=15)
        return r.stdout.split("\n")[:-1]

    def stop(self, timeout: float = 5.0) -> dict:
        """SIGTERM over the prefix (SIGKILL after `timeout`), then brings back the timing
        file (appended to time_dest), the log and the trace, and removes the folder."""
        if self.proc is None or self._stopped:
            return parse_summary(self.summary_line) if self.summary_line else {}
        self._stopped = True
        _LIVE.discard(self)
        try:
            if self.pid is not None:   # also when the local end is gone (ssh dropped)
                self.host.run(self._kill_script("TERM"), timeout=15)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=timeout)
                self.host.run(self._kill_script("KILL"), timeout=15)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            code = None
            while True:
                line = self._next(1.0)
                if not line:
                    break
                if line.startswith("exit="):
                    code = remote_exit(int(line[5:]))
            self.exit_code = code if code is not None else self.proc.returncode
            self._fetch()
        finally:
            self._err.close()
        with open(self.log_file, "a") as log:
            log.write(f"# exit={self.exit_code}\n")
        return parse_summary(self.summary_line) if self.summary_line else {}

    def _kill_script(self, sig: str) -> str:
        """kill -SIG the server's pid there, only if that pid is still this server (its
        command line names the program), never a process that got the pid later."""
        return (f"tr '\\000' ' ' </proc/{self.pid}/cmdline 2>/dev/null | "
                f"grep -qF -- {shlex.quote(self.prog)} && kill -{sig} {self.pid} "
                "2>/dev/null; exit 0\n")

    def _fetch(self) -> None:
        w = shlex.quote(self.work)
        r = self.host.run(f"cd {w} 2>/dev/null || exit 0\ncat server.log\n", timeout=60)
        with open(self.log_file, "a") as log:
            log.write(r.stdout)
        for line in r.stdout.splitlines():
            if line.startswith(f"{self.prog}: summary"):
                self.summary_line = line
        r = self.host.run(f"cat {w}/{KIT_TIME_FILE} 2>/dev/null; exit 0\n", timeout=60)
        if r.stdout:
            self.time_dest.parent.mkdir(parents=True, exist_ok=True)
            with open(self.time_dest, "a") as f:
                f.write(r.stdout)
        if self.trace_dest is not None:
            r = self.host.run(f"cat {w}/trace.csv 2>/dev/null; exit 0\n", timeout=60)
            if r.stdout:
                self.trace_dest.write_text(r.stdout)
        self.host.run(f"rm -rf {w}; exit 0\n", timeout=30)

    def __enter__(self):
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


# ---- load agents ----------------------------------------------------------------------------

def split(total: int, parts: int) -> list:
    """total split into `parts` whole shares differing by at most one (larger first)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def agent_shares(threads: int, requests: int | None, rate: float | None, agents: int) -> list:
    """Each agent's [threads, requests, rate]: threads split evenly; requests split the
    same way; an open-loop rate in proportion to the agent's threads. Agents that would get
    no thread get no share (fewer threads than agents)."""
    t = [x for x in split(threads, agents) if x > 0]
    r = split(requests, len(t)) if requests else [None] * len(t)
    return [{"threads": ti, "requests": ri,
             "rate": rate * ti / threads if rate else None} for ti, ri in zip(t, r)]


def _client_script(client: Path, args: list) -> str:
    return ("H=$(mktemp) || exit 97\n"
            f"{shlex.join([str(client), *args])} --histogram-out \"$H\" </dev/null\n"
            f"rc=$?\necho {HIST_MARK}\ncat \"$H\" 2>/dev/null\nrm -f \"$H\"\nexit $rc\n")


def run_agents(hosts: list, client: Path, n: int, addr: str, port: int, common: list,
               shares: list, timeout: float, lead_s: float) -> list:
    """Runs one client per share on its host (share i on hosts[i]), all told to start at
    the same wall-clock time `lead_s` from now. Returns [(client JSON, histogram JSON)].
    RunError naming the agent if one fails."""
    start_at = time.time_ns() + int(lead_s * 1e9)
    procs = []
    try:
        for host, sh in zip(hosts, shares):
            args = [str(n), addr, str(port), *common, "--threads", str(sh["threads"])]
            if sh["requests"]:
                args += ["--requests", str(sh["requests"])]
            if sh["rate"]:
                args += ["--rate", f"{sh['rate']:.6g}"]
            args += [*sh.get("extra", []), "--format", "json", "--quiet",
                     "--start-at", str(start_at)]
            procs.append((host, host.popen(_client_script(client, args),
                                           stderr=subprocess.PIPE)))
        out = []
        deadline = time.monotonic() + timeout + lead_s
        for i, (host, p) in enumerate(procs):
            try:
                stdout, stderr = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RunError(f"agent {i + 1} ({host.label}): client did not finish within "
                               f"{timeout:g} s") from None
            body, _, hist = stdout.partition(HIST_MARK)
            if p.returncode != 0:
                msg = (stderr.strip().splitlines() or ["no message"])[-1]
                raise RunError(f"agent {i + 1} ({host.label}): client exited with code "
                               f"{p.returncode} ({msg})")
            try:
                doc, h = json.loads(body), json.loads(hist)
            except json.JSONDecodeError as exc:
                raise RunError(f"agent {i + 1} ({host.label}): client output is not JSON "
                               f"({exc})") from None
            out.append((doc, h))
        return out
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


# ---- merging ------------------------------------------------------------------------------

def merge_histograms(hists: list) -> dict:
    """Adds histograms of the client's --histogram-out layout (one run point each):
    bucket counts added per [lo, hi], count and sum added, min and max of all."""
    buckets: dict = {}
    for h in hists:
        for lo, hi, c in h["buckets"]:
            buckets[(lo, hi)] = buckets.get((lo, hi), 0) + c
    counts = [h["count"] for h in hists if h["count"]]
    return {"count": sum(h["count"] for h in hists), "sum_ns": sum(h["sum_ns"] for h in hists),
            "min_ns": min((h["min_ns"] for h in hists if h["count"]), default=0),
            "max_ns": max((h["max_ns"] for h in hists), default=0) if counts else 0,
            "buckets": [[lo, hi, c] for (lo, hi), c in sorted(buckets.items())]}


def percentile_ns(h: dict, q: float) -> int:
    """Nearest-rank percentile as the client computes it (LatencyHistogram::Percentile):
    the midpoint of the bucket holding rank ceil(q*count), clamped to [min, max]."""
    count = h["count"]
    if count == 0:
        return 0
    rank = min(max(math.ceil(q * count), 1), count)
    seen = 0
    for lo, hi, c in h["buckets"]:
        seen += c
        if seen >= rank:
            return min(max(lo + (hi - lo) // 2, h["min_ns"]), h["max_ns"])
    return h["max_ns"]


QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def latency_us(h: dict) -> dict:
    out = {"mean": h["sum_ns"] / h["count"] / 1e3 if h["count"] else 0.0,
           "min": h["min_ns"] / 1e3, "max": h["max_ns"] / 1e3}
    out.update({k: percentile_ns(h, q) / 1e3 for k, q in QUANTILES.items()})
    return out


def merge_agents(results: list) -> dict:
    """[(client JSON, histogram JSON)] of the agents of one run -> one client-like JSON:
    counts and throughputs summed, the window the longest, latency percentiles from the
    merged histogram (never averaged), `agents` the per-agent results."""
    docs = [d for d, _ in results]
    hists = [h["runs"][0] for _, h in results]
    merged = merge_histograms(hists)
    res = [d["results"] for d in docs]
    errors = {}
    for r in res:
        e = r.get("errors", {})
        for k, v in (e.items() if isinstance(e, dict) else [("total", e)]):
            if isinstance(v, (int, float)):
                errors[k] = errors.get(k, 0) + v
    cfg = dict(docs[0].get("config", {}))
    cfg["threads"] = sum(d["config"].get("threads") or 0 for d in docs)
    reqs = [d["config"].get("requests") for d in docs]
    cfg["requests"] = sum(reqs) if all(x is not None for x in reqs) else None
    cfg["agents"] = len(docs)
    return {"tool": docs[0].get("tool"), "version": docs[0].get("version"), "config": cfg,
            "results": {"requests": sum(r["requests"] for r in res),
                        "ok": sum(r["ok"] for r in res), "errors": errors,
                        "elapsed_s": max(r["elapsed_s"] for r in res),
                        "throughput_rps": sum(r["throughput_rps"] for r in res),
                        "latency_us": latency_us(merged),
                        "saturated": any(bool(r.get("saturated")) for r in res),
                        "merged_from_agents": len(docs)},
            "agents": docs}
