#!/usr/bin/env python3
"""bench/perf.py: how close lockbench gets to the physical limit.

A benchmark program, not a test. In one sitting it runs R interleaved rounds; every round
runs every configuration once, in a shuffled order, so a ratio between two configurations
of the same round compares runs that saw the same machine:

  - main1..main4 (each --io model when the binaries have --io; optionally lockserver
    strategies) driven by the yardstick's loadgen, against the yardstick's null servers
    nullsrv_tpc and nullsrv_epoll driven by the same loadgen;
  - one connection per request and keep-alive, delay 0 and the lab's delay (10 us);
  - Redis (Debian's redis-server, started here with --save '' --appendonly no) with
    redis-benchmark in the same modes (-k 0 / -k 1, -c 100, -d 100, GET and SET);
  - our client against nullsrv_epoll next to loadgen (both modes);
  - main4 keep-alive with --no-timing next to timing on (what timing costs);
  - the lab metric of main4 at n = 1000 under the kit workload, and with one client
    thread (one uncontended delayed access), in both --delay-mode settings, with thread
    per connection, with --io epoll and with --io uring (where it is built in).

Raw results go to results/perf/<UTC time>/ (runs.csv, runs.jsonl, meta.json, and every
server's and client's output in logs.tar.xz), and the report's Performance section alone
(performance.md, tables/, figures/, written by analysis/report/__init__.py) next to them. Every
server is stopped at the end of its run, and on any exit (Ctrl-C included).

  /work/main/.venv/bin/python bench/perf.py [--rounds 3] [--duration 3] [--quick]
      [--bin-dir build/release] [--yardstick DIR] [--strategies NAME,...] [--no-redis]
"""

import json
import os
import platform
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import sitting
from perf_cells import CONNS, build_cells, estimate, has_io_option, has_option

from analysis.launch import procs
from analysis.launch import server_spec as SS
from analysis.machine import cpu_model
from analysis.numbers import float_in, int_in
from analysis.progress import Progress

ROOT = Path(__file__).resolve().parent.parent

N = 1000            # array size of every run


class PerfError(sitting.Error):
    """A one-line reason the benchmark cannot go on."""


def summary_fields(summary: dict) -> dict:
    """The numbers of a lockbench server's summary line (procs.Server.stop() parses it),
    keyed summary_K."""
    return {f"summary_{k}": v for k, v in summary.items() if isinstance(v, float)}


def run_measured(argv: list, timeout: float) -> tuple:
    """(CompletedProcess, the child's CPU seconds, user + system): subprocess.run and the
    children's rusage totals before and after it (the server of the run is reaped only
    after its client, so the difference is the client's alone)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return res, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def parse_ours(text: str) -> dict:
    doc = json.loads(text)
    if isinstance(doc, list):
        doc = doc[0]
    r = doc["results"]
    lat = r.get("latency_us") or {}
    return {"rps": float(r["throughput_rps"]), "done": int(r["ok"]),
            "errors": int(r["errors"]["total"]), "p50_us": lat.get("p50"),
            "p99_us": lat.get("p99"), "mean_us": lat.get("mean")}


def parse_redis_csv(text: str) -> dict:
    """redis-benchmark --csv: '"SET","123.45","0.5",...' rows -> {GET: row, SET: row}."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) >= 2 and cells[0] in ("GET", "SET"):
            row = {"rps": float(cells[1])}
            if len(cells) >= 8:  # test,rps,avg,min,p50,p95,p99,max (ms)
                row.update(mean_us=float(cells[2]) * 1e3, p50_us=float(cells[4]) * 1e3,
                           p99_us=float(cells[6]) * 1e3)
            out[cells[0]] = row
    return out


def machine_meta() -> dict:
    try:
        sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        sha = ""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "git_sha": sha,
            "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg())}


