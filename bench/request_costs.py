#!/usr/bin/env python3
"""bench/request_costs.py: where each keep-alive request's CPU goes, per I/O model.

A benchmark program, not a test. Every configuration (main4 under each `--io` model at
delay 0, with timing on, and the thread model with --no-timing too, beside the yardstick's
do-nothing twins nullsrv_tpc -k and nullsrv_epoll -k) serves the same fixed number of
requests from the yardstick's `loadgen -k` (100 connections, one thread each), with
`perf stat` attached to the server alone. Per request served it reports what holds on any
CPU, counted: the system calls (the main ones by name), the context switches of the
server's threads, the wake-ups it causes (sched_wakeup in its context: a reply waking a
client thread, a hand-off waking a worker), and the malloc calls (a uprobe on libc's
malloc, where perf can place one). Beside them, what depends on the CPU and the load: the
server's CPU (perf's task-clock over the client's run), the client's req/s, and with
--profile a sampled split of the server's CPU by the system call each sample is inside
(send, recv, the wait, ...) or user space.

R rounds, each running every configuration once in a shuffled order; medians over the
rounds, printed as a Markdown table, and every run in runs.csv under --out.

  .venv/bin/python bench/request_costs.py [--rounds 3] [--requests 100000] [--profile]
      [--bin-dir build/release] [--yardstick DIR] [--only NAME,...] [--out DIR]
Needs perf (linux-perf) and the right to trace the server: root, or a perf_event_paranoid
of -1 with tracefs readable.
"""

import csv
import os
import random
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sitting

from analysis.launch import procs
from analysis.launch import server_spec as SS
from analysis.machine import cpu_model
from analysis.numbers import int_in

N = 1000          # array size
CONNECTIONS = 100
SERVERS = (       # name, program, options (ours) or template (the yardstick's)
    ("nullsrv_tpc", "nullsrv_tpc", "{bin} -p {port} -N {n} -k"),
    ("nullsrv_epoll", "nullsrv_epoll", "{bin} -p {port} -N {n} -k"),
    ("thread", "main4", ("--io", "thread")),
    ("thread-no-timing", "main4", ("--io", "thread", "--no-timing")),
    ("pool", "main4", ("--io", "pool")),
    ("epoll", "main4", ("--io", "epoll")),
    ("epoll-1-loop", "main4", ("--io", "epoll", "--loops", "1")),
    ("uring", "main4", ("--io", "uring")),
)
# The system calls counted by name (perf opens one counter per thread and event, so not
# every one of the kernel's ~350: the pool model has 65 threads); raw_syscalls:sys_enter
# counts them all, and "other calls" is what the named ones leave.
CALLS = ("recvfrom", "read", "sendto", "write", "epoll_wait", "epoll_pwait", "io_uring_enter",
         "futex", "pread64", "epoll_ctl", "accept4", "close", "setsockopt", "poll", "ppoll",
         "clock_nanosleep", "sched_yield")
# perf's counters, per request: the software events beside the tracepoints.
EVENTS = ("task-clock", "context-switches", "cpu-migrations", "sched:sched_wakeup")
MALLOC_PROBE = "probe_libc:malloc"


class CostError(sitting.Error):
    """A one-line reason the benchmark cannot go on."""


def parse_args(argv):
    p = sitting.parser(__doc__, ("main4",))
    p.add_argument("--requests", type=int_in(1000, 10_000_000), default=100_000,
                   help="requests per run (default 100000)")
    p.add_argument("--profile", action="store_true",
                   help="also one sampled run per configuration (perf record): the server's "
                        "CPU split by the system call it is in")
    sitting.add_only(p, tuple(s[0] for s in SERVERS), "configuration")
    a = p.parse_args(argv)
    a.configs = [s for s in SERVERS if not a.only or s[0] in a.only]
    return a


