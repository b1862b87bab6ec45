"""The lab experiment and the sweeps: run servers and client, write raw results
incrementally (one CSV row per client run), resume, and record metadata.

Layout of a results directory: see load.py.
"""

import dataclasses
import functools
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from analysis import SERVERS, server_command
from analysis import traces as TR
from analysis.kernel_sockets import describe_exit
from analysis.launch import server_spec as SS
from analysis.launch.procs import (
    HOST,
    RunError,
    Server,
    StartError,
    check_binary,
    client_row,
    pick_port,
    port_free,
    run_client,
)
from analysis.load import (
    LAB_COLUMNS,
    SERVER_COLUMNS,
    SUMMARY_KEYS,
    SWEEP_COLUMNS,
    SWEEP_KINDS,
    LoadError,
)
from analysis.machine import machine_info
from analysis.ports import twin
from analysis.progress import Progress
from analysis.runner import agents as AG
from analysis.runner import remote as RM
from analysis.runner.binaries import (
    build_info,
    default_client,
    find_binary,
    is_lockbench_server,
)
from analysis.runner.results import (
    AGENT_COLUMNS,
    CsvLog,
    claim_results_dir,
    fmt_value,
    git_info,
    lock_results_dir,
    read_metadata,
    read_rows,
    utc_now,
    write_json,
)

REPO = Path(__file__).resolve().parents[2]
LAB_N = (10, 100, 1000)

# Sweep values: full and --quick.
SWEEP_VALUES = {
    "threads": [1, 2, 4, 8, 16, 32, 64],
    "read-ratio": [0.0, 0.3, 0.5, 0.7, 0.9, 1.0],
    "n": [1, 10, 100, 1000, 10_000, 100_000, 1_000_000],
    "delay": [0, 1, 10, 100],
    "connection": ["per-request", "keepalive"],
}
QUICK_SWEEP_VALUES = {
    "threads": [1, 4, 16, 64],
    "read-ratio": [0.5, 0.9],
    "n": [10, 1000, 100_000],
    "delay": [0, 10],
    "connection": ["per-request", "keepalive"],
}
SWEEP_FIELD = {"threads": "threads", "read-ratio": "read_ratio", "n": "n",
               "delay": "delay_us", "connection": "connection"}


@dataclass
class RunParams:
    """What the lab experiment and the sweeps both have: the servers and the delay."""
    servers: list = field(default_factory=lambda: list(SERVERS))
    delay_us: float = 10.0


@dataclass
class LabParams(RunParams):
    n: list = field(default_factory=lambda: list(LAB_N))
    runs: int = 100
    pause_s: float = 0.0
    trace_limit: int = 10000


@dataclass
class SweepParams(RunParams):
    n: int = 1000
    threads: int = 64
    read_ratio: float = 0.7
    connection: str = "per-request"
    duration_s: float = 1.0
    warmup_s: float = 0.25
    reps: int = 3
    kinds: list = field(default_factory=lambda: list(SWEEP_KINDS))
    values: dict = field(default_factory=lambda: {k: list(v) for k, v in SWEEP_VALUES.items()})