class Bench:
    def __init__(self, args, out_dir: Path):
        self.args = args
        self.out = out_dir
        self.logs = out_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.bin = Path(args.bin_dir).resolve()
        self.ys = Path(args.yardstick).resolve()
        self.rng = random.Random(args.seed)
        self.work = Path(tempfile.mkdtemp(prefix="lockbench_perf_"))
        self.redis = shutil.which("redis-server") if not args.no_redis else None
        self.redis_bench = shutil.which("redis-benchmark") if self.redis else None
        self.redis_n = {}  # mode -> requests, adapted to the measured rate

    # -- servers ---------------------------------------------------------------------
    def spec(self, cell: dict) -> SS.ServerSpec:
        """The cell's server: ours with the cell's options (Options.extra), a null server
        of the yardstick, or Redis; the last two started as anyone's server (ready when
        the kernel shows them listening, SIGTERM is a normal stop)."""
        kind = cell["server_kind"]
        if kind == "lockbench":
            return SS.ServerSpec(cell["id"], "lockbench", self.bin / cell["binary"],
                                 tuple(cell.get("pre", [])))
        if kind == "null":
            template = "{bin} -p {port} -N {n}" + (" -k" if cell["mode"] == "keepalive" else "")
            if cell["delay_us"]:
                template += f" -d {cell['delay_us']}"
            return SS.ServerSpec(cell["id"], "kit", self.ys / cell["server"], template=template)
        return SS.ServerSpec(cell["id"], "kit", Path(self.redis), template=(
            "{bin} --port {port} --bind {ip} --save '' --appendonly no --daemonize no "
            "--protected-mode no --maxclients 10000 --logfile ''"))

    def our_options(self, cell: dict) -> SS.Options:
        extra = ["--no-twin"]
        if cell.get("delay_mode") and cell.get("mode_flag", True):
            extra += ["--delay-mode", cell["delay_mode"]]
        if cell.get("io_arg"):
            extra += ["--io", cell["io_arg"]]
        if cell["timing"] == "off":
            extra.append("--no-timing")
        if (cell["mode"] == "per-request" and cell["kind"] != "lab"
                and has_option(self.bin / cell["binary"], "--close-after-reply")):
            # As the null servers (and the kit's own servers) do: the server closes
            # first, so the TIME_WAIT stays on its side and the client's connect()
            # never hunts for a free port (docs/performance.md).
            extra.append("--close-after-reply")
        return SS.Options(float(cell["delay_us"]), extra=tuple(extra))

    def start_server(self, cell: dict, port: int, tag: str):
        spec = self.spec(cell)
        opts = self.our_options(cell) if spec.kind == "lockbench" else SS.Options()
        return sitting.start_server(spec, N, port, self.work, self.logs / f"{tag}.server.log",
                                    opts)

    # -- one run ---------------------------------------------------------------------
    def run_cell(self, cell: dict, rnd: int) -> list:
        port = procs.pick_port(self.rng)
        tag = f"r{rnd}_{cell['id']}"
        srv = self.start_server(cell, port, tag)
        rows = []
        try:
            if cell["kind"] == "lab":
                rows = self.run_lab(cell, port, tag)
            elif cell["client"] == "redis-benchmark":
                rows = self.run_redis_benchmark(cell, port, tag)
            else:
                rows = [self.run_client(cell, port, tag)]
        finally:
            summary = summary_fields(srv.stop())
            code, cpu_s = srv.exit_code, srv.cpu_s
        for r in rows:
            r.update(summary)
            r["server_exit"] = code
            # Server CPU per request: robust to the machine's load where req/s is not
            # (a run's throughput depends on the CPU share it got; its CPU cost does not).
            total = sum(x.get("done") or 0 for x in rows)
            r["server_cpu_s"] = cpu_s
            r["server_cpu_us_per_req"] = (cpu_s / total * 1e6
                                          if cpu_s is not None and total else None)
        return rows

    def client_timeout(self) -> float:
        return self.args.duration * 3 + 30

    def run_client(self, cell: dict, port: int, tag: str) -> dict:
        d = self.args.duration
        if cell["client"] == "loadgen":
            conns = cell.get("conns", CONNS)
            argv = [str(self.ys / "loadgen"), "-p", str(port), "-t", str(conns),
                    "-n", str(max(conns * 10, int(400_000 * d))), "-T", str(d), "-N", str(N),
                    "-l", cell["id"]]
            if cell["mode"] == "keepalive":
                argv.append("-k")
            parse = sitting.loadgen_result
        else:
            argv = [str(self.bin / "client"), str(N), "127.0.0.1", str(port), "--real-port",
                    "--threads", str(CONNS), "--connection", cell["mode"], "--duration",
                    str(d), "--quiet", "--format", "json"]
            parse = parse_ours
        res, cpu_s = run_measured(argv, self.client_timeout())
        (self.logs / f"{tag}.client.out").write_text(
            "# " + " ".join(argv) + "\n" + res.stdout + res.stderr)
        if res.returncode not in (0, 1):
            raise PerfError(f"{cell['id']}: client exited {res.returncode}: "
                            f"{res.stderr.strip()[-200:]}")
        row = parse(res.stdout)
        row["client_cpu_us_per_req"] = cpu_s / row["done"] * 1e6 if row["done"] else None
        return row

    def run_redis_benchmark(self, cell: dict, port: int, tag: str) -> list:
        mode = cell["mode"]
        n = self.redis_n.get(mode, 40_000 if mode == "per-request" else 200_000)
        n = max(2000, int(n * self.args.duration / 3))
        argv = [self.redis_bench, "-h", "127.0.0.1", "-p", str(port), "-c", str(CONNS),
                "-n", str(n), "-d", "100", "-k", "1" if mode == "keepalive" else "0",
                "-t", "get,set", "--csv", "-r", str(N)]
        res = subprocess.run(argv, capture_output=True, text=True,
                             timeout=self.client_timeout() * 2)
        (self.logs / f"{tag}.client.out").write_text(
            "# " + " ".join(argv) + "\n" + res.stdout + res.stderr)
        got = parse_redis_csv(res.stdout)
        if res.returncode != 0 or set(got) != {"GET", "SET"}:
            raise PerfError(f"redis-benchmark failed ({res.returncode}): "
                            f"{(res.stderr or res.stdout).strip()[-200:]}")
        # Next round: about `duration` seconds per test at the rate just measured.
        self.redis_n[mode] = int(min(got["GET"]["rps"], got["SET"]["rps"]) * 3)
        return [{"server": f"redis-{op.lower()}", "done": n, "errors": 0, **v}
                for op, v in got.items()]

    def run_lab(self, cell: dict, port: int, tag: str) -> list:
        """The kit workload (repeated) or one client thread, on a fresh main4."""
        base = [str(self.bin / "client"), str(N), "127.0.0.1", str(port), "--real-port",
                "--quiet", "--format", "json"]
        if cell["workload"] == "kit":
            runs = [base] * self.args.kit_runs
        else:
            runs = [base + ["--threads", "1", "--requests", str(1000 * self.args.kit_runs)]]
        text = ""
        for argv in runs:
            res = subprocess.run(argv, capture_output=True, text=True,
                                 timeout=self.client_timeout())
            text += "# " + " ".join(argv) + "\n" + res.stdout + res.stderr
            if res.returncode != 0:
                (self.logs / f"{tag}.client.out").write_text(text)
                raise PerfError(f"{cell['id']}: client exited {res.returncode}")
        (self.logs / f"{tag}.client.out").write_text(text)
        return [{"done": 1000 * self.args.kit_runs, "errors": 0}]