class Bench:
    def __init__(self, args, work: Path, logs: Path):
        self.args = args
        self.bin = Path(args.bin_dir).resolve()
        self.ys = Path(args.yardstick)
        self.work = work
        self.logs = logs
        self.rng = random.Random(args.seed)
        self.malloc = add_malloc_probe()

    def start(self, config: tuple, port: int, tag: str):
        name, prog, how = config
        if isinstance(how, str):
            spec = SS.ServerSpec(name, "kit", self.ys / prog, template=how)
            opts = SS.Options()
        else:
            spec = SS.ServerSpec(name, "lockbench", self.bin / prog)
            opts = SS.Options(0.0, extra=("--no-twin", *how))
        return sitting.start_server(spec, N, port, self.work, self.logs / f"{tag}.server.log",
                                    opts)

    def loadgen(self, port: int) -> list:
        return [str(self.ys / "loadgen"), "-p", str(port), "-t", str(CONNECTIONS),
                "-n", str(self.args.requests), "-k", "-T", "120", "-N", str(N)]

    def run(self, config: tuple, rnd: int) -> dict:
        """One counted run: the server's counters over the client's run, per request."""
        port = procs.pick_port(self.rng)
        tag = f"r{rnd}_{config[0]}"
        srv = self.start(config, port, tag)
        stat_file = self.logs / f"{tag}.perf.csv"
        events = ["-e", ",".join([*(f"syscalls:sys_enter_{c}" for c in CALLS),
                                  "raw_syscalls:sys_enter", *EVENTS])]
        if self.malloc:
            events += ["-e", MALLOC_PROBE]
        try:
            client = attached(["perf", "stat", "-x", ",", "-o", str(stat_file), *events,
                               "-p", str(srv.proc.pid)], self.loadgen(port))
        finally:
            srv.stop()
        result = sitting.loadgen_result(client.stdout)
        done = result["done"]
        row = {"config": config[0], "round": rnd, "done": done, "rps": result["rps"]}
        for event, count in read_perf_stat(stat_file).items():
            row[event] = count / done if done else None
        if row.get("task-clock") is not None:  # perf counts it in ms
            row["task-clock"] *= 1000
        return row

    def profile(self, config: tuple) -> dict:
        """One sampled run: the share of the server's CPU samples in each system call."""
        port = procs.pick_port(self.rng)
        tag = f"profile_{config[0]}"
        srv = self.start(config, port, tag)
        data = self.logs / f"{tag}.perf.data"
        try:
            attached(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2999", "-g",
                      "-o", str(data), "-p", str(srv.proc.pid)], self.loadgen(port))
        finally:
            srv.stop()
        shares = syscall_shares(data)
        data.unlink()   # megabytes, and what it says is in the shares
        return shares