@dataclass
class Ctx:
    """What every experiment needs: where binaries and results are, and the run identity."""
    results: Path
    bin_dir: Path
    git_sha: str = "unknown"
    port: int | None = None          # fixed port (None: a fresh free pair per server start)
    client_timeout: float = 120.0
    rng: random.Random = field(default_factory=random.Random)
    progress: Progress | None = None
    server_cmd: str | None = None    # --server-cmd template: every server kit-style
    client_path: Path | None = None  # --client (None: default_client(bin_dir))
    server_host: "RM.Host | None" = None   # --server-host: the server runs there
    server_addr: str | None = None   # --server-addr: its address (else 127.0.0.1)
    client_hosts: list = field(default_factory=list)   # --client-host: the load agents
    agent_lead_s: float = 0.5        # agents start this long after they are launched
    _agents_log: "CsvLog | None" = None

    def binary(self, name: str) -> Path:
        return check_binary(find_binary(self.bin_dir, name))

    def client(self) -> Path:
        return check_binary(self.client_path or default_client(self.bin_dir))

    def server_kind(self, label: str) -> str:
        """'kit' (any lab server: the kit's command line and nothing else) or 'lockbench'
        (our own, given its extra options)."""
        if self.server_cmd is not None:
            return "kit"
        return "lockbench" if is_lockbench_server(self.server(label)[0]) else "kit"

    def spec(self, label: str) -> SS.ServerSpec:
        """What starts the server `label`: our binary given our options, or (any other
        binary, or with --server-cmd) a kit-style command line."""
        kind = self.server_kind(label)
        template = self.server_cmd or SS.KIT_SERVER_CMD
        if kind == "lockbench":
            binary, pre = self.server(label)
            return SS.ServerSpec(label, kind, binary, tuple(pre))
        binary = self.server(label)[0] if "{bin}" in template else None
        return SS.ServerSpec(label, kind, binary, template=template)

    def make_server(self, label: str, n: int, port: int, *, delay_us: float, time_file: Path,
                    log_file: Path, trace: Path | None = None, trace_limit: int = 0):
        """The server `label` at n on port, where this run's servers run (not started): a
        kit-style one works in results/work/, and its timing lines end in time_file."""
        place = SS.Place(self.results, self.server_host, self.server_addr or HOST)
        opts = SS.Options(delay_us, time_file, trace, trace_limit)
        return SS.launch(self.spec(label), n, port, place, log_file=log_file, opts=opts,
                         time_dest=time_file)

    def pair_free(self, port: int) -> bool:
        """Whether port and its twin are free where the server runs."""
        if self.server_host is not None:
            up = RM.listening_ports(self.server_host)
            return port not in up and twin(port) not in up
        return port_free(port) and port_free(twin(port))

    def run_load(self, client: Path, n: int, port: int, common: list, *, threads: int | None,
                 requests: int | None, seed: int | None, key: dict) -> dict:
        """One client run against the server: here (common plus --threads and --seed when
        given), or split over the --client-host agents, started together, whose JSON and
        histograms are merged (agents.merge_agents); one row per agent and the merged row
        go to agents.csv. Returns the client JSON (merged for agents)."""
        addr = self.server_addr or HOST
        if not self.client_hosts:
            args = [*(["--threads", str(threads)] if threads is not None else []), *common,
                    *(["--seed", str(seed)] if seed is not None else [])]
            return run_client(client, n, port, args, self.client_timeout, ip=addr)[0]
        shares = AG.agent_shares(threads or 100, requests, None, len(self.client_hosts))
        for i, sh in enumerate(shares):   # agents draw different positions
            sh["extra"] = ["--seed", str((seed or 0) + 1000 * i)]
        results = AG.run_agents(self.client_hosts, client, n, addr, port, common, shares,
                                self.client_timeout, self.agent_lead_s)
        merged = AG.merge_agents(results)
        if self._agents_log is None:
            self._agents_log = CsvLog(self.results / "agents.csv", AGENT_COLUMNS)
        total = merged["results"]["throughput_rps"] or 0
        for i, (doc, _) in enumerate(results):
            row = client_row(doc)
            self._agents_log.write({**key, "agent": i + 1, "host": self.client_hosts[i].label,
                                    "threads": doc["config"].get("threads"),
                                    "requests": doc["config"].get("requests"), **row,
                                    "throughput_share": row["throughput_rps"] / total
                                    if total else None})
        self._agents_log.write({**key, "agent": "all", "host": "", **client_row(merged),
                                "threads": merged["config"]["threads"],
                                "requests": merged["config"]["requests"],
                                "throughput_share": 1.0 if total else None})
        return merged

    def server(self, label: str) -> tuple[Path, list]:
        """(binary, arguments before <n>) that start the server `label`."""
        name, pre = server_command(label)
        return self.binary(name), pre

    def new_port(self) -> int:
        if self.port is None:
            return (RM.pick_port(self.server_host, self.rng) if self.server_host
                    else pick_port(self.rng))
        if not self.pair_free(self.port):
            where = (f"host {self.server_host.label!r}" if self.server_host else "127.0.0.1")
            raise RunError(f"port {self.port} or its twin {twin(self.port)} is in use on "
                           f"{where}")
        return self.port

    def start_server(self, make) -> Server:
        """make(port) -> Server; starts it on a free port pair. With automatic ports a
        start-up failure because the port (or its twin) was taken between probe and bind is
        retried twice on other ports; any other start-up failure is raised at once."""
        for attempt in range(3):
            srv = make(self.new_port())
            try:
                return srv.start()
            except StartError:
                # Another port helps only if this one was taken meanwhile (it is still
                # taken now the server is gone); a server that refuses its arguments would
                # refuse them on any port.
                if self.port is not None or attempt == 2 or self.pair_free(srv.port):
                    raise
                self.note(f"note: {srv.name} failed to start on port {srv.port} (taken "
                          "meanwhile); trying another port")
        raise AssertionError("unreachable")

    def note(self, text: str) -> None:
        (self.progress.note if self.progress else lambda t: print(t, file=sys.stderr))(text)


