"""Where the yardstick is: the independent do-nothing servers (nullsrv_tpc, nullsrv_epoll)
and load generator (loadgen) the benchmark programs measure lockbench against. They are not
part of this repository (they are the reference, written apart from it): build them into
build/yardstick, or anywhere and name the folder with --yardstick DIR."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "build" / "yardstick"
PROGRAMS = ("loadgen", "nullsrv_tpc", "nullsrv_epoll")


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
