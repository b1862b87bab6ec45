"""python -m analysis {lab,sweep,report,all,grade}: run the experiments, build the report.

Exit status: 0 done; 1 an experiment or the analysis failed (one line on stderr names the
cause; partial results are kept); 2 bad command line; 130 interrupted (results kept).
"""

import argparse
import signal
import sys
from pathlib import Path

from . import SERVERS, is_server_label
from .load import SWEEP_KINDS, LoadError
from .procs import RunError
from .progress import Progress, hms
from . import runner as R

PROG = "python -m analysis"
QUICK_RUNS = 5
QUICK_SWEEP = {"duration_s": 0.3, "warmup_s": 0.1, "reps": 1}


# ---- argument types (argparse turns ValueError/ArgumentTypeError into exit 2) --------------

def _list(conv):
    def parse(text):
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError("empty list")
        return [conv(t) for t in items]
    return parse


def server_name(t):
    """main1..main4 or a lockserver strategy NAME[:K] (checked against the binary later:
    check_servers)."""
    if not is_server_label(t):
        raise argparse.ArgumentTypeError(
            f"unknown server {t!r} (main1..main4 or a strategy of lockserver "
            "--list-strategies, optionally NAME:K for K stripes)")
    return t


class UsageError(Exception):
    """A bad command line found after parsing (exit 2, one line)."""


def check_servers(labels, bin_dir: Path) -> None:
    """Every label that is not main1..main4 must be a strategy of lockserver in bin_dir
    (UsageError naming the valid choices); ":K" only on the striped-* strategies.
    RunError (exit 1) if lockserver is needed but missing."""
    extra = [s for s in dict.fromkeys(labels) if s not in SERVERS]
    if not extra:
        return
    names = R.lockserver_strategies(bin_dir)
    for label in extra:
        name, _, k = label.partition(":")
        if name not in names:
            raise UsageError(f"unknown server {label!r} (known: "
                             f"{', '.join([*SERVERS, *names])}; NAME:K sets --stripes)")
        if k and not name.startswith("striped-"):
            raise UsageError(f"{label!r}: ':K' (stripes) applies only to "
                             f"{', '.join(n for n in names if n.startswith('striped-'))}")


def kind_name(t):
    if t not in SWEEP_KINDS:
        raise argparse.ArgumentTypeError(f"unknown sweep kind {t!r} (known: {', '.join(SWEEP_KINDS)})")
    return t