# ---- metadata -------------------------------------------------------------------------------

def open_results(results: Path | None, bin_dir: Path, lab: LabParams | None,
                 sweeps: SweepParams | None, argv: list, resume: bool, *,
                 base: Path | None = None, quick: bool = False,
                 setup: dict | None = None) -> tuple[dict, Ctx]:
    """Creates (claim_results_dir; results=None: a fresh folder under base) or, resuming,
    locks and reopens a results directory and its metadata.json; returns the metadata and
    a Ctx. When resuming, the stored parameters win."""
    if resume:
        lock_results_dir(results)
        meta = read_metadata(results)
    else:
        results = claim_results_dir(results, base or REPO / "results")
        meta = {"tool": "lockbench-analysis", "schema": 1, "created_utc": utc_now(),
                "quick": quick, "parameters": {}, "sessions": []}
        if setup:
            meta["server_setup"] = setup   # --server-cmd, client, kind of each server
    meta_path = results / "metadata.json"
    params = meta.setdefault("parameters", {})
    if lab is not None and "lab" not in params:
        params["lab"] = dataclasses.asdict(lab)
    if sweeps is not None and "sweeps" not in params:
        params["sweeps"] = dataclasses.asdict(sweeps)
    git = git_info()
    meta["git"] = meta.get("git") or git
    meta["build"] = build_info(bin_dir)
    meta["machine"] = machine_info()
    meta.setdefault("sessions", []).append({"started_utc": utc_now(), "argv": argv, "git": git})
    write_json(meta_path, meta)
    sha = git["commit"][:12] + ("-dirty" if git["dirty"] else "")
    return meta, Ctx(results=results, bin_dir=bin_dir, git_sha=sha)


def lab_params(meta: dict) -> LabParams | None:
    p = meta.get("parameters", {}).get("lab")
    return LabParams(**p) if p else None


def sweep_params(meta: dict) -> SweepParams | None:
    p = meta.get("parameters", {}).get("sweeps")
    return SweepParams(**p) if p else None


def record_client_version(ctx: Ctx, doc: dict) -> None:
    meta_path = ctx.results / "metadata.json"
    meta = json.loads(meta_path.read_text())
    v = f"{doc.get('tool', 'client')} {doc.get('version', '?')}"
    if meta.get("client_version") != v:
        meta["client_version"] = v
        write_json(meta_path, meta)


# ---- the lab experiment ---------------------------------------------------------------------

LAB_RUN_ESTIMATE = 0.2    # seconds per kit run, for the ETA before real timings exist
START_ESTIMATE = 0.3      # seconds per server start/stop


def lab_todo(ctx: Ctx, p: LabParams) -> dict:
    """{(server, n): [reps not yet in lab.csv]} in the order they will run."""
    done = {(r["server"], int(r["n"]), int(r["rep"])) for r in read_rows(ctx.results / "lab.csv")}
    todo = {}
    for s in p.servers:
        for n in p.n:
            reps = [k for k in range(1, p.runs + 1) if (s, n, k) not in done]
            if reps:
                todo[(s, n)] = reps
    return todo


def lab_estimate(todo: dict, p: LabParams) -> tuple[float, int]:
    runs = sum(len(v) for v in todo.values())
    return runs * (LAB_RUN_ESTIMATE + p.pause_s) + len(todo) * START_ESTIMATE, runs


def time_file_name(server: str, n: int) -> str:
    """The kit's time_s<S>_n<n> for mainS; time_<label>_n<n> for a lockserver strategy."""
    return f"time_s{server[-1]}_n{n}" if server in SERVERS else f"time_{server}_n{n}"