ROW_KEYS = ("round", "cell", "kind", "server", "server_kind", "io", "client", "conns", "mode",
            "delay_us", "timing", "delay_mode", "workload", "rps", "done", "errors", "p50_us",
            "p99_us", "mean_us", "server_exit", "server_cpu_s", "server_cpu_us_per_req",
            "client_cpu_us_per_req")


def write_rows(path_csv: Path, rows: list) -> None:
    import csv
    keys = list(ROW_KEYS)
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def parse_args(argv):
    p = sitting.parser(__doc__, ("main1", "main2", "main3", "main4", "client"))
    p.add_argument("--duration", type=float_in(0.5, 120), default=3.0,
                   help="seconds per throughput run (default 3)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run under 2 minutes: 1 round, 1 s runs, delay 0 only, "
                        "main1 and main4")
    p.add_argument("--kit-runs", type=int_in(1, 100), default=5,
                   help="kit runs (1000 requests each) per lab-metric measurement")
    p.add_argument("--strategies", default="",
                   help="also lockserver strategies, comma-separated (e.g. seqlock-per-slot)")
    p.add_argument("--no-redis", action="store_true", help="skip Redis")
    sitting.add_only(p, ("throughput", "timing", "lab", "clients"), "kind",
                     "throughput, timing (the on/off blocks), lab (the lab-metric split), "
                     "clients (our client and loadgen against nullsrv_epoll)")
    a = p.parse_args(argv)
    if a.quick:
        a.rounds, a.duration, a.kit_runs = 1, 1.0, 2
    return a


