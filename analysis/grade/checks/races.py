"""The race detector (--race): the submission rebuilt with -fsanitize=thread, each server
under one kit run."""

import os
import time

from analysis.grade import checks as C
from analysis.grade.checks.build import build, built
from analysis.grade.measure import kitload as K
from analysis.grade.measure.sandboxed import check, start


def _race_one(ctx, bdir, name) -> tuple:
    """(True racy | False clean | None not checked, evidence line)."""
    s, why = start(ctx, bdir, name, 10, f"{name}_tsan", wrap=["setarch", os.uname().machine, "-R"])
    if not why:
        K.drive(s.port, K.kit_plan(10), ctx.cfg["request_timeout_s"])
        time.sleep(0.2)
    s.stop()
    log = s.output.text()
    races = log.count("WARNING: ThreadSanitizer: data race")
    if races:
        first = [ln.strip() for ln in log.splitlines() if ln.strip().startswith("#")][:4]
        return True, (f"{name}: {races} data race report(s); first stack: "
                      + " | ".join(first))
    fatal = next((ln for ln in log.splitlines() if "FATAL" in ln), "")
    if fatal:
        return None, f"{name}: not checked: ThreadSanitizer could not run: {fatal[:200]}"
    if why:
        return None, f"{name}: not checked ({why})"
    return False, f"{name}: no data race reported under one kit run (n=10)"


def race_check(ctx, _bin_dir, servers) -> dict:
    """Rebuilt with -fsanitize=thread, each server under one kit run. PASS only when every
    server was checked and none raced; a server not checked makes it SKIP, never PASS."""
    lim = {**ctx.limits, "no_as": True}
    status, ev, bdir, _ = build(ctx, "build_tsan", ["CC=gcc", "CFLAGS=-O1 -g -fsanitize=thread",
                                                    "LDFLAGS=-fsanitize=thread"], lim)
    have = built(bdir, ctx.lab.servers)
    if not have:
        return check("races", C.title("races"), "skip",
                     ["not checked: could not rebuild with -fsanitize=thread", *ev[-3:]])
    saved, ctx.limits = ctx.limits, lim
    try:
        res = [_race_one(ctx, bdir, name) if name in have else
               (None, f"{name}: not checked: not built with -fsanitize=thread")
               for name in servers]
    finally:
        ctx.limits = saved
    racy = [r for r, _ in res]
    status = "fail" if True in racy else "skip" if None in racy or not res else "pass"
    return check("races", C.title("races"), status, [line for _, line in res],
                 judged=sum(r is not None for r in racy))