def _wait_new_lines(srv, before: int, want: int, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while True:
        lines = srv.time_lines()
        if len(lines) - before >= want or time.monotonic() > deadline:
            return lines[before:]
        time.sleep(0.005)


def parse_time_lines(lines) -> tuple[list, int]:
    """Time-file lines -> (finite values, number of lines that are not finite numbers)."""
    vals, bad = [], 0
    for x in lines:
        if not x.strip():
            continue
        try:
            v = float(x)
        except ValueError:
            v = math.nan
        if math.isfinite(v):
            vals.append(v)
        else:
            bad += 1
    return vals, bad


def _server_row(experiment, value, srv: Server, delay_us, summary: dict, rep=0) -> dict:
    row = {"experiment": experiment, "value": value, "server": srv.name, "n": srv.n,
           "rep": rep, "delay_us": delay_us, "port": srv.port, "exit_code": srv.exit_code,
           "summary": srv.summary_line or ""}
    for k in SUMMARY_KEYS:
        v = summary.get(k)
        row[f"summary_{k}"] = v if isinstance(v, float) else None
    return row


@dataclass
class _RowLogs:
    """Where an experiment's rows go as they come: its CSV of runs, its CSV of server
    summaries and its JSON lines of client output (lab.csv, lab_servers.csv,
    lab_client.jsonl; sweep_KIND.csv, ...)."""
    rows: "CsvLog"
    servers: "CsvLog"
    raw: object

    def close(self) -> None:
        self.rows.close()
        self.servers.close()
        self.raw.close()


def run_lab(ctx: Ctx, p: LabParams, todo: dict | None = None) -> None:
    """For each (server, n): one server start, p.runs kit-mode client runs, the time-file
    line of each run, the server's summary at the end. Rows appended as they come."""
    todo = lab_todo(ctx, p) if todo is None else todo
    if not todo:
        return
    client = ctx.client()
    for sub in ("time", "traces", "logs"):
        (ctx.results / sub).mkdir(exist_ok=True)
    # closed in the finally below
    logs = _RowLogs(CsvLog(ctx.results / "lab.csv", LAB_COLUMNS),
                    CsvLog(ctx.results / "lab_servers.csv", SERVER_COLUMNS),
                    open(ctx.results / "lab_client.jsonl", "a"))  # noqa: SIM115
    try:
        for (s, n), reps in todo.items():
            _lab_setting(ctx, p, logs, client, s, n, reps)
    finally:
        logs.close()


def _lab_server(ctx: Ctx, p: LabParams, s: str, n: int):
    """The started server of one lab setting (a trace only when none was kept yet)."""
    trace = ctx.results / "traces" / f"{s}_n{n}.csv"
    want_trace = p.trace_limit > 0 and not (trace.exists() and trace.stat().st_size > 0)
    # start_server calls make(port) at once (and on its retries), never later:
    # partial binds this iteration's values explicitly.
    return ctx.start_server(functools.partial(
        ctx.make_server, s, n, delay_us=p.delay_us,
        time_file=ctx.results / "time" / time_file_name(s, n),
        log_file=ctx.results / "logs" / f"lab_{s}_n{n}.log",
        trace=trace if want_trace else None, trace_limit=p.trace_limit))


def _lab_setting(ctx: Ctx, p: LabParams, logs: _RowLogs, client, s: str, n: int,
                 reps: list) -> None:
    """One (server, n): its runs, then its stop and summary row."""
    srv = _lab_server(ctx, p, s, n)
    # A kit-style server gets no --delay-us: the delay is whatever it was built with.
    delay = p.delay_us if srv.kind == "lockbench" else None
    with srv:
        for rep in reps:
            _lab_run(ctx, p, logs, client, srv, (s, n, rep), rep == reps[0], delay)
        summary = stop_checked(srv)
    logs.servers.write(_server_row("lab", "", srv, delay, summary))
    _viewer_trace(ctx, s, n)


def _viewer_trace(ctx: Ctx, s: str, n: int) -> None:
    """traces/<server>_n<n>.json beside its CSV, in the Chrome Trace Event Format that
    Chromium's trace viewer and Perfetto open (traces.py), when the CSV keeps time."""
    csv = ctx.results / "traces" / f"{s}_n{n}.csv"
    out = csv.with_suffix(".json")
    if csv.is_file() and csv.stat().st_size and not out.exists():
        try:
            TR.write_chrome_trace(csv, out, s, f"{s} n={n}")
        except LoadError as e:   # the CSV is the server's, checked as it is read
            ctx.note(f"note: {csv.name}: no viewer trace written ({e})")


def measure(ctx: Ctx, client, srv, n: int, args: list, *, what: str, key: dict,
            threads: int | None = None, requests: int | None = None,
            seed: int | None = None) -> dict:
    """The one measurement step of the lab and the sweeps: a client run against the
    started server `srv` (told --real-port when the server uses htons), its JSON. A
    server that died is named as the cause, any other failure as `what: why`."""
    args = [*(["--real-port"] if srv.real_port else []), *args]
    try:
        doc = ctx.run_load(client, n, srv.port, args, threads=threads, requests=requests,
                           seed=seed, key=key)
    except RunError as exc:
        if not srv.alive():
            raise srv.died() from None
        raise RunError(f"{what}: {exc}") from None
    if not srv.alive():
        raise srv.died()
    return doc


def stop_checked(srv) -> dict:
    """Stops the server and returns its summary; RunError if it did not end as a normal
    stop ends it."""
    summary = srv.stop()
    if not srv.stopped_ok():
        raise RunError(f"{srv.name} (n={srv.n}) {describe_exit(srv.exit_code)} when stopped; "
                       f"see {srv.log_file}")
    return summary


def _lab_lines(ctx: Ctx, srv, where: str, before: int, res: dict, kept_as: str) -> list:
    """The run's new timing-file values (waiting up to 2 s for them), the rest warned of."""
    want = max(1, int(res["ok"] or 0) // 1000) if res["ok"] else 1
    new = _wait_new_lines(srv, before, want, timeout=2.0)
    if not srv.alive():
        raise srv.died()
    vals, bad = parse_time_lines(new)
    if bad:
        ctx.note(f"warning: {where}: {bad} line(s) of {kept_as} are not finite numbers; "
                 "left out")
    if not vals:
        ctx.note(f"warning: {where}: no new line in {srv.time_file.name} within 2 s "
                 f"(client ok={res['ok']} errors={res['errors']})")
    return vals


def _lab_run(ctx: Ctx, p: LabParams, logs: _RowLogs, client, srv, key: tuple, first: bool,
             delay) -> None:
    """One kit-mode client run of a setting and its row."""
    s, n, rep = key
    before = len(srv.time_lines())
    t0 = time.monotonic()
    doc = measure(ctx, client, srv, n, [], what=f"{s} n={n} run {rep}", requests=1000,
                  key={"experiment": "lab", "server": s, "n": n, "rep": rep})
    if first:
        record_client_version(ctx, doc)
    res = client_row(doc)
    vals = _lab_lines(ctx, srv, f"{s} n={n} run {rep}", before, res, time_file_name(s, n))
    cfg = doc.get("config", {})
    logs.rows.write({
        "server": s, "n": n, "rep": rep, "delay_us": delay,
        "read_ratio": cfg.get("read_ratio", 0.7), "threads": cfg.get("threads"),
        "requests": cfg.get("requests"), "connection": cfg.get("connection"),
        "port": srv.port, "git_sha": ctx.git_sha,
        "latency_s": sum(vals) / len(vals) if vals else None,
        "time_lines": len(vals), **res})
    logs.raw.write(json.dumps({"server": s, "n": n, "rep": rep, "client": doc},
                              sort_keys=True) + "\n")
    logs.raw.flush()
    if ctx.progress:
        ctx.progress.advance(LAB_RUN_ESTIMATE + p.pause_s + (START_ESTIMATE if first else 0),
                             f"lab {s} n={n} run {rep}/{p.runs} "
                             f"({(time.monotonic() - t0) * 1e3:.0f} ms)")
    if p.pause_s > 0:
        time.sleep(p.pause_s)


# ---- the sweeps -----------------------------------------------------------------------------

def sweep_point(p: SweepParams, kind: str, value) -> dict:
    """The full configuration of one sweep point: the base point with one field changed."""
    cfg = {"n": p.n, "delay_us": p.delay_us, "read_ratio": p.read_ratio, "threads": p.threads,
           "connection": p.connection}
    cfg[SWEEP_FIELD[kind]] = value
    return cfg


def sweep_todo(ctx: Ctx, p: SweepParams) -> list:
    """[(kind, rep, value, server)] not yet in sweep_<kind>.csv; repetitions outermost and
    servers innermost, so the servers of one point run interleaved (A B A B), and noise
    spreads over all points."""
    todo = []
    for kind in p.kinds:
        done = {(r["server"], r["value"], int(r["rep"]))
                for r in read_rows(ctx.results / f"sweep_{kind}.csv")}
        for rep in range(1, p.reps + 1):
            for v in p.values[kind]:
                for s in p.servers:
                    if (s, fmt_value(v), rep) not in done:
                        todo.append((kind, rep, v, s))
    return todo


def sweep_estimate(todo: list, p: SweepParams) -> tuple[float, int]:
    return len(todo) * (p.duration_s + p.warmup_s + START_ESTIMATE), len(todo)


def run_sweeps(ctx: Ctx, p: SweepParams, todo: list | None = None) -> None:
    """Each sweep point (kind, rep, value, server): a fresh server, one client run of
    p.duration_s after p.warmup_s, its rows appended as they come."""
    todo = sweep_todo(ctx, p) if todo is None else todo
    if not todo:
        return
    client = ctx.client()
    for sub in ("time", "logs"):
        (ctx.results / sub).mkdir(exist_ok=True)
    logs: dict = {}
    try:
        for kind, rep, v, s in todo:
            if kind not in logs:
                # kept open across points; closed in the finally below
                logs[kind] = _RowLogs(
                    CsvLog(ctx.results / f"sweep_{kind}.csv", SWEEP_COLUMNS),
                    CsvLog(ctx.results / f"sweep_{kind}_servers.csv", SERVER_COLUMNS),
                    open(ctx.results / f"sweep_{kind}_client.jsonl", "a"))  # noqa: SIM115
            _sweep_point(ctx, p, logs[kind], client, (kind, rep, v, s))
    finally:
        for kind_logs in logs.values():
            kind_logs.close()


def _sweep_run(ctx: Ctx, p: SweepParams, client, srv, cfg: dict, key: tuple) -> tuple:
    """(client JSON, the server's summary) of one sweep point's run on a started server."""
    kind, rep, value, s = key
    args = ["--duration", f"{p.duration_s:g}",
            "--warmup", f"{p.warmup_s:g}", "--connection", cfg["connection"],
            "--read-ratio", f"{cfg['read_ratio']:g}"]
    with srv:
        doc = measure(ctx, client, srv, cfg["n"], args, what=f"sweep {kind}={value} {s} rep {rep}",
                      threads=cfg["threads"], seed=rep,
                      key={"experiment": "sweep", "kind": kind, "value": value, "server": s,
                           "n": cfg["n"], "rep": rep})
        return doc, stop_checked(srv)


def _sweep_point(ctx: Ctx, p: SweepParams, logs: "_RowLogs", client, point: tuple) -> None:
    kind, rep, v, s = point
    cfg = sweep_point(p, kind, v)
    value = fmt_value(v)
    tag = f"sweep_{kind}_{value}_{s}_rep{rep}"
    srv = ctx.start_server(functools.partial(
        ctx.make_server, s, cfg["n"], delay_us=cfg["delay_us"],
        time_file=ctx.results / "time" / tag,
        log_file=ctx.results / "logs" / f"sweep_{kind}_{s}.log"))
    if srv.kind != "lockbench":
        cfg["delay_us"] = None   # not set by the runner: whatever it was built with
    doc, summary = _sweep_run(ctx, p, client, srv, cfg, (kind, rep, value, s))
    record_client_version(ctx, doc)
    logs.rows.write({"kind": kind, "value": value, "server": s, "rep": rep, **cfg,
                     "duration_s": p.duration_s, "warmup_s": p.warmup_s, "port": srv.port,
                     "git_sha": ctx.git_sha, **client_row(doc)})
    logs.servers.write(_server_row(kind, value, srv, cfg["delay_us"], summary, rep))
    logs.raw.write(json.dumps({"kind": kind, "value": value, "server": s, "rep": rep,
                               "client": doc}, sort_keys=True) + "\n")
    logs.raw.flush()
    if ctx.progress:
        ctx.progress.advance(p.duration_s + p.warmup_s + START_ESTIMATE,
                             f"sweep {kind}={value} {s} rep {rep}/{p.reps}")