def run_meta(args, bench: Bench, bin_dir: Path, started: datetime, have_redis: bool) -> dict:
    """meta.json as written at the start: the machine, the parameters, which binaries."""
    return {**machine_meta(), "started_utc": started.strftime("%Y-%m-%d %H:%M UTC"),
            "rounds": args.rounds, "duration_s": args.duration, "quick": args.quick,
            "kit_runs": args.kit_runs, "connections": CONNS, "n": N,
            "bin_dir": str(bin_dir), "io_models": has_io_option(bin_dir / "main4"),
            "bin_git": subprocess.run(["git", "-C", str(bin_dir), "log", "-1",
                                       "--format=%h %s"], capture_output=True,
                                      text=True).stdout.strip()[:120],
            "redis": subprocess.run([bench.redis, "--version"], capture_output=True,
                                    text=True).stdout.strip() if have_redis else None,
            "argv": sys.argv[1:]}


def write_meta(out: Path, meta: dict) -> None:
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def round_order(cells: list, rng: random.Random) -> list:
    """One round's configurations in a shuffled order, each A B B A timing block kept
    together at a random place."""
    order = [c for c in cells if c["kind"] != "timing"]
    rng.shuffle(order)
    for conns in (CONNS, 2):
        at = rng.randint(0, len(order))
        order[at:at] = [c for c in cells if c["kind"] == "timing" and c["conns"] == conns]
    return order


def run_one(bench: Bench, cell: dict, rnd: int, progress: Progress) -> list:
    """The rows of one configuration in round `rnd`: what identifies it, and what it
    measured or the error that stopped it (the other configurations still run)."""
    base = {k: cell[k] for k in ("kind", "server", "server_kind", "io", "client", "mode",
                                 "delay_us", "timing", "delay_mode", "workload")}
    base["conns"] = cell.get("conns", CONNS)
    base.update(round=rnd, cell=cell["id"])
    try:
        got = bench.run_cell(cell, rnd)
    except (sitting.Error, subprocess.TimeoutExpired) as exc:
        progress.note(f"perf: round {rnd} {cell['id']}: {exc}")
        got = [{"error": str(exc)[:300]}]
    return [{**base, **g} for g in got]


def run_rounds(bench: Bench, cells: list, args, out: Path) -> list:
    """Every round, every row also appended to runs.jsonl as soon as it is measured (what
    is left after an interrupted sitting)."""
    total = sum(estimate(c, args.duration) for c in cells) * args.rounds
    progress = Progress(total, len(cells) * args.rounds)
    progress.note(f"perf: {len(cells)} configurations x {args.rounds} rounds, about "
                  f"{total / 60:.0f} min; raw results in {out}")
    rows = []
    with open(out / "runs.jsonl", "w") as jsonl:
        for rnd in range(args.rounds):
            for cell in round_order(cells, bench.rng):
                for row in run_one(bench, cell, rnd, progress):
                    rows.append(row)
                    jsonl.write(json.dumps(row) + "\n")
                jsonl.flush()
                progress.advance(estimate(cell, args.duration),
                                 f"round {rnd + 1}/{args.rounds} {cell['id']}")
    return rows


def finish(bench: Bench, out: Path, rows: list, meta: dict) -> None:
    """runs.csv, meta.json with the end, the per-run logs (server and client output) packed
    into logs.tar.xz, and the report's Performance section beside them."""
    write_rows(out / "runs.csv", rows)
    meta["finished_utc"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    meta["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    write_meta(out, meta)
    import tarfile
    with tarfile.open(out / "logs.tar.xz", "w:xz") as tar:
        tar.add(bench.logs, arcname="logs")
    shutil.rmtree(bench.logs)
    from analysis.report import write_perf_section
    for path in write_perf_section(out, out):
        print(path)




def main(argv=None) -> int:
    args = parse_args(argv)
    if not sitting.begin(args):
        return 2

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    bench = None
    try:
        out, bin_dir = args.out, args.bin_dir
        bench = Bench(args, out)
        have_redis = bool(bench.redis and bench.redis_bench)
        cells = build_cells(args, bin_dir, have_redis)
        meta = run_meta(args, bench, bin_dir, args.started, have_redis)
        write_meta(out, meta)
        rows = run_rounds(bench, cells, args, out)
        finish(bench, out, rows, meta)
        return 0
    except KeyboardInterrupt:
        print("perf: interrupted; servers stopped", file=sys.stderr)
        return 130
    except sitting.Error as exc:
        print(f"perf: {exc}", file=sys.stderr)
        return 1
    finally:
        procs.stop_all()
        if bench is not None:  # the servers' working folder (timing files)
            shutil.rmtree(bench.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
