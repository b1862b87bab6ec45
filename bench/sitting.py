"""What the benchmark programs that measure lockbench against the yardstick share: the
command line of a sitting (interleaved rounds, the binaries, the yardstick, the results
folder, the round order's seed, --only), its name and purpose taken from the program's
docstring, and its start: the yardstick and the binaries it runs refused (exit 2) before
anything starts, the results folder named.

The yardstick (loadgen, nullsrv_tpc, nullsrv_epoll: an independent load generator and
do-nothing servers, the limit lockbench is measured against) is not part of this
repository: build it into build/yardstick, or anywhere and name the folder with
--yardstick DIR."""

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from analysis.launch import procs
from analysis.launch import server_spec as SS
from analysis.numbers import int_in, list_of, one_of

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "build" / "yardstick"
PROGRAMS = ("loadgen", "nullsrv_tpc", "nullsrv_epoll")


class Error(Exception):
    """A one-line reason a sitting cannot go on (exit 1)."""


def parser(doc: str, needs: tuple):
    """A sitting's command line from its program's docstring, whose first line is its
    path and what it measures ('bench/perf.py: how close ...'), and the binaries it runs
    (`needs`, in --bin-dir). Its own options go after these: --rounds, --bin-dir,
    --yardstick, --out (default results/<the program's name>/<UTC>) and --seed."""
    prog, _, what = doc.strip().splitlines()[0].partition(": ")
    name = Path(prog).stem
    p = argparse.ArgumentParser(
        prog=prog, description=f"{what[:1].upper()}{what[1:]} Interleaved rounds in one "
                               f"sitting; results in results/{name}/<UTC>/.")
    p.set_defaults(sitting=name, needs=needs)
    p.add_argument("--rounds", type=int_in(1, 50), default=3,
                   help="interleaved rounds (default 3)")
    p.add_argument("--bin-dir", default=str(ROOT / "build" / "release"),
                   help=f"where {', '.join(needs)} are (default build/release)")
    p.add_argument("--yardstick", default=None,
                   help="folder with the built yardstick: loadgen, nullsrv_tpc, nullsrv_epoll "
                        "(default: build/yardstick of this checkout)")
    p.add_argument("--out", default=None,
                   help=f"results folder (default results/{name}/<UTC>)")
    p.add_argument("--seed", type=int_in(0, 2**63 - 1), default=None,
                   help="seed of the round order")
    return p


def add_only(p, names, what: str, said: str = "") -> None:
    """--only NAME,...: a sitting kept to some of its `what`s (each one of `names`; `said`
    describes them in --help, else the names are listed). args.only is the list, [] for all."""
    p.add_argument("--only", type=list_of(one_of(names, what)), default=[],
                   metavar=f"{what.upper().replace(' ', '_')},...",
                   help=f"only these {what}s, comma-separated: {said or ', '.join(names)}")


def yardstick_dir(given: str | None) -> Path:
    """The yardstick's folder (given, else build/yardstick), or ValueError with one line
    that says what is missing."""
    ys = Path(given).resolve() if given else DEFAULT
    missing = [p for p in PROGRAMS if not os.access(ys / p, os.X_OK)]
    if missing:
        raise ValueError(f"yardstick program(s) missing in {ys}: {', '.join(missing)} "
                         "(build loadgen, nullsrv_tpc and nullsrv_epoll there, or pass "
                         "--yardstick DIR)")
    return ys


def begin(args) -> bool:
    """Before anything starts: args.yardstick its folder, args.bin_dir the binaries'
    (resolved), args.started the time and args.out the results folder. False, with one
    line said, when the yardstick or a binary is missing (a bad value: exit 2)."""
    try:
        args.yardstick = str(yardstick_dir(args.yardstick))
    except ValueError as exc:
        print(f"{args.sitting}: --yardstick: {exc}", file=sys.stderr)
        return False
    args.bin_dir = Path(args.bin_dir).resolve()
    missing = [b for b in args.needs if not os.access(args.bin_dir / b, os.X_OK)]
    if missing:
        print(f"{args.sitting}: --bin-dir: {', '.join(missing)} missing in {args.bin_dir} "
              "(build them: cmake --preset release && cmake --build --preset release)",
              file=sys.stderr)
        return False
    args.started = datetime.now(UTC)
    args.out = Path(args.out) if args.out else (
        ROOT / "results" / args.sitting / args.started.strftime("%Y%m%dT%H%M%SZ"))
    return True


def start_server(spec, n: int, port: int, work: Path, log_file: Path, opts):
    """A server of the sitting (an SS.ServerSpec) on 127.0.0.1:port with an array of n,
    started in `work` (where timing files go), its output in log_file: ready, or Error."""
    srv = SS.launch(spec, n, port, SS.Place(work, kit_work=work, ready_timeout=10),
                    log_file=log_file, opts=opts)
    try:
        return srv.start()
    except procs.StartError as exc:
        raise Error(str(exc)) from None
    except OSError as exc:
        raise Error(f"{spec.label}: cannot start {exc.filename}: {exc.strerror}") from None


def loadgen_result(text: str) -> dict:
    """The yardstick loadgen's 'RESULT label=.. rps=.. done=.. lat n=.. mean_us=.. p50_us=..
    p99_us=..' line: rps, done, errors (connect and I/O), p50_us, p99_us, mean_us."""
    for line in text.splitlines():
        if line.startswith("RESULT "):
            kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
            return {"rps": float(kv.get("rps", "nan")), "done": int(kv.get("done", 0)),
                    "errors": int(kv.get("err_connect", 0)) + int(kv.get("err_io", 0)),
                    "p50_us": float(kv.get("p50_us", "nan")),
                    "p99_us": float(kv.get("p99_us", "nan")),
                    "mean_us": float(kv.get("mean_us", "nan"))}
    raise Error("loadgen printed no RESULT line")