def attached(perf_argv: list, client_argv: list) -> subprocess.CompletedProcess:
    """Runs the client while perf watches the server: perf starts with its events disabled
    and counts from its acknowledgement of "enable" until the client is done, so neither
    the server's start or stop nor perf's own attaching is counted."""
    with tempfile.TemporaryDirectory(prefix="lockbench_perfctl_") as d:
        ctl, ack = Path(d) / "ctl", Path(d) / "ack"
        os.mkfifo(ctl)
        os.mkfifo(ack)
        perf = subprocess.Popen([*perf_argv[:2], "-D", "-1", "--control", f"fifo:{ctl},{ack}",
                                 *perf_argv[2:]], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            with Control(ctl, ack, perf) as control:
                control.say("enable")
                client = subprocess.run(client_argv, capture_output=True, text=True,
                                        timeout=180)
                control.say("disable")
        finally:
            perf.send_signal(signal.SIGINT)
            _, err = perf.communicate(timeout=60)
    if perf.returncode not in (0, -signal.SIGINT, 130):
        last = err.strip().splitlines()[-1] if err.strip() else perf.returncode
        raise CostError(f"perf failed: {last}")
    if client.returncode != 0:
        raise CostError(f"loadgen failed (exit {client.returncode}): {client.stderr.strip()[:200]}")
    return client


class Control:
    """perf's control FIFOs: a command written, its "ack" read, each within a deadline (a
    perf that died or never opened them is an error, not a hang)."""

    def __init__(self, ctl: Path, ack: Path, perf: subprocess.Popen):
        self.ctl, self.ack, self.perf = ctl, ack, perf
        self.w = self.r = None

    def __enter__(self):
        self.r = os.open(self.ack, os.O_RDONLY | os.O_NONBLOCK)  # first: perf may wait for it
        deadline = time.monotonic() + 10
        while self.w is None:
            try:
                self.w = os.open(self.ctl, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: perf has not opened it yet
                if self.perf.poll() is not None or time.monotonic() > deadline:
                    raise CostError("perf did not start (is the server traceable? root?)") from None
                time.sleep(0.01)
        return self

    def say(self, command: str) -> None:
        os.write(self.w, f"{command}\n".encode())
        deadline, got = time.monotonic() + 30, b""
        while b"ack" not in got:
            left = deadline - time.monotonic()
            if left <= 0 or self.perf.poll() is not None:
                raise CostError(f"perf did not acknowledge {command!r}")
            if select.select([self.r], [], [], left)[0]:
                data = os.read(self.r, 64)
                got += data
                if not data:  # no writer yet: perf opens its end when it gets there
                    time.sleep(0.01)

    def __exit__(self, *exc):
        for fd in (self.w, self.r):
            if fd is not None:
                os.close(fd)


def read_perf_stat(path: Path) -> dict:
    """perf stat -x , output: count,unit,event,... per line; events it could not count
    are left out. System calls are keyed by their name alone."""
    out = {}
    for line in path.read_text().splitlines():
        cells = line.split(",")
        if len(cells) < 3 or not cells[0].replace(".", "", 1).isdigit():
            continue
        event = cells[2].removeprefix("syscalls:sys_enter_")
        out[event] = float(cells[0])
    return out


def syscall_shares(data: Path) -> dict:
    """The share of the server's CPU samples in each system call (named by the libc
    wrapper that made it, the first user-space frame of the sample's stack), in user space
    and in the kernel outside any system call (interrupts, soft interrupts); and, as
    "scheduled out on return", the share spent switching to another thread on a system
    call's way back (a reply or a hand-off woke a thread that took the CPU)."""
    res = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,sym"],
                         capture_output=True, text=True, timeout=300)
    counts: dict = {}
    for block in res.stdout.split("\n\n"):
        frames = [f.split(None, 1) for f in block.strip().splitlines() if f.strip()]
        if not frames:
            continue
        user = [f for f in frames if not f[0].startswith("ffffffff")]
        syms = {f[1] for f in frames if len(f) > 1}
        if frames[0] in user:
            where = "user"
        elif any(x.startswith("io_uring") or "_sys_io_uring" in x for x in syms):
            where = "io_uring_enter"   # liburing makes the call inline: no wrapper's name
        elif user and "do_syscall_64" in syms:
            where = call_name(user[0][1] if len(user[0]) > 1 else "?")
        else:   # an interrupt, a soft interrupt or a page fault
            where = "kernel, outside a system call"
        counts[where] = counts.get(where, 0) + 1
        if "exit_to_user_mode_loop" in syms and "schedule" in syms:
            counts["scheduled out on return"] = counts.get("scheduled out on return", 0) + 1
    total = sum(v for k, v in counts.items() if k != "scheduled out on return") or 1
    return {k: v / total for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}


def call_name(wrapper: str) -> str:
    """libc's wrapper's name to the call's: __GI___libc_write -> write, __send -> send,
    pthread_cond_signal -> futex."""
    name = re.sub(r"^(?:__GI_)?_*(?:libc_)?", "", wrapper.split("+")[0].split("@")[0])
    if "futex" in name or name.startswith(("lll_", "pthread_cond", "pthread_mutex")):
        return "futex"    # glibc's lock and condition variable paths into the kernel
    return name.removesuffix("64") if name.endswith("pread64") else name or wrapper


def add_malloc_probe() -> bool:
    """A uprobe on libc's malloc, so that perf stat counts the server's allocations;
    False where perf cannot place one (then the column is left out)."""
    libc = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6",
                             "/lib/aarch64-linux-gnu/libc.so.6") if os.path.exists(p)), None)
    if libc is None:
        return False
    subprocess.run(["perf", "probe", "-q", "-d", MALLOC_PROBE], capture_output=True)
    res = subprocess.run(["perf", "probe", "-q", "-x", libc, "malloc"], capture_output=True)
    return res.returncode == 0


def remove_malloc_probe() -> None:
    subprocess.run(["perf", "probe", "-q", "-d", MALLOC_PROBE], capture_output=True)


def run_rounds(bench: Bench, configs: list, rounds: int) -> list:
    rows = []
    for rnd in range(1, rounds + 1):
        order = configs[:]
        bench.rng.shuffle(order)
        for i, config in enumerate(order, 1):
            print(f"request_costs: round {rnd}/{rounds}, {i}/{len(order)}: {config[0]}",
                  file=sys.stderr, flush=True)
            try:
                rows.append(bench.run(config, rnd))
            except sitting.Error as exc:
                raise CostError(f"{config[0]}, round {rnd}: {exc}") from None
    return rows


