"""The grading worker: runs inside the outer sandbox (its own loopback), builds the
submission and runs every check against it in inner sandboxes, and hands its evidence
back. This module orchestrates (the lab's checks by id, in order, under the time budget);
each check runs in the module of its kind (build, kit_checks, timing, bursts, robustness,
races), on the grading's context and servers (sandboxed).

    python -m analysis.grade.worker      (its configuration in $LOCKBENCH_GRADE)

Every check yields {"id", "title", "status": pass|fail|skip, "evidence": text lines,
...data}; points are added later from the weights (render.py). A crash or hang ends only the
step it happened in; grading carries on with the next one.
"""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from . import checks as C
from . import evidence as E
from . import labs
from . import launcher as LA
from . import pause as P
from . import sandbox as S
from .build import build, built
from .bursts import check_concurrency, check_design, check_speed
from .kit_checks import check_consistency, check_idle, check_initial, check_workload, workload
from .memory import memory_check
from .races import race_check
from .robustness import check_robustness
from .sandboxed import HAND_IN_SHARE, Ctx, check
from .timing import check_timing, clock_probe, lost_in_noise, tables


def one_server_fixes(checks: list, lab) -> None:
    """A one-server lab's own fix for a check that did not pass and has none of its own."""
    if len(lab.servers) != 1:
        return
    for c in checks:
        own = C.BY_ID[c["id"]].fix_one if c["id"] in C.BY_ID else ""
        if c["status"] != "pass" and not c.get("fix") and own:
            c["fix"] = [own]


# Checks that judge each server: a server that is missing fails them, for its share.


def charge_missing(checks: list, missing: list, lab) -> None:
    """A missing server fails every check that needed it: each per-server check keeps only
    the present servers' share of its points and names the missing ones; a check that is
    absent because nothing could run is added as a failure, so every page has the same
    maximum score."""
    if not missing:
        return
    have = {c["id"] for c in checks}
    for cid in C.PER_SERVER:
        if cid not in have:
            checks.append(check(cid, C.title(cid, lab), "fail", [], fraction=0.0))
    for c in checks:
        if c["id"] in C.PER_SERVER:
            base = c.get("fraction", 1.0 if c["status"] == "pass" else 0.0)
            c["fraction"] = base * (len(lab.servers) - len(missing)) / len(lab.servers)
            c["status"] = "fail"
            c["evidence"] = [f"{m}: missing, so it fails this check" for m in missing] + \
                c["evidence"]
    needs = [("robustness", (lab.first,))]
    if lab.speed:
        needs.append(("speed", ("main1", "main2", "main4")))
    for cid, need in needs:
        gone = [m for m in need if m in missing]
        if gone:
            checks[:] = [c for c in checks if c["id"] != cid]
            checks.append(check(cid, C.title(cid, lab), "fail", f"needs {', '.join(gone)}, "
                                "which is missing", fraction=0.0))


def _over_budget(ctx: Ctx, cid: str) -> str:
    """'' when what `cid` is expected to cost fits in what is left of the time budget,
    else why not."""
    need, left = ctx.cost(cid), ctx.left()
    if left >= need:
        return ""
    ctx.log(f"{cid}: skipped, {left:.0f} s of the time budget left, about {need:.0f} s needed")
    return (f"the grader's time budget ({ctx.budget_s:g} s) had {max(left, 0):.0f} s left "
            f"and this check takes about {need:.0f} s here")


SKIPPED = "the grading command left it out (--skip)"


def within_budget(ctx: Ctx, cid: str, run) -> dict:
    """run() when the check's expected cost fits in what is left of the time budget, else
    the check undetermined (not scored): the grader's budget never costs a point. A check
    the command left out (--skip) is undetermined too."""
    if cid in ctx.cfg.get("skip", ()):
        ctx.log(f"{cid}: left out (--skip)")
        return check(cid, C.title(cid, ctx.lab), "undetermined",
                     f"not checked: {SKIPPED}; not scored", not_run=True)
    why = _over_budget(ctx, cid)
    if why:
        return check(cid, C.title(cid, ctx.lab), "undetermined",
                     f"not checked: {why}; not scored", not_run=True)
    ctx.log(cid)
    return run()


def probe_within_budget(ctx: Ctx, bin_dir, present) -> dict:
    """The clock probe when it fits in what is left of the time budget; else why not (the
    timing lines are then judged without it)."""
    if "probe" in ctx.cfg.get("skip", ()):
        return {"why": SKIPPED, "judged": ctx.lab.first}
    why = _over_budget(ctx, "timing")
    if why:
        return {"why": why, "judged": ctx.lab.first}
    ctx.log("clock probe")
    first = clock_probe(ctx, bin_dir, present)
    # Lock waiting hidden in some batch by a busy machine leaves the clock unjudged; a
    # second round, when it fits, is judged on its own (every batch must stand out again).
    if not lost_in_noise(first) or ctx.left() < ctx.cost("timing"):
        return first
    ctx.log("clock probe: a second round, no lock waiting stood out in every batch")
    again = clock_probe(ctx, bin_dir, present, round_=2)
    again["strays"] += first["strays"]
    return again


