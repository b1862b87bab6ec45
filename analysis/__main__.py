"""python -m analysis {lab,sweep,report,all,grade}: run the experiments, build the report.

Exit status: 0 done; 1 an experiment or the analysis failed after start (one line on stderr
names the cause, never a traceback; partial results are kept); 2 bad command line, refused
before anything starts (one line naming option, value and what is allowed); 130 interrupted
(results kept).
"""

import argparse
import json
import signal
import sys
from pathlib import Path

from analysis.launch.procs import RunError
from analysis.load import SWEEP_KINDS, LoadError, raw_path, read_raw_text
from analysis.runner import experiment as R
from analysis.runner.cli import (
    PROG,
    Parser,
    UsageError,
    check_servers,
    common_args,
    existing_dir,
    host_args,
    lab_args,
    lab_from_args,
    out_dir,
    path_arg,
    run_experiments,
    sweep_args,
    sweeps_from_args,
)
from analysis.runner.results import is_quick_results

MICROBENCH_DEFAULT = R.REPO / "results" / "microbench" / "microbench.json"


def microbench_file(t):
    """'none', or an existing file, plain or gzipped (PATH, else PATH.gz: load.raw_path),
    made absolute."""
    if t.lower() == "none":
        return "none"
    p = raw_path(path_arg(t))
    allowed = "allowed: the JSON of bench/run-microbench.sh (or it gzipped), or none"
    if not p.is_file():
        raise argparse.ArgumentTypeError(f"{t!r} is not a file; {allowed}")
    try:
        doc = json.loads(read_raw_text(p))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{t!r} is not readable JSON ({exc}); "
                                         f"{allowed}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise argparse.ArgumentTypeError(f"{t!r} has no 'benchmarks' list; {allowed}")
    return p


def _report_args(p):
    p.add_argument("--microbench", type=microbench_file, default=None, metavar="PATH",
                   help="Google Benchmark JSON of bench/run-microbench.sh to add as a report "
                        "section, plain or gzipped (PATH or PATH.gz; default: "
                        "results/microbench/microbench.json(.gz) if it exists; "
                        "'none' = no section)")
    p.add_argument("--svg", action="store_true",
                   help="also write every figure as SVG (figures/NAME.svg) and link it under "
                        "its caption (default: PNG only, as the committed report)")


