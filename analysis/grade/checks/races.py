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


def sanitized(ctx, cid: str, flags: str, what: str, run_one, servers) -> dict:
    """The submission rebuilt with `flags` in CFLAGS and LDFLAGS (build_<cid>), each server
    run by run_one(ctx, folder, name) -> (True an error | False clean | None not checked,
    line). PASS only when every server was checked and none erred; a server not checked
    makes it SKIP, never PASS. The sanitizers reserve terabytes of address space: no
    address-space limit."""
    lim = {**ctx.limits, "no_as": True}
    _, ev, bdir, _ = build(ctx, f"build_{cid}", ["CC=gcc", f"CFLAGS={flags}",
                                                 f"LDFLAGS={flags}"], lim)
    have = built(bdir, ctx.lab.servers)
    if not have:
        return check(cid, C.title(cid), "skip",
                     [f"not checked: could not rebuild with {what}", *ev[-3:]], judged=0)
    saved, ctx.limits = ctx.limits, lim
    try:
        res = [run_one(ctx, bdir, name) if name in have else
               (None, f"{name}: not checked: not built with {what}") for name in servers]
    finally:
        ctx.limits = saved
    erred = [r for r, _ in res]
    status = "fail" if True in erred else "skip" if None in erred or not res else "pass"
    return check(cid, C.title(cid), status, [line for _, line in res],
                 judged=sum(r is not None for r in erred))


def race_check(ctx, _bin_dir, servers) -> dict:
    """Rebuilt with -fsanitize=thread, each server under one kit run (sanitized)."""
    return sanitized(ctx, "races", "-O1 -g -fsanitize=thread", "-fsanitize=thread", _race_one,
                     servers)
