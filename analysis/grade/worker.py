"""The grading worker: runs inside the outer sandbox (its own loopback), builds the
submission and runs every check against it in inner sandboxes, and hands its evidence
back. This module orchestrates, from the records alone (records.py): the stages of
records.STAGES in order, in each the measurements of the stage first (the idle pause and
the kit workload, the clock probe), then every check of the lab's by its record, under the
time budget; each runner is resolved from its record's "module:function". Nothing here
calls a check or a measurement by name.

    python -m analysis.grade.worker      (its configuration in $LOCKBENCH_GRADE)

Every check yields {"id", "title", "status": pass|fail|skip, "evidence": text lines,
...data}; points are added later from the weights (score.py). A crash or hang ends only the
step it happened in; grading carries on with the next one.
"""

import importlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from analysis.grade import labs
from analysis.grade import records as C
from analysis.grade.checks import evidence as E
from analysis.grade.checks.timing import tables
from analysis.grade.context import HAND_IN_SHARE, SKIPPED, Ctx, check, over_budget
from analysis.grade.measure.kitrun import workload
from analysis.grade.trust import launcher as LA
from analysis.grade.trust import sandbox as S


def runner(spec: str):
    """The function a record names, "module:function" under analysis.grade."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(f"analysis.grade.{module}"), name)


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


def within_budget(ctx: Ctx, cid: str, run) -> dict:
    """run() when the check's expected cost fits in what is left of the time budget, else
    the check undetermined (not scored): the grader's budget never costs a point. A check
    the command left out (--skip) is undetermined too."""
    if cid in ctx.cfg.get("skip", ()):
        ctx.log(f"{cid}: left out (--skip)")
        return check(cid, C.title(cid, ctx.lab), "undetermined",
                     f"not checked: {SKIPPED}; not scored", not_run=True, left_out=True)
    why = over_budget(ctx, cid)
    if why:
        return check(cid, C.title(cid, ctx.lab), "undetermined",
                     f"not checked: {why}; not scored", not_run=True)
    ctx.log(cid)
    return run()


def records(ctx: Ctx) -> list:
    """The checks of this grading in page order: the lab's, then those its options switch
    on (--race, --memory)."""
    ids = [*ctx.lab.checks, *(c.id for c in C.CHECKS if c.option and ctx.cfg.get(c.option))]
    return [C.BY_ID[cid] for cid in ids]


def of_stage(ctx: Ctx, stage: str) -> tuple:
    """(measurements, checks) of `stage` in this grading, in table order. Before the lab
    is known (the first stage) only those of every lab that no option switches on."""
    rs = [r for r in C.RECORDS if r.stage == stage]
    if ctx.lab is None:
        rs = [r for r in rs if not r.labs and not r.option]
    else:
        mine = {r.id for r in records(ctx)}
        rs = [r for r in rs if r.id in mine or (r.kind == C.MEASUREMENT and (
            not r.labs or ctx.lab.name in r.labs))]
    return ([r for r in rs if r.kind == C.MEASUREMENT],
            [r for r in rs if r.kind == C.CHECK])


def _end_measurements(ctx: Ctx) -> None:
    """Every measurement still running ended (its record's `ends`), in the order begun."""
    while ctx.running:
        runner(ctx.running.pop(0).ends)(ctx)


def _measure(ctx: Ctx, rec) -> None:
    """One measurement by its record; one left running is ended before what reads it."""
    runner(rec.runner)(ctx, ctx.bin_dir, ctx.present)
    if rec.ends:
        ctx.running.append(rec)


def _run_order(rec) -> int:
    """Within a stage: what times nothing first, then (the measurements left running
    ended) what reads them, then what times the servers, with nothing of the submission
    beside it."""
    return 2 if rec.quiet else 1 if rec.after_pause else 0


def _run(ctx: Ctx, rec) -> dict | None:
    """One check by its record (None when a server it needs is missing: charge_missing
    fails it), under the time budget where it costs kit runs or may be left out."""
    if any(m not in ctx.present for m in rec.needed(ctx.lab)):
        return None
    if _run_order(rec):   # nothing idle beside it any more
        _end_measurements(ctx)
    run = lambda: runner(rec.runner)(ctx, ctx.bin_dir, ctx.present)  # noqa: E731
    if rec.cost_in_runs or rec.skippable:
        return within_budget(ctx, rec.id, run)
    ctx.log(rec.id)
    return run()


def after_grading(checks: list) -> None:
    """The records' hooks on the graded checks, once the evidence rule has applied (the
    leaderboard's rule)."""
    for rec in C.RECORDS:
        if rec.after:
            runner(rec.after)(checks)


def grade(ctx: Ctx) -> dict:
    """Every check of the grading, stage by stage (records.STAGES), each stage after its
    measurements; the evidence in page order, under the evidence rule."""
    cfg, t0 = ctx.cfg, time.monotonic()
    ev: dict = {"checks": [],
                "config": {k: cfg.get(k) for k in ("runs", "sizes", "quick", "budget_s",
                                                   "cpus", "skip")}}
    ctx.ev = ev
    for stage in C.STAGES:
        if stage != C.STAGES[0] and not ctx.present:   # nothing built, nothing to run
            break
        measurements, recs = of_stage(ctx, stage)
        for rec in measurements:
            _measure(ctx, rec)
        for rec in sorted(recs, key=_run_order):
            out = _run(ctx, rec)
            ev["checks"] += [out] if out else []
        if ctx.lab is not None and "lab" not in ev:
            lab = ctx.lab
            ev["lab"] = {"name": lab.name, "servers": list(lab.servers), "what": lab.what,
                         "why": ctx.lab_why}
    _end_measurements(ctx)
    checks = in_page_order(ev["checks"], ctx)
    charge_missing(checks, [m for m in ctx.lab.servers if m not in ctx.present], ctx.lab)
    checks = in_page_order(E.apply_all(checks, ctx.wl), ctx)
    after_grading(checks)
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
    for rec in records(ctx) if ctx.lab and ctx.wl else ():
        if rec.late and rec.id not in have:
            checks.append(runner(rec.runner)(ctx, ctx.bin_dir, ctx.present))
            have.add(rec.id)
    left = [r.id for r in records(ctx)] if ctx.lab else list(C.ORDER)
    checks += [check(cid, C.title(cid, ctx.lab), "undetermined",
                     f"not finished within the grader's time budget ({ctx.budget_s:g} s); "
                     "not scored", not_run=True) for cid in left if cid not in have]
    checks = in_page_order(E.apply_all(checks, ctx.wl), ctx)
    after_grading(checks)
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