def microbench_path(a) -> Path | None:
    """The microbenchmark JSON to include: --microbench PATH (checked to exist when parsed),
    none, or the default file (plain or gzipped) if it exists."""
    if a.microbench is None:
        default = raw_path(MICROBENCH_DEFAULT)
        return default if default.is_file() else None
    return None if a.microbench == "none" else a.microbench


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(
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
    sub = ap.add_subparsers(dest="cmd", required=True,
                            metavar="{lab,sweep,report,all,grade}")
    p = sub.add_parser("lab", help="the lab experiment: every server x n, R kit client runs",
                       description="For each server and n: start the server, run the kit client "
                       "R times, record each run's time-file mean and the client's JSON, stop it.")
    lab_args(p)
    common_args(p)
    host_args(p)
    p = sub.add_parser("sweep", help="sweep client threads, read ratio, n, delay or connection",
                       description="Closed-loop sweeps; each point varies one parameter of the "
                       "base point (n=1000, delay 10 us, 70%% reads, 64 threads, per-request).")
    sweep_args(p, list(SWEEP_KINDS))
    common_args(p)
    host_args(p)
    p = sub.add_parser("report", help="rebuild tables, figures and REPORT.md from raw results",
                       description="Reads a results directory (read-only) and writes REPORT.md, "
                       "tables/ and figures/ into --out. Same input, byte-identical output.")
    p.add_argument("--results", type=existing_dir, required=True, metavar="DIR",
                   help="results directory (e.g. results/20250101T000000Z)")
    p.add_argument("--out", type=out_dir, default=R.REPO / "report",
                   help="output directory (default: %(default)s)")
    _report_args(p)
    p = sub.add_parser("all", help="lab + sweeps + report (the README's main command)",
                       description="The lab experiment, then the sweeps, then the report.")
    lab_args(p)
    sweep_args(p, list(SWEEP_KINDS))
    p.add_argument("--no-sweeps", action="store_true", help="lab experiment and report only")
    p.add_argument("--out", type=out_dir, default=None,
                   help="report directory (default: report/; <results>/report with --quick)")
    _report_args(p)
    common_args(p)
    host_args(p)
    # The grader has its own command line (analysis/grade/cli.py, also run alone as
    # python -m analysis.grade): this parser takes no option of its own (no prefix
    # character), so every word after `grade`, -h and -- included, reaches it as given.
    p = sub.add_parser("grade", help="grade Lab 2 submissions, sandboxed (options: grade --help)",
                       add_help=False, prefix_chars="\0")
    p.add_argument("args", nargs=argparse.REMAINDER)
    return ap


COMMITTED_REPORT = R.REPO / "report"


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def report_out(a, results: Path | None) -> Path:
    """Where `all` writes its report: --out if given; else the results folder's report/
    when the run is resumed or a --quick one (resume never writes outside the folder it
    resumes; smoke data never replaces the committed report); else report/."""
    if a.out is not None:
        return a.out
    if a.quick or a.resume is not None:
        return (a.resume or results) / "report"
    return COMMITTED_REPORT


def check_report_out(out: Path, quick: bool) -> None:
    """UsageError if a --quick run's report would land in the committed report/."""
    if quick and _inside(out, COMMITTED_REPORT):
        raise UsageError(f"argument --out: {out} is inside {COMMITTED_REPORT}, the committed "
                         "report; allowed for --quick results: any other directory")


def cmd_report(results: Path, out: Path, microbench: Path | None = None,
               svg: bool = False) -> None:
    from analysis.report import build_report, latest_perf
    written = build_report(results, out, microbench=microbench, perf=latest_perf(), svg=svg)
    print(f"wrote {len(written)} files; report: {out / 'REPORT.md'}", file=sys.stderr)


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    if a.cmd == "grade":
        from analysis.grade.cli import main as grade_main
        return grade_main(a.args)
    a.results_path = a.resume if a.cmd != "report" else None
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if a.cmd != "report" and a.resume is None:
            if a.cmd != "sweep":
                check_servers(a.servers, a.bin_dir, "--servers")
            if a.cmd != "lab":
                check_servers(a.sweep_servers, a.bin_dir, "--sweep-servers")
        if a.cmd in ("report", "all"):
            mb = microbench_path(a)
        if a.cmd == "report":
            check_report_out(a.out, is_quick_results(a.results))
            cmd_report(a.results, a.out, mb, a.svg)
        elif a.cmd == "lab":
            run_experiments(a, lab_from_args(a), None)
        elif a.cmd == "sweep":
            run_experiments(a, None, sweeps_from_args(a, ap))
        elif a.cmd == "all":
            sweeps = None if a.no_sweeps else sweeps_from_args(a, ap)
            if a.out is not None:  # before any experiment: a wrong place fails fast
                check_report_out(a.out, a.quick or (a.resume is not None
                                                    and is_quick_results(a.resume)))
            results = run_experiments(a, lab_from_args(a), sweeps)
            cmd_report(results, report_out(a, results), mb, a.svg)
        return 0
    except UsageError as exc:
        print(f"{PROG} {a.cmd}: error: {exc}", file=sys.stderr)
        return 2
    except (RunError, LoadError, OSError) as exc:
        print(f"{PROG} {a.cmd}: error: {_one_line(exc)}", file=sys.stderr)
        _hint_resume(a)
        return 1
    except KeyboardInterrupt:
        print(f"\n{PROG} {a.cmd}: interrupted", file=sys.stderr)
        _hint_resume(a)
        return 130
    except Exception as exc:  # a bug (or bad microbenchmark JSON): one line, no traceback
        what = ("" if type(exc).__name__ == "MicrobenchError"
                else f"internal error (please report): {type(exc).__name__}: ")
        print(f"{PROG} {a.cmd}: error: {what}{_one_line(exc)}", file=sys.stderr)
        _hint_resume(a)
        return 1


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _hint_resume(a):
    results = getattr(a, "results_path", None)
    if a.cmd != "report" and results is not None and Path(results, "metadata.json").exists():
        print(f"partial results kept in {results}; continue with: {PROG} {a.cmd} "
              f"--resume {results}", file=sys.stderr)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C while parsing or after main returned: no traceback
        print(f"\n{PROG}: interrupted", file=sys.stderr)
        sys.exit(130)
