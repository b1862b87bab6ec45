"""The grading worker: runs inside the outer sandbox (its own loopback), builds the
submission and runs every check against it in inner sandboxes, and hands its evidence
back. This module orchestrates: the stages of checks.STAGES in order, each after the
measurement it stands on (the idle pause and the kit workload, the clock probe), and in
each stage every check of the lab's by its record (checks.py), under the time budget; each
check's runner is in the module of its kind, on the grading's context and servers
(sandboxed). Nothing here calls a check by name.

    python -m analysis.grade.worker      (its configuration in $LOCKBENCH_GRADE)

Every check yields {"id", "title", "status": pass|fail|skip, "evidence": text lines,
...data}; points are added later from the weights (pages/score.py). A crash or hang ends only the
step it happened in; grading carries on with the next one.
"""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from analysis.grade import checks as C
from analysis.grade import labs
from analysis.grade.checks import evidence as E
from analysis.grade.checks.concurrency import post_or_withhold
from analysis.grade.checks.timing import check_timing, clock_probe, lost_in_noise, tables
from analysis.grade.measure import pause as P
from analysis.grade.measure.kitrun import workload
from analysis.grade.measure.sandboxed import HAND_IN_SHARE, Ctx, check
from analysis.grade.trust import launcher as LA
from analysis.grade.trust import sandbox as S


def one_server_fixes(checks: list, lab) -> None:
    """A one-server lab's own fix for a check that did not pass and has none of its own."""
    if len(lab.servers) != 1:
        return
    for c in checks:
        own = C.BY_ID[c["id"]].fix_one if c["id"] in C.BY_ID else ""
        if c["status"] != "pass" and not c.get("fix") and own:
            c["fix"] = [own]


def charge_missing(checks: list, missing: list, lab) -> None:
    """A missing server fails every check that needed it: each per-server check keeps only
    the present servers' share of its points and names the missing ones; a check that is
    absent because nothing could run is added as a failure, so every page has the same
    maximum score; a check that needs a missing server (its record's `needs`) fails."""
    if not missing:
        return
    have = {c["id"] for c in checks}
    for cid in C.PER_SERVER:
        if cid not in have and cid in lab.checks:
            checks.append(check(cid, C.title(cid, lab), "fail", [], fraction=0.0))
    for c in checks:
        if c["id"] in C.PER_SERVER:
            base = c.get("fraction", 1.0 if c["status"] == "pass" else 0.0)
            c["fraction"] = base * (len(lab.servers) - len(missing)) / len(lab.servers)
            c["status"] = "fail"
            c["evidence"] = [f"{m}: missing, so it fails this check" for m in missing] + \
                c["evidence"]
    for cid in lab.checks:
        gone = [m for m in C.BY_ID[cid].needed(lab) if m in missing]
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


def records(ctx: Ctx) -> list:
    """The checks of this grading in page order: the lab's, then those its options switch
    on (--race, --memory)."""
    ids = [*ctx.lab.checks, *(c.id for c in C.CHECKS if c.option and ctx.cfg.get(c.option))]
    return [C.BY_ID[cid] for cid in ids]


def _measure(ctx: Ctx, stage: str) -> None:
    """What the checks of `stage` stand on, measured once before them: the idle pause
    begun and the kit workload (workload); the clock probe (probe)."""
    cfg = ctx.cfg
    if stage == "workload":
        ctx.paused = P.begin(ctx, ctx.bin_dir, ctx.present)
        ctx.log(f"kit workload: {cfg['runs']} runs x n={cfg['sizes']}")
        ctx.wl = workload(ctx, ctx.bin_dir, ctx.present, cfg["sizes"], cfg["runs"])
    elif stage == "probe":
        ctx.probe = probe_within_budget(ctx, ctx.bin_dir, ctx.present)


def _run_order(rec) -> int:
    """Within a stage: what times nothing first, then (the idle pause finished) what reads
    the pause, then what times the servers, with nothing of the submission beside it."""
    return 2 if rec.quiet else 1 if rec.after_pause else 0


def _run(ctx: Ctx, rec) -> dict | None:
    """One check by its record (None when a server it needs is missing: charge_missing
    fails it), under the time budget where it costs kit runs or may be left out."""
    if any(m not in ctx.present for m in rec.needed(ctx.lab)):
        return None
    if _run_order(rec) and ctx.paused is not None:   # nothing idle beside it any more
        ctx.pause, ctx.paused = P.finish(ctx.paused), None
    run = lambda: rec.run(ctx, ctx.bin_dir, ctx.present)  # noqa: E731
    if rec.stage in ("workload", "option") and (rec.cost_in_runs or rec.id in C.SKIPPABLE):
        return within_budget(ctx, rec.id, run)
    if rec.stage != "build":
        ctx.log(rec.id)
    return run()


def grade(ctx: Ctx) -> dict:
    """Every check of the grading, stage by stage (checks.STAGES), each stage after what
    it stands on; the evidence in page order, under the evidence rule."""
    cfg, t0 = ctx.cfg, time.monotonic()
    ev: dict = {"checks": [],
                "config": {k: cfg.get(k) for k in ("runs", "sizes", "quick", "budget_s",
                                                   "cpus", "skip")}}
    ctx.ev, ctx.paused = ev, None
    ctx.log("build")
    for stage in C.STAGES:
        recs = [C.BY_ID[cid] for cid in ("build", "binaries")] if stage == "build" else \
            [r for r in records(ctx) if r.stage == stage]
        if stage != "build" and not ctx.present:
            break
        _measure(ctx, stage)
        for rec in sorted(recs, key=_run_order):
            out = _run(ctx, rec)
            ev["checks"] += [out] if out else []
        if stage == "build":
            lab = ctx.lab
            ev["lab"] = {"name": lab.name, "servers": list(lab.servers), "what": lab.what,
                         "why": ctx.lab_why}
    if ctx.paused is not None:
        ctx.pause = P.finish(ctx.paused)
    checks = in_page_order(ev["checks"], ctx)
    charge_missing(checks, [m for m in ctx.lab.servers if m not in ctx.present], ctx.lab)
    checks = in_page_order(E.apply_all(checks, ctx.wl), ctx)
    post_or_withhold(checks)
    one_server_fixes(checks, ctx.lab)
    ev.update(checks=checks, tables=tables(ctx.wl, ctx.lab), seconds=time.monotonic() - t0)
    return ev


def in_page_order(checks: list, ctx: Ctx) -> list:
    """The checks in the order of their records (those of no record last)."""
    order = {r.id: i for i, r in enumerate(records(ctx))} if ctx.lab else {}
    return sorted(checks, key=lambda c: order.get(c["id"], len(order)))


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
    left = [r.id for r in records(ctx)] if ctx.lab else list(C.ORDER)
    checks += [check(cid, C.title(cid, ctx.lab), "undetermined",
                     f"not finished within the grader's time budget ({ctx.budget_s:g} s); "
                     "not scored", not_run=True) for cid in left if cid not in have]
    checks = in_page_order(E.apply_all(checks, ctx.wl), ctx)
    post_or_withhold(checks)
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
