"""The runner's command line (python -m analysis lab|sweep|all): its options, each value
checked before anything starts (numbers by the one rule of numbers.py; argparse turns
ArgumentTypeError into exit 2), and the run they ask for (run_experiments). The dispatcher,
analysis/__main__.py, builds the parser from these pieces and the report's."""

import argparse
import ipaddress
import os
import sys
from pathlib import Path

from analysis import SERVERS, is_server_label
from analysis.launch import server_spec as SS
from analysis.launch.procs import RunError, check_binary
from analysis.load import SWEEP_KINDS
from analysis.numbers import float_in, int_in, list_of
from analysis.progress import Progress, hms
from analysis.runner import experiment as R
from analysis.runner.binaries import default_client, find_binary, lockserver_strategies

PROG = "python -m analysis"
QUICK_RUNS = 5
QUICK_SWEEP = {"duration_s": 0.3, "warmup_s": 0.1, "reps": 1}


# ---- argument types (argparse turns ArgumentTypeError into exit 2) ---------------------------
# Every value is checked before anything starts, numbers by the one rule of numbers.py.

MAX_N = 10_000_000          # n, client and servers: common/limits.h (test_limits.py)
MAX_DELAY_US = 1_000_000    # the servers' --delay-us range: the same header's kMaxDelayUs
MAX_THREADS = 4096          # the client's --threads limit: kMaxClientThreads
MAX_STRIPES = 1_048_576     # lockserver --stripes: kMaxStripes


def delay_us(t):
    """The servers' --delay-us: an integer number of microseconds, kept as a float (the
    results' delay_us column)."""
    return float(int_in(0, MAX_DELAY_US)(t))


def server_name(t):
    """main1..main4 or a lockserver strategy NAME[:K] (checked against the binary later:
    check_servers)."""
    if not is_server_label(t):
        raise argparse.ArgumentTypeError(
            f"unknown server {t!r}; allowed: main1..main4 or a strategy of lockserver "
            "--list-strategies, optionally NAME:K for K stripes")
    _, colon, k = t.partition(":")
    if colon and not 1 <= int(k) <= MAX_STRIPES:
        raise argparse.ArgumentTypeError(
            f"{t!r}: {k} stripes is out of range; allowed: 1..{MAX_STRIPES}")
    return t


def _one_of(what: str, choices):
    """A word from choices, as given."""
    def parse(t):
        if t not in choices:
            raise argparse.ArgumentTypeError(f"unknown {what} {t!r}; allowed: "
                                             f"{', '.join(choices)}")
        return t
    return parse


def _refusing(check, allowed: str, reason=None):
    """The text as given when check(text) raises no ValueError; else refused with the
    ValueError's words (or reason(text)) and what is allowed."""
    def parse(t):
        try:
            check(t)
        except ValueError as exc:
            why = reason(t) if reason else str(exc)
            raise argparse.ArgumentTypeError(f"{why}; allowed: {allowed}") from None
        return t
    return parse


def _host_check(t):
    from analysis.runner.remote import Host
    Host.parse(t)


kind_name = _one_of("sweep kind", SWEEP_KINDS)
connection_mode = _one_of("connection mode", ("per-request", "keepalive"))
server_cmd = _refusing(SS.parse_server_cmd, "a command with {port} and any of {bin} {n} {ip}, "
                       "e.g. '{bin} {n} {ip} {port}'")
host_prefix = _refusing(_host_check, "a command prefix such as 'ssh user@host' or "
                        "'ip netns exec NAME'")
ip_address = _refusing(ipaddress.ip_address, "e.g. 10.0.0.2",
                       lambda t: f"{t!r} is not a numeric IPv4 or IPv6 address")


def path_arg(t) -> Path:
    if not t.strip():
        raise argparse.ArgumentTypeError("empty path; allowed: a directory or file name")
    return Path(t).absolute()


def existing_dir(t):
    p = path_arg(t)
    if not p.is_dir():
        raise argparse.ArgumentTypeError(f"{t!r} is not a directory; allowed: an existing "
                                         "directory")
    return p