def int_at_least(lo):
    def parse(t):
        try:
            v = int(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {t!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo}, got {v}")
        return v
    return parse


def float_in(lo, hi=None):
    def parse(t):
        try:
            v = float(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {t!r}") from None
        if v < lo or (hi is not None and v > hi):
            rng = f"[{lo:g}, {hi:g}]" if hi is not None else f">= {lo:g}"
            raise argparse.ArgumentTypeError(f"must be {rng}, got {t}")
        return v
    return parse


def connection_mode(t):
    if t not in ("per-request", "keepalive"):
        raise argparse.ArgumentTypeError(f"unknown connection mode {t!r} (per-request, keepalive)")
    return t


# ---- the parser -----------------------------------------------------------------------------

def _common(p):
    g = p.add_argument_group("where")
    # Resolved at once: servers run with their results folder as working directory.
    g.add_argument("--bin-dir", type=lambda s: Path(s).resolve(),
                   default=R.REPO / "build" / "release",
                   help="directory with main1..main4 and client (default: %(default)s)")
    x = g.add_mutually_exclusive_group()
    x.add_argument("--results-dir", type=Path,
                   help="new directory for the raw results (default: results/<UTC time>/, "
                        "or results/scratch/<UTC time>/ with --quick)")
    x.add_argument("--resume", type=Path, metavar="DIR",
                   help="continue the interrupted run in DIR with the parameters stored there; "
                        "completed runs are skipped")
    g.add_argument("--port", type=int_at_least(1),
                   help="use this port (and its byte-swapped twin) for every server start "
                        "instead of a fresh free pair each time")
    g.add_argument("--client-timeout", type=float_in(1), default=120.0, metavar="S",
                   help="give up on a client run after S seconds (default: %(default)s)")
    g.add_argument("--quick", action="store_true",
                   help=f"smoke test: {QUICK_RUNS} lab runs per cell, short sweeps with few points")
    g.add_argument("--no-progress", action="store_true", help="no progress line on stderr")


def _lab_args(p):
    g = p.add_argument_group("lab experiment")
    g.add_argument("--servers", type=_list(server_name), default=list(SERVERS),
                   help="comma list of servers: main1..main4 and/or lockserver strategies "
                        "(lockserver --list-strategies), NAME:K for K stripes "
                        "(default: main1,main2,main3,main4)")
    g.add_argument("--n", type=_list(int_at_least(1)), default=list(R.LAB_N),
                   help="comma list of array sizes (default: 10,100,1000)")
    g.add_argument("--runs", type=int_at_least(1), default=None,
                   help=f"client runs per (server, n) (default: 100; {QUICK_RUNS} with --quick)")
    g.add_argument("--delay-us", type=float_in(0), default=10.0,
                   help="artificial delay per array access in us (default: 10, the kit's)")
    g.add_argument("--pause", type=float_in(0), default=0.0, metavar="S",
                   help="pause between client runs (the kit's test.sh uses 0.5; default: 0)")
    g.add_argument("--trace-limit", type=int_at_least(0), default=10000, metavar="ROWS",
                   help="per-request trace rows kept per (server, n); 0 = no trace "
                        "(default: %(default)s)")


def _sweep_args(p, kinds_default):
    g = p.add_argument_group("sweeps (closed loop, one server start per point)")
    g.add_argument("--kind", type=_list(kind_name), default=kinds_default, dest="kinds",
                   help="comma list of sweeps: threads, read-ratio, n, delay, connection "
                        f"(default: {','.join(kinds_default) if kinds_default else 'required'})")
    g.add_argument("--values", type=_list(str), default=None,
                   help="override the swept values (only with a single --kind)")
    g.add_argument("--sweep-servers", type=_list(server_name), default=list(SERVERS),
                   dest="sweep_servers", help="servers to sweep, as --servers (default: "
                   "main1..main4)")
    g.add_argument("--base-n", type=int_at_least(1), default=1000, help="n at the base point")
    g.add_argument("--base-delay-us", type=float_in(0), default=10.0, help="delay at the base point")
    g.add_argument("--read-ratio", type=float_in(0, 1), default=0.7, help="read ratio at the base point")
    g.add_argument("--threads", type=int_at_least(1), default=64, help="client threads at the base point")
    g.add_argument("--connection", type=connection_mode, default="per-request",
                   help="connection mode at the base point")
    g.add_argument("--duration", type=float_in(0.01), default=None, metavar="S",
                   help="measured seconds per run (default: 1; 0.3 with --quick)")
    g.add_argument("--warmup", type=float_in(0), default=None, metavar="S",
                   help="warm-up seconds per run (default: 0.25; 0.1 with --quick)")
    g.add_argument("--reps", type=int_at_least(1), default=None,
                   help="repetitions per point (default: 3; 1 with --quick)")


MICROBENCH_DEFAULT = R.REPO / "results" / "microbench" / "microbench.json"


def _microbench_arg(p):
    p.add_argument("--microbench", default=None, metavar="PATH",
                   help="Google Benchmark JSON of bench/run-microbench.sh to add as a report "
                        "section (default: results/microbench/microbench.json if it exists; "
                        "'none' = no section)")


def microbench_path(a) -> Path | None:
    """The microbenchmark JSON to include: --microbench PATH (must exist), none, or the
    default file if it exists."""
    if a.microbench is None:
        return MICROBENCH_DEFAULT if MICROBENCH_DEFAULT.is_file() else None
    if a.microbench.lower() == "none":
        return None
    p = Path(a.microbench)
    if not p.is_file():
        raise RunError(f"microbenchmark file not found: {p}")
    return p


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG, description="lockbench experiment runner and lab report (ECE 420 Lab 2).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               f"  {PROG} all                      lab + sweeps, report in report/ (~11 min)\n"
               f"  {PROG} all --quick              smoke test (~45 s), under results/scratch/\n"
               f"  {PROG} lab --servers main1,main4 --n 10,1000 --runs 20\n"
               f"  {PROG} sweep --kind threads --values 1,2,4,8,16,32,64,128\n"
               f"  {PROG} report --results results/<time> --out report/\n"
               f"  {PROG} all --resume results/<time>   continue after Ctrl-C\n"
               f"  {PROG} grade SUBMISSION...      grade Lab 2 submissions, sandboxed "
               "(docs/grading.md)\n"
               "docs: docs/analysis.md")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{lab,sweep,report,all}")
    p = sub.add_parser("lab", help="the lab experiment: every server x n, R kit client runs",
                       description="For each server and n: start the server, run the kit client "
                       "R times, record each run's time-file mean and the client's JSON, stop it.")
    _lab_args(p)
    _common(p)
    p = sub.add_parser("sweep", help="sweep client threads, read ratio, n, delay or connection",
                       description="Closed-loop sweeps; each point varies one parameter of the "
                       "base point (n=1000, delay 10 us, 70%% reads, 64 threads, per-request).")
    _sweep_args(p, list(SWEEP_KINDS))
    _common(p)
    p = sub.add_parser("report", help="rebuild tables, figures and REPORT.md from raw results",
                       description="Reads a results directory (read-only) and writes REPORT.md, "
                       "tables/ and figures/ into --out. Same input, byte-identical output.")
    p.add_argument("--results", type=Path, required=True, metavar="DIR",
                   help="results directory (e.g. results/20250101T000000Z)")
    p.add_argument("--out", type=Path, default=R.REPO / "report",
                   help="output directory (default: %(default)s)")
    _microbench_arg(p)
    p = sub.add_parser("all", help="lab + sweeps + report (the README's main command)",
                       description="The lab experiment, then the sweeps, then the report.")
    _lab_args(p)
    _sweep_args(p, list(SWEEP_KINDS))
    p.add_argument("--no-sweeps", action="store_true", help="lab experiment and report only")
    p.add_argument("--out", type=Path, default=None,
                   help="report directory (default: report/; <results>/report with --quick)")
    _microbench_arg(p)
    _common(p)
    return ap


# ---- commands -------------------------------------------------------------------------------

def lab_from_args(a) -> R.LabParams:
    return R.LabParams(servers=a.servers, n=a.n,
                       runs=a.runs if a.runs is not None else (QUICK_RUNS if a.quick else 100),
                       delay_us=a.delay_us, pause_s=a.pause, trace_limit=a.trace_limit)


def sweeps_from_args(a, ap) -> R.SweepParams:
    q = QUICK_SWEEP if a.quick else {"duration_s": 1.0, "warmup_s": 0.25, "reps": 3}
    values = {k: list(v) for k, v in (R.QUICK_SWEEP_VALUES if a.quick else R.SWEEP_VALUES).items()}
    if a.values is not None:
        if len(a.kinds) != 1:
            ap.error("--values needs exactly one --kind")
        kind = a.kinds[0]
        conv = {"threads": int_at_least(1), "n": int_at_least(1), "delay": float_in(0),
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


def results_dir(a) -> Path:
    return a.resume or a.results_dir or R.default_results_dir(
        R.REPO / "results" / ("scratch" if a.quick else ""))


def run_experiments(a, results: Path, lab: R.LabParams | None,
                    sweeps: R.SweepParams | None) -> None:
    resume = a.resume is not None
    if not resume:  # fail before creating anything if a binary is missing
        servers = [*(lab.servers if lab else []), *(sweeps.servers if sweeps else [])]
        for name in ["client", *dict.fromkeys(R.server_command(s)[0] for s in servers)]:
            R.check_binary(R.find_binary(a.bin_dir, name))
    meta, ctx = R.open_results(results, a.bin_dir, lab, sweeps, [PROG, *sys.argv[1:]], resume)
    if resume:  # the stored parameters define the experiment
        lab = R.lab_params(meta) if lab is not None else None
        sweeps = R.sweep_params(meta) if sweeps is not None else None
    ctx.port, ctx.client_timeout = a.port, a.client_timeout
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


def cmd_report(results: Path, out: Path, microbench: Path | None = None) -> None:
    from .report import build_report
    written = build_report(results, out, microbench=microbench)
    print(f"wrote {len(written)} files; report: {out / 'REPORT.md'}", file=sys.stderr)


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["grade"]:  # grading other people's servers: analysis/grade/cli.py
        from .grade.cli import main as grade_main
        return grade_main(argv[1:])
    ap = build_parser()
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    results = None if a.cmd == "report" else results_dir(a)
    try:
        if a.cmd != "report" and a.resume is None:
            check_servers([*(a.servers if a.cmd != "sweep" else []),
                           *(a.sweep_servers if a.cmd != "lab" else [])], a.bin_dir)
        if a.cmd in ("report", "all"):
            mb = microbench_path(a)  # before any experiment: a wrong path fails fast
        if a.cmd == "report":
            cmd_report(a.results, a.out, mb)
        elif a.cmd == "lab":
            run_experiments(a, results, lab_from_args(a), None)
        elif a.cmd == "sweep":
            run_experiments(a, results, None, sweeps_from_args(a, ap))
        elif a.cmd == "all":
            sweeps = None if a.no_sweeps else sweeps_from_args(a, ap)
            run_experiments(a, results, lab_from_args(a), sweeps)
            out = a.out or (results / "report" if a.quick else R.REPO / "report")
            cmd_report(results, out, mb)
        return 0
    except UsageError as exc:
        print(f"{PROG} {a.cmd}: error: {exc}", file=sys.stderr)
        return 2
    except (RunError, LoadError, OSError) as exc:
        print(f"{PROG} {a.cmd}: error: {exc}", file=sys.stderr)
        _hint_resume(a, results)
        return 1
    except KeyboardInterrupt:
        print(f"\n{PROG} {a.cmd}: interrupted", file=sys.stderr)
        _hint_resume(a, results)
        return 130


def _hint_resume(a, results):
    if a.cmd != "report" and results is not None and Path(results, "metadata.json").exists():
        print(f"partial results kept in {results}; continue with: {PROG} {a.cmd} "
              f"--resume {results}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
