"""What the benchmark programs that measure lockbench against the yardstick share: the
options of a sitting (interleaved rounds, the binaries, the yardstick, the results folder,
the round order's seed) and where the yardstick is.

The yardstick (loadgen, nullsrv_tpc, nullsrv_epoll: an independent load generator and
do-nothing servers, the limit lockbench is measured against) is not part of this
repository: build it into build/yardstick, or anywhere and name the folder with
--yardstick DIR."""

import argparse
import os
import sys
from pathlib import Path

from analysis.numbers import int_in, list_of, one_of

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "build" / "yardstick"
PROGRAMS = ("loadgen", "nullsrv_tpc", "nullsrv_epoll")


def parser(prog: str, description: str, results: str, binaries: str):
    """A sitting's command line: its own options go after these, --rounds, --bin-dir,
    --yardstick, --out (default results/RESULTS/<UTC>) and --seed."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--rounds", type=int_in(1, 50), default=3,
                   help="interleaved rounds (default 3)")
    p.add_argument("--bin-dir", default=str(ROOT / "build" / "release"),
                   help=f"where {binaries} are (default build/release)")
    p.add_argument("--yardstick", default=None,
                   help="folder with the built yardstick: loadgen, nullsrv_tpc, nullsrv_epoll "
                        "(default: build/yardstick of this checkout)")
    p.add_argument("--out", default=None,
                   help=f"results folder (default results/{results}/<UTC>)")
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


def find_yardstick(args, prog: str) -> bool:
    """Sets args.yardstick to its folder; False, with one line said, when it is missing (a
    bad value: the program exits 2 before anything starts)."""
    try:
        args.yardstick = str(yardstick_dir(args.yardstick))
    except ValueError as exc:
        print(f"{prog}: --yardstick: {exc}", file=sys.stderr)
        return False
    return True