def new_dir(t):
    """A results folder to create: absent, or an empty directory (made absolute, so it
    works from wherever the user stands while servers run elsewhere)."""
    p = path_arg(t)
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(f"{t!r} is a file; allowed: a new or empty directory")
    if p.is_dir() and any(p.iterdir()):
        raise argparse.ArgumentTypeError(f"{t!r} is not empty; allowed: a new or empty "
                                         f"directory (to continue a run there: --resume {t})")
    return p


def resume_dir(t):
    p = path_arg(t)
    if not (p / "metadata.json").is_file():
        raise argparse.ArgumentTypeError(f"cannot resume {t!r}: no metadata.json there; "
                                         "allowed: a results directory of an earlier run")
    return p


def out_dir(t):
    p = path_arg(t)
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(f"{t!r} is a file; allowed: a directory")
    return p


def executable_file(t):
    p = path_arg(t)
    if not (p.is_file() and os.access(p, os.X_OK)):
        raise argparse.ArgumentTypeError(f"{t!r} is not an executable file; allowed: the path "
                                         "of lockbench's client")
    return p


class UsageError(Exception):
    """A bad command line found after parsing (exit 2, one line)."""


def check_servers(labels, bin_dir: Path, option: str = "--servers") -> None:
    """Every label that is not main1..main4 must be a strategy of lockserver in bin_dir
    (UsageError naming the valid choices); ":K" only on the striped-* strategies.
    UsageError too if lockserver is needed but missing or broken."""
    extra = [s for s in dict.fromkeys(labels) if s not in SERVERS]
    if not extra:
        return
    try:
        names = lockserver_strategies(bin_dir)
    except RunError as exc:
        raise UsageError(f"argument --bin-dir: {exc}") from None
    for label in extra:
        name, _, k = label.partition(":")
        if name not in names:
            raise UsageError(f"argument {option}: unknown server {label!r}; allowed: "
                             f"{', '.join([*SERVERS, *names])} (NAME:K sets --stripes)")
        if k and not name.startswith("striped-"):
            raise UsageError(f"argument {option}: {label!r}: ':K' (stripes) applies only "
                             f"to {', '.join(n for n in names if n.startswith('striped-'))}")


