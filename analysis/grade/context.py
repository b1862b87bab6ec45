"""The grading's context and the evidence constructor, what every runner is handed and
returns: Ctx (the configuration, the launcher, the ports, the time budget, the
measurements' results as they come) and check() (one check's record of evidence).

Imports only the records and the lab versions below it; measure/, checks/ and the worker
build on it."""

import math
import statistics
import sys
import threading
import time
from pathlib import Path

from analysis import kernel_sockets as ks
from analysis import ports
from analysis.grade import labs
from analysis.grade import records as C

# What each check after the workload costs is its record's cost_in_runs (records.py): under
# a time budget the kit workload leaves room for them, and a check that still does not fit
# is skipped rather than letting the whole grading run out of time.
MIN_RUNS = 3           # runs per setting a time budget never cuts below
PLAN_SHARE = 0.85      # of a time budget the checks plan for; the rest copies, cleans up and
                       # writes the pages
HAND_IN_SHARE = 0.93   # of a time budget: the worker hands in what it has, whatever runs
# Every check of a grading is in records.ORDER: one not finished when the budget runs out
# is handed in as undetermined (not scored).


def initial_value(i: int) -> str:
    return f"String {i}: the initial value"


class Ctx:
    def __init__(self, cfg: dict, launcher):
        self.cfg = cfg
        self.launcher = launcher
        self.limits = dict(cfg.get("limits", {}))
        self._ports = ports.sequence(cfg.get("port_group", 0) % ports.GROUPS, ports.GROUPS)
        self.port_lock = threading.Lock()
        self.log_lines: list = []
        self.t0 = time.monotonic()
        self.budget_s = cfg.get("budget_s")  # the submission's time budget (s), or None
        self.run_s: list = []                # seconds of each kit run so far
        self.ev: dict = {"checks": []}       # the evidence so far (handed in on time)
        self.wl: dict = {}                   # the kit workload's results, once run
        self.paused = None                   # the idle pause while it runs (pause.py)
        self.running: list = []              # the records of measurements left running
        self.pause: dict = {}                # the idle pause's results (pause.py), once run
        self.bin_dir: Path | None = None     # the folder the build check built in
        self.present: list = []              # the lab's servers built there
        self.probe: dict | None = None       # the clock probe's results, once run
        self.traced: dict = {}               # server -> the design its lock trace showed
        self.skips_delay: dict = {}          # server -> its hold times, when far under the
                                             # kit's usleep(10) (the design check's bursts)
        self.usleep_s: float | None = None   # the shortest usleep(10) here, once measured
        self.out_lock = threading.Lock()
        self.handed_in = False
        # the lab version: --lab's, else told apart after the first make (labs.detect)
        self.lab = labs.by_name(cfg["lab"]) if cfg.get("lab") else None
        self.lab_why = f"--lab {cfg['lab']}" if cfg.get("lab") else ""
        self.kit_told = False                # the kit told apart from common.h (build.py)

    def next_port(self) -> int:
        """The next port of ports() whose twin is also free: in container mode the
        loopback is shared with whatever else the container runs, so a port already
        taken is never handed to a submission (its failing to bind would be ours)."""
        with self.port_lock:
            taken = ks.listening_ports()
            for p in self._ports:
                if p not in taken and ports.twin(p) not in taken:
                    return p
            raise OSError("no free port pair left")

    def left(self) -> float:
        """Seconds left of the time budget (infinite without one)."""
        if not self.budget_s:
            return math.inf
        return self.t0 + PLAN_SHARE * self.budget_s - time.monotonic()

    def later_cost(self) -> float:
        """What every record that costs kit runs is expected to take here."""
        return sum(self.cost(r.id) for r in C.RECORDS if r.cost_in_runs)

    def cost(self, cid: str) -> float:
        """What the check `cid` is expected to take here, from this machine's kit runs."""
        per_run = statistics.median(self.run_s) if self.run_s else 0.3
        return (C.BY_ID[cid].cost_in_runs if cid in C.BY_ID else 0) * per_run

    def log(self, msg: str) -> None:
        self.log_lines.append(f"{time.strftime('%H:%M:%S')} {msg}")
        print(msg, file=sys.stderr, flush=True)


SKIPPED = "the grading command left it out (--skip)"


def over_budget(ctx: Ctx, cid: str) -> str:
    """'' when what `cid` is expected to cost fits in what is left of the time budget,
    else why not."""
    need, left = ctx.cost(cid), ctx.left()
    if left >= need:
        return ""
    ctx.log(f"{cid}: skipped, {left:.0f} s of the time budget left, about {need:.0f} s needed")
    return (f"the grader's time budget ({ctx.budget_s:g} s) had {max(left, 0):.0f} s left "
            f"and this check takes about {need:.0f} s here")


def check(cid, title, status, evidence, **data) -> dict:
    return {"id": cid, "title": title, "status": status,
            "evidence": evidence if isinstance(evidence, list) else [evidence], **data}
