"""The configurations bench/perf.py measures (its cells): lockbench's servers and I/O models,
the null servers, the clients and Redis for throughput; timing on and off; the kit's lab
runs; each with its id and how long it takes; and what a server binary offers (--io, its
options), read from its --help."""

import functools
import re
import subprocess
from pathlib import Path

CONNS = 100         # client threads / connections, as the kit's client
LAB_DELAY = 10      # the kit's ART_DELAY


@functools.cache
def server_help(binary: Path) -> str:
    try:
        return subprocess.run([str(binary), "--help"], capture_output=True, text=True,
                              timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def has_io_option(binary: Path) -> list:
    """The --io models the binary offers, read from its --help line
    '--io TEXT:{thread,pool,epoll}=thread' ([] when it has no --io option)."""
    for line in server_help(binary).splitlines():
        if line.strip().startswith("--io"):
            m = re.search(r"\{([^}]*)\}", line)
            models = [x.strip() for x in m.group(1).split(",")] if m else []
            return [x for x in models if x] or ["thread-per-connection", "pool", "epoll"]
    return []


def has_option(binary: Path, option: str) -> bool:
    return any(line.strip().startswith(option) for line in server_help(binary).splitlines())


def make_cell(**c) -> dict:
    """One configuration: the given fields, the defaults of a throughput run, and its id
    (every field that tells it apart, as the rows and logs name it)."""
    c.setdefault("kind", "throughput")
    c.setdefault("timing", "on")
    c.setdefault("io", "")
    c.setdefault("delay_mode", "")
    c.setdefault("workload", "")
    io = c["io"]
    c["id"] = "_".join(str(x) for x in (c["kind"], c["server"], io or "-", c["client"],
                                        c["mode"], f"d{c['delay_us']}",
                                        c["delay_mode"] or "-", c["workload"] or "-",
                                        "t" + c["timing"]))
    return c


def io_arg(io: str):
    """The --io argument of an I/O model (None: the binary's default, no --io given)."""
    return None if io == "default" else io


def throughput_cells(args, ios: list, have_redis: bool) -> list:
    """Req/s of every lockbench server and I/O model, the null servers, our client and Redis,
    in both connection modes."""
    delays = [0] if args.quick else [0, LAB_DELAY]
    servers = [f"main{i}" for i in range(1, 5)]
    strategies = [s for s in (args.strategies or "").split(",") if s]
    cells = []
    for mode in ("per-request", "keepalive"):
        for d in delays:
            for io in ios:
                for s in servers:
                    if args.quick and s in ("main2", "main3"):
                        continue
                    cells.append(make_cell(server=s, server_kind="lockbench", binary=s, io=io,
                                           io_arg=io_arg(io), client="loadgen", mode=mode,
                                           delay_us=d))
                for strat in strategies:
                    cells.append(make_cell(server=f"lockserver:{strat}",
                                           server_kind="lockbench", binary="lockserver",
                                           pre=["--strategy", strat], io=io, io_arg=io_arg(io),
                                           client="loadgen", mode=mode, delay_us=d))
            for ref in ("nullsrv_tpc", "nullsrv_epoll"):
                cells.append(make_cell(server=ref, server_kind="null", client="loadgen",
                                       mode=mode, delay_us=d))
        cells.append(make_cell(server="nullsrv_epoll", server_kind="null", client="ours",
                               mode=mode, delay_us=0))
        if have_redis:
            cells.append(make_cell(server="redis", server_kind="redis",
                                   client="redis-benchmark", mode=mode, delay_us=0))
    return cells


def timing_cells(bin_dir: Path, ios: list) -> list:
    """What timing costs: main4 keep-alive, timing on / off, as one A B B A block per
    connection count (100 and 2); none with binaries that have no --no-timing."""
    best_io = "epoll" if "epoll" in ios else ios[0]
    return [make_cell(kind="timing", server="main4", server_kind="lockbench", binary="main4",
                      io=best_io, io_arg=io_arg(best_io), client="loadgen", mode="keepalive",
                      delay_us=0, timing=timing, workload=f"c{conns}_abba{k}", conns=conns)
            for conns in ((CONNS, 2) if has_option(bin_dir / "main4", "--no-timing") else ())
            for k, timing in enumerate(("on", "off", "off", "on"))]


def lab_cells(bin_dir: Path, ios: list) -> list:
    """The lab metric of main4 under the kit workload and uncontended, with the lab's model
    (thread per connection) and with the epoll and io_uring loops, which run requests
    themselves when a precise pause never sleeps. Binaries without --delay-mode sleep the
    kit's way (usleep) only."""
    mode_flag = has_option(bin_dir / "main4", "--delay-mode")
    return [make_cell(kind="lab", server="main4", server_kind="lockbench", binary="main4",
                      io=io, io_arg=io_arg(io), client="ours", mode="per-request",
                      delay_us=LAB_DELAY, delay_mode=dm, workload=wl, mode_flag=mode_flag)
            for io in ["default"] + [m for m in ("epoll", "uring") if m in ios]
            for dm in (("precise", "usleep") if mode_flag else ("usleep",))
            for wl in ("kit", "uncontended")]


def build_cells(args, bin_dir: Path, have_redis: bool) -> list:
    """Every configuration of one round, in a fixed order (each round shuffles it), kept to
    the kinds --only names."""
    only = args.only
    ios = has_io_option(bin_dir / "main4") or ["default"]
    cells = (throughput_cells(args, ios, have_redis) + timing_cells(bin_dir, ios)
             + lab_cells(bin_dir, ios))
    if only:
        cells = [c for c in cells if c["kind"] in only or ("clients" in only and is_client_cell(c))]
    return cells


def is_client_cell(cell: dict) -> bool:
    """The clients' comparison: our client and loadgen against nullsrv_epoll, delay 0."""
    return (cell["kind"] == "throughput" and cell["server"] == "nullsrv_epoll"
            and cell["delay_us"] == 0)


def estimate(cell: dict, duration: float) -> float:
    if cell["kind"] == "lab":
        return 3.0
    return duration * (2.2 if cell["client"] == "redis-benchmark" else 1.0) + 0.6