class Parser(argparse.ArgumentParser):
    """argparse with one line on a bad command line: '<prog>: error: <what>' and exit 2
    (argparse would print the usage first; --help shows it)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


# ---- the parser -----------------------------------------------------------------------------

SERVER_CMD_HELP = (
    "run every server as this command, kit-style (nothing added; ready when it listens on "
    "the port or its twin; timing file server_output_time_aggregated in its working "
    "directory; SIGTERM is a normal stop). Fields: {bin} {n} {ip} {port}. Default: "
    "lockbench's own servers get their extra options, any other server in --bin-dir runs as "
    "the kit's '{bin} {n} {ip} {port}'")


def common_args(p):
    g = p.add_argument_group("where")
    # Resolved at once: servers run with their results folder as working directory.
    g.add_argument("--bin-dir", type=existing_dir,
                   default=R.REPO / "build" / "release",
                   help="directory with main1..main4 and client (default: %(default)s)")
    x = g.add_mutually_exclusive_group()
    x.add_argument("--results-dir", type=new_dir, metavar="DIR",
                   help="new directory for the raw results (default: results/<UTC time>/, "
                        "or results/scratch/<UTC time>/ with --quick)")
    x.add_argument("--resume", type=resume_dir, metavar="DIR",
                   help="continue the interrupted run in DIR with the parameters stored there; "
                        "completed runs are skipped")
    g.add_argument("--port", type=int_in(1, 65535),
                   help="use this port (and its byte-swapped twin) for every server start "
                        "instead of a fresh free pair each time")
    g.add_argument("--server-cmd", type=server_cmd, default=None, metavar="TEMPLATE",
                   help=SERVER_CMD_HELP)
    g.add_argument("--client", type=executable_file, default=None, metavar="PATH",
                   help="lockbench client to use (default: --bin-dir's client, else "
                        "build/release's)")
    g.add_argument("--client-timeout", type=float_in(1, 86400), default=120.0, metavar="S",
                   help="give up on a client run after S seconds (default: %(default)s)")
    g.add_argument("--quick", action="store_true",
                   help=f"smoke test: {QUICK_RUNS} lab runs per cell, short sweeps with few points")
    g.add_argument("--no-progress", action="store_true", help="no progress line on stderr")


def host_args(p):
    g = p.add_argument_group("other hosts")
    g.add_argument("--server-host", type=host_prefix, default=None, metavar="PREFIX",
                   help="run the servers on another host: PREFIX is the command that runs a "
                        "command there ('ssh user@host'; 'ip netns exec NAME'; 'env' for "
                        "this machine). Needs --server-addr; the binaries must be at the same "
                        "paths there (checked by sha256)")
    g.add_argument("--server-addr", type=ip_address, default=None, metavar="ADDR",
                   help="the server host's address the servers bind and clients connect to "
                        "(with --server-host)")
    g.add_argument("--client-host", type=host_prefix, action="append", default=None,
                   metavar="PREFIX", dest="client_hosts",
                   help="a load agent (repeatable): each runs the client with its share of "
                        "the threads and requests, all started together; their histograms "
                        "are merged (needs --server-host)")


def lab_args(p):
    g = p.add_argument_group("lab experiment")
    g.add_argument("--servers", type=list_of(server_name), default=list(SERVERS),
                   help="comma list of servers: main1..main4 and/or lockserver strategies "
                        "(lockserver --list-strategies), NAME:K for K stripes "
                        "(default: main1,main2,main3,main4)")
    g.add_argument("--n", type=list_of(int_in(1, MAX_N)), default=list(R.LAB_N),
                   help="comma list of array sizes (default: 10,100,1000)")
    g.add_argument("--runs", type=int_in(1, 1_000_000), default=None,
                   help=f"client runs per (server, n) (default: 100; {QUICK_RUNS} with --quick)")
    g.add_argument("--delay-us", type=delay_us, default=10.0,
                   help="artificial delay per array access in us (default: 10, the kit's)")
    g.add_argument("--pause", type=float_in(0, 3600), default=0.0, metavar="S",
                   help="pause between client runs (the kit's test.sh uses 0.5; default: 0)")
    g.add_argument("--trace-limit", type=int_in(0, 1_000_000_000), default=10000, metavar="ROWS",
                   help="per-request trace rows kept per (server, n); 0 = no trace "
                        "(default: %(default)s)")


def sweep_args(p, kinds_default):
    g = p.add_argument_group("sweeps (closed loop, one server start per point)")
    g.add_argument("--kind", type=list_of(kind_name), default=None, dest="kinds",
                   help="comma list of sweeps: threads, read-ratio, n, delay, connection "
                        f"(default: {','.join(kinds_default) if kinds_default else 'required'})")
    g.add_argument("--values", type=list_of(str), default=None,
                   help="override the swept values (only with a single --kind)")
    g.add_argument("--sweep-servers", type=list_of(server_name), default=list(SERVERS),
                   dest="sweep_servers", help="servers to sweep, as --servers (default: "
                   "main1..main4)")
    g.add_argument("--base-n", type=int_in(1, MAX_N), default=1000, help="n at the base point")
    g.add_argument("--base-delay-us", type=delay_us, default=10.0, help="delay at the base point")
    g.add_argument("--read-ratio", type=float_in(0, 1), default=0.7,
                   help="read ratio at the base point")
    g.add_argument("--threads", type=int_in(1, MAX_THREADS), default=64,
                   help="client threads at the base point")
    g.add_argument("--connection", type=connection_mode, default="per-request",
                   help="connection mode at the base point")
    g.add_argument("--duration", type=float_in(0.01, 86400), default=None, metavar="S",
                   help="measured seconds per run (default: 1; 0.3 with --quick)")
    g.add_argument("--warmup", type=float_in(0, 86400), default=None, metavar="S",
                   help="warm-up seconds per run (default: 0.25; 0.1 with --quick)")
    g.add_argument("--reps", type=int_in(1, 1000), default=None,
                   help="repetitions per point (default: 3; 1 with --quick)")


# ---- commands -------------------------------------------------------------------------------

def lab_from_args(a) -> R.LabParams:
    return R.LabParams(servers=a.servers, n=a.n,
                       runs=a.runs if a.runs is not None else (QUICK_RUNS if a.quick else 100),
                       delay_us=a.delay_us, pause_s=a.pause, trace_limit=a.trace_limit)


def sweeps_from_args(a, ap) -> R.SweepParams:
    q = QUICK_SWEEP if a.quick else {"duration_s": 1.0, "warmup_s": 0.25, "reps": 3}
    values = {k: list(v) for k, v in (R.QUICK_SWEEP_VALUES if a.quick else R.SWEEP_VALUES).items()}
    a.kinds_given = a.kinds is not None
    if a.kinds is None:
        a.kinds = list(SWEEP_KINDS)
    if a.values is not None:
        if len(a.kinds) != 1:
            ap.error("--values needs exactly one --kind")
        kind = a.kinds[0]
        conv = {"threads": int_in(1, MAX_THREADS), "n": int_in(1, MAX_N), "delay": delay_us,
                "read-ratio": float_in(0, 1), "connection": connection_mode}[kind]
        try:
            values[kind] = [conv(v) for v in a.values]
        except argparse.ArgumentTypeError as exc:
            ap.error(f"argument --values: {exc}")
    return R.SweepParams(kinds=a.kinds, servers=a.sweep_servers, n=a.base_n,
                         delay_us=a.base_delay_us, read_ratio=a.read_ratio, threads=a.threads,
                         connection=a.connection,
                         duration_s=a.duration if a.duration is not None else q["duration_s"],
                         warmup_s=a.warmup if a.warmup is not None else q["warmup_s"],
                         reps=a.reps if a.reps is not None else q["reps"], values=values)


def check_run(a, lab: R.LabParams | None, sweeps: R.SweepParams | None) -> dict:
    """Before anything is created: the binaries the run needs exist, and what a kit-style
    server cannot do is not asked of it. Returns {label: 'lockbench' | 'kit'}. UsageError
    (exit 2) otherwise; drops the delay and connection sweeps from the default kinds when a
    swept server is kit-style (with a note)."""
    servers = list(dict.fromkeys([*(lab.servers if lab else []),
                                  *(sweeps.servers if sweeps else [])]))
    if a.server_cmd is not None:
        odd = [s for s in servers if s not in SERVERS]
        if odd:
            raise UsageError(f"argument --servers: {odd[0]!r} with --server-cmd; allowed: "
                             "main1..main4 (the {bin} of each is --bin-dir/mainN)")
    try:  # a --bin-dir (or --client) that cannot work: a bad command line
        check_binary(a.client or default_client(a.bin_dir))
    except RunError as exc:
        raise UsageError(f"argument {'--client' if a.client else '--bin-dir'}: {exc}") from None
    try:
        if a.server_cmd is None or "{bin}" in a.server_cmd:
            for name in dict.fromkeys(R.server_command(s)[0] for s in servers):
                check_binary(find_binary(a.bin_dir, name))
    except RunError as exc:
        raise UsageError(f"argument --bin-dir: {exc}") from None
    probe = R.Ctx(results=Path("."), bin_dir=a.bin_dir, server_cmd=a.server_cmd)
    kinds = {s: probe.server_kind(s) for s in servers}
    check_hosts(a, servers)
    kit = [s for s in (sweeps.servers if sweeps else []) if kinds[s] == "kit"]
    if kit:
        cannot = [k for k in sweeps.kinds if k in ("delay", "connection")]
        why = ("a kit-style server takes no --delay-us and serves one request per connection; "
               f"kit-style here: {', '.join(kit)}")
        if cannot and getattr(a, "kinds_given", True):
            raise UsageError(f"argument --kind: {','.join(cannot)} cannot be swept ({why})")
        if cannot:
            sweeps.kinds = [k for k in sweeps.kinds if k not in cannot]
            print(f"note: no {' and no '.join(cannot)} sweep ({why})", file=sys.stderr)
        if sweeps.connection != "per-request":
            raise UsageError(f"argument --connection: {sweeps.connection} ({why})")
    return kinds


def check_hosts(a, servers) -> None:
    """--server-host/--client-host/--server-addr go together; every host answers and holds
    the same binaries at the same paths (sha256). UsageError (exit 2) otherwise. Sets
    a.hosts_facts ([{role, prefix, kernel, cores, cpu_model}]) and a.agent_lead_s."""
    from analysis.runner.remote import Host, HostError, check_binaries, host_facts
    a.hosts_facts, a.agent_lead_s = [], 0.5
    if a.server_addr and not a.server_host:
        raise UsageError("argument --server-addr: needs --server-host")
    if a.client_hosts and not a.server_host:
        raise UsageError("argument --client-host: needs --server-host (and --server-addr)")
    if not a.server_host:
        return
    if not a.server_addr:
        raise UsageError("argument --server-host: needs --server-addr, the address the "
                         "server host has for the clients")
    bins = []
    if a.server_cmd is None or "{bin}" in a.server_cmd:
        bins = [find_binary(a.bin_dir, n)
                for n in dict.fromkeys(R.server_command(s)[0] for s in servers)]
    client = a.client or default_client(a.bin_dir)
    hosts = [Host.parse(a.server_host, "server")] + [
        Host.parse(c, f"client agent {i + 1}") for i, c in enumerate(a.client_hosts or [])]
    rtts = []
    try:
        for h in hosts:
            rtts.append(check_binaries(h, bins if h.role == "server" else [client]))
            a.hosts_facts.append(host_facts(h))
    except HostError as exc:
        raise UsageError(f"argument --{'server' if h.role == 'server' else 'client'}-host: "
                         f"{exc}") from None
    # Agents are told to start this long after being launched: several round trips.
    a.agent_lead_s = min(10.0, 0.3 + 3 * max(rtts))


def run_experiments(a, lab: R.LabParams | None, sweeps: R.SweepParams | None) -> Path:
    """Checks the binaries, creates (or, resuming, locks) the results folder, runs what is
    not done yet. Returns the results folder; a.results_path is set as soon as it exists."""
    resume = a.resume is not None
    setup = {}
    if not resume:  # fail before creating anything if a binary is missing
        kinds = check_run(a, lab, sweeps)
        setup = {"server_cmd": a.server_cmd,
                 "client": str(a.client or default_client(a.bin_dir)), "kinds": kinds}
        if a.server_host:
            setup.update({"server_host": a.server_host, "server_addr": a.server_addr,
                          "client_hosts": a.client_hosts or [], "hosts": a.hosts_facts,
                          "agent_lead_s": a.agent_lead_s})
    base = R.REPO / "results" / ("scratch" if a.quick else "")
    meta, ctx = R.open_results(a.resume or a.results_dir, a.bin_dir, lab, sweeps,
                               [PROG, *sys.argv[1:]], resume, base=base, quick=a.quick,
                               setup=setup)
    a.results_path = results = ctx.results
    if resume:  # the stored parameters define the experiment
        lab = R.lab_params(meta) if lab is not None else None
        sweeps = R.sweep_params(meta) if sweeps is not None else None
    stored = meta.get("server_setup") or {}
    ctx.server_cmd = a.server_cmd or stored.get("server_cmd")
    ctx.client_path = a.client or (Path(stored["client"]) if stored.get("client") else None)
    ctx.port, ctx.client_timeout = a.port, a.client_timeout
    from analysis.runner.remote import Host
    server_host = a.server_host or stored.get("server_host")
    if server_host:
        ctx.server_host = Host.parse(server_host, "server")
        ctx.server_addr = a.server_addr or stored.get("server_addr")
        ctx.client_hosts = [Host.parse(c, f"client agent {i + 1}") for i, c in
                            enumerate(a.client_hosts or stored.get("client_hosts") or [])]
        ctx.agent_lead_s = stored.get("agent_lead_s", getattr(a, "agent_lead_s", 0.5))
    print(f"results: {results}", file=sys.stderr)
    lab_todo = R.lab_todo(ctx, lab) if lab else {}
    sweep_todo = R.sweep_todo(ctx, sweeps) if sweeps else []
    est_l, n_l = R.lab_estimate(lab_todo, lab) if lab else (0, 0)
    est_s, n_s = R.sweep_estimate(sweep_todo, sweeps) if sweeps else (0, 0)
    if n_l + n_s == 0:
        print("nothing to run: every run is already in the results", file=sys.stderr)
    else:
        print(f"{n_l} lab runs and {n_s} sweep runs to do, about {hms(est_l + est_s)}",
              file=sys.stderr)
    ctx.progress = Progress(est_l + est_s, n_l + n_s, enabled=not a.no_progress)
    if lab_todo:
        R.run_lab(ctx, lab, lab_todo)
    if sweep_todo:
        R.run_sweeps(ctx, sweeps, sweep_todo)
    return results