COLUMNS = (  # (title, key or keys summed, digits)
    ("req/s", "rps", 0), ("CPU us", "task-clock", 1),
    ("recv", ("recvfrom", "read"), 2), ("send", ("sendto", "write"), 2),
    ("wait", ("epoll_wait", "epoll_pwait", "io_uring_enter"), 3), ("futex", "futex", 3),
    ("other calls", "other_calls", 3), ("ctx switches", "context-switches", 3),
    ("wake-ups", "sched:sched_wakeup", 3), ("mallocs", MALLOC_PROBE, 4),
)
# The system calls the table has columns for; the rest are "other calls".
NAMED_CALLS = {k for _, key, _ in COLUMNS for k in (key if isinstance(key, tuple) else (key,))
               if k in CALLS}
NOT_CALLS = {"rps", "done", "round", "config", "raw_syscalls:sys_enter",
             *EVENTS, MALLOC_PROBE}


def value(row: dict, key) -> float | None:
    if key == "other_calls":
        return row["raw_syscalls:sys_enter"] - sum(row.get(k) or 0.0 for k in NAMED_CALLS)
    keys = key if isinstance(key, tuple) else (key,)
    found = [row[k] for k in keys if row.get(k) is not None]
    return sum(found) if found else (0.0 if isinstance(key, tuple) else None)


def table(rows: list, configs: list) -> str:
    lines = ["| configuration | " + " | ".join(c[0] for c in COLUMNS) + " |",
             "|---|" + "---:|" * len(COLUMNS)]
    for name, _, _ in configs:
        mine = [r for r in rows if r["config"] == name]
        cells = []
        for _, key, digits in COLUMNS:
            vals = [v for v in (value(r, key) for r in mine) if v is not None]
            cells.append(f"{statistics.median(vals):.{digits}f}" if vals else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def others(rows: list) -> str:
    """The system calls beside the named ones that some configuration makes at least once
    in 200 requests: the configurations and the most a run made per request."""
    names = sorted({k for r in rows for k in r if k not in NOT_CALLS and k not in NAMED_CALLS})
    out = []
    for name in names:
        vals = [r.get(name) or 0.0 for r in rows]
        per = {r["config"] for r in rows if (r.get(name) or 0) >= 0.005}
        if per:
            out.append(f"{name} ({', '.join(sorted(per))}): up to {max(vals):.3f}")
    return "; ".join(out)


def write_csv(path: Path, rows: list) -> None:
    keys = sorted({k for r in rows for k in r}, key=lambda k: (k not in NOT_CALLS, k))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not sitting.begin(args):
        return 2
    if shutil.which("perf") is None:
        print("request_costs: perf not found (apt-get install linux-perf)", file=sys.stderr)
        return 1
    out = args.out
    work = Path(tempfile.mkdtemp(prefix="lockbench_costs_"))
    bench = None
    try:
        (out / "logs").mkdir(parents=True, exist_ok=True)
        bench = Bench(args, work, out / "logs")
        rows = run_rounds(bench, args.configs, args.rounds)
        write_csv(out / "runs.csv", rows)
        print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; main4 at delay 0, n = {N}, "
              f"{CONNECTIONS} `loadgen -k` connections, {args.requests} requests a run; "
              f"medians over {args.rounds} rounds, per request served\n")
        print(table(rows, args.configs))
        print(f"\nother system calls per request: {others(rows) or 'none over 0.005'}")
        if not bench.malloc:
            print("mallocs: not counted (perf could not place a uprobe on libc's malloc)")
        if args.profile:
            for config in args.configs:
                shares = bench.profile(config)
                print(f"\n{config[0]}, server CPU samples by system call: " + ", ".join(
                    f"{k} {v:.0%}" for k, v in shares.items() if v >= 0.01))
        print(f"\nruns: {out / 'runs.csv'}")
        return 0
    except KeyboardInterrupt:
        print("request_costs: interrupted; servers stopped", file=sys.stderr)
        return 130
    except (sitting.Error, OSError, subprocess.TimeoutExpired) as exc:
        print(f"request_costs: {exc}", file=sys.stderr)
        return 1
    finally:
        procs.stop_all()
        if bench is not None and bench.malloc:
            remove_malloc_probe()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