def grade(ctx: Ctx) -> dict:
    cfg = ctx.cfg
    checks: list = []
    ev: dict = {"checks": checks,
                "config": {k: cfg.get(k) for k in ("runs", "sizes", "quick", "budget_s",
                                                   "cpus", "skip")}}
    ctx.ev = ev
    t0 = time.monotonic()
    ctx.log("build")
    status, lines, bin_dir, frac = build(ctx, "build", [], ctx.limits)
    lab = ctx.lab
    ev["lab"] = {"name": lab.name, "servers": list(lab.servers), "what": lab.what,
                 "why": ctx.lab_why}
    present = built(bin_dir, lab.servers)
    checks.append(check("build", C.title("build", lab), status, lines, fraction=frac,
                        judged=len(present)))
    missing = [m for m in lab.servers if m not in present]
    checks.append(check("binaries", C.title("binaries", lab), "fail" if missing else "pass",
                        f"missing: {', '.join(missing)}" if missing else
                        f"{lab.names()} present", judged=len(present)))
    wl: dict = {}
    if present:
        wl = _kit_checks(ctx, bin_dir, present, checks)
    charge_missing(checks, missing, lab)
    if cfg.get("race"):
        ctx.log("race detector")
        checks.append(race_check(ctx, present))
    if cfg.get("memory"):
        ctx.log("memory check")
        checks.append(memory_check(ctx, present))
    checks[:] = E.apply_all(checks, wl)
    one_server_fixes(checks, lab)
    ev["tables"] = tables(wl, lab)
    ev["seconds"] = time.monotonic() - t0
    return ev


# The runner of each check that follows the kit workload, by its id (checks.py): each
# takes the grading, the folder of the servers built and the servers present, and returns
# its check. A version of the lab (labs.py) lists the ids it runs, in page order.
RUNNERS = {"consistency": check_consistency, "idle": check_idle, "speed": check_speed,
           "design": check_design, "concurrency": check_concurrency,
           "robustness": lambda ctx, bin_dir, _present: check_robustness(ctx, bin_dir)}


def _kit_checks(ctx: Ctx, bin_dir: Path, present: list, checks: list) -> dict:
    """Every check that runs the servers, in page order, appended to checks; returns the
    kit workload's results."""
    cfg, lab = ctx.cfg, ctx.lab
    ctx.log("command line, port quirk, initial values")
    checks.extend(check_initial(ctx, bin_dir, present))
    paused = P.begin(ctx, bin_dir, present)
    ctx.log(f"kit workload: {cfg['runs']} runs x n={cfg['sizes']}")
    wl = workload(ctx, bin_dir, present, cfg["sizes"], cfg["runs"])
    ctx.wl = wl
    at, pause = len(checks), None
    for cid in lab.checks:
        if cid not in RUNNERS or (cid == "robustness" and lab.first not in present):
            continue
        if C.BY_ID[cid].quiet and pause is None:  # nothing of the submission beside a timed check
            pause = P.finish(paused)
        checks.append(within_budget(ctx, cid, lambda run=RUNNERS[cid]: run(ctx, bin_dir,
                                                                             present)))
    checks.insert(at, check_workload(wl, cfg["runs"], P.finish(paused) if pause is None
                                     else pause))
    ctx.probe = probe_within_budget(ctx, bin_dir, present)
    checks.append(check_timing(wl, cfg["runs"], ctx.probe, lab))
    return wl


def reference(ctx: Ctx) -> dict:
    wl = workload(ctx, Path(S.REFERENCE), labs.FOUR, ctx.cfg["sizes"], ctx.cfg["runs"],
                  tag_prefix="ref_")
    return {"tables": tables(wl)}


def hand_in(ctx: Ctx, ev: dict) -> bool:
    """Writes the evidence to stdout once (the grader reads it there); False when it was
    already handed in."""
    with ctx.out_lock:
        if ctx.handed_in:
            return False
        ctx.handed_in = True
        ev["log"] = ctx.log_lines
        sys.stdout.write(json.dumps(ev, default=str))
        sys.stdout.flush()
        return True


def out_of_time(ctx: Ctx) -> None:
    """The budget's hand-in time came with checks still running: what finished is handed
    in, every check not finished is undetermined (the grader's budget, not the
    submission's fault), and the worker ends before the outer limit stops it unheard."""
    ev = dict(ctx.ev)
    checks = list(ev.get("checks", []))
    have = {c["id"] for c in checks}
    if "timing" not in have and ctx.wl:
        checks.append(check_timing(ctx.wl, ctx.cfg["runs"], ctx.probe, ctx.lab))
        have.add("timing")
    left = [cid for cid in (ctx.lab.checks if ctx.lab else C.ORDER) if cid not in have]
    checks += [check(cid, C.title(cid, ctx.lab), "undetermined",
                     f"not finished within the grader's time budget ({ctx.budget_s:g} s); "
                     "not scored", not_run=True) for cid in left]
    checks = E.apply_all(checks, ctx.wl)
    ev.update(checks=checks, tables=tables(ctx.wl, ctx.lab), seconds=time.monotonic() - ctx.t0)
    ctx.log(f"time budget: handed in with {len(left)} check(s) unfinished")
    if hand_in(ctx, ev):
        os._exit(0)


def main() -> int:
    """Runs as an unprivileged uid inside the outer sandbox; the evidence goes to stdout
    (the grader writes every file on the host itself), the log to stderr."""
    cfg = json.loads(os.environ.pop("LOCKBENCH_GRADE"))
    ctx = Ctx(cfg, LA.Client())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if ctx.budget_s and cfg.get("mode") != "reference":
        timer = threading.Timer(HAND_IN_SHARE * ctx.budget_s, out_of_time, (ctx,))
        timer.daemon = True
        timer.start()
    ev = reference(ctx) if cfg.get("mode") == "reference" else grade(ctx)
    hand_in(ctx, ev)
    return 0


if __name__ == "__main__":
    sys.exit(main())
