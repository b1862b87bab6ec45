"""The concurrency check of a one-server lab: `main` timed against the grader's own
kit-style servers in turns (measure/bursts.py), and the leaderboard."""

import os
from pathlib import Path

from analysis.grade import records as C
from analysis.grade.context import check
from analysis.grade.measure import bursts as B
from analysis.grade.measure import design as D
from analysis.grade.measure.sandboxed import spread
from analysis.grade.trust import sandbox as S

ONE_LOCK = (D.ONE_MUTEX, D.ONE_RWLOCK)


def check_concurrency(ctx, bin_dir, present: list) -> dict:
    """A one-server lab's `main` against the grader's own kit-style servers, in turns:
    bursts of B.BURST simultaneous writes to distinct strings at the largest n. Round by
    round, kitref1's (one mutex) burst over main's decides by the speed check's
    sequential rule whether main serves them concurrently; kitref4's (an rwlock per
    string) over main's is main's speed for the leaderboard (above 1: faster than it).
    Serving them one at a time passes only with a one-lock design traced (the slower
    choice the lab discusses), fails with a lock per string traced (serialised somewhere
    else), and is undetermined otherwise."""
    name, title = ctx.lab.first, C.title("concurrency", ctx.lab)
    refs_dir = Path(S.REFERENCE)
    if not all((refs_dir / m).is_file() for m in (B.REF_ONE_LOCK, B.REF_PER_STRING)):
        return check("concurrency", title, "undetermined",
                     f"not measured: {B.NO_REFS}; not scored")
    if not ctx.lab.delay:
        return check("concurrency", title, "undetermined", f"not measured: {B.NO_DELAY}")
    n = max(ctx.cfg["sizes"])
    positions = spread(n, B.BURST)
    servers = {"sub": (bin_dir, name), **{m: (refs_dir, m) for m in (B.REF_ONE_LOCK,
                                                                       B.REF_PER_STRING)}}
    spans: dict = {key: [] for key in servers}
    failed, why, looks, verdict, strays = "", "", 0, None, []
    while not why and verdict is None and looks < B.SPEED_LOOKS:
        looks += 1
        failed, why = B.turns(ctx, servers, n, positions, spans, ctx.cfg["burst_rounds"],
                             strays)
        verdict = None if why else B.slower(ctx, spans, B.REF_ONE_LOCK, "sub")[0]
    if failed == "sub":
        out = check("concurrency", title, "fail", f"{name}: {why}")
    elif why:  # the grader's own server (or the grader): its failure costs nothing
        out = check("concurrency", title, "undetermined",
                    f"not measured: {failed}: {why}; not scored")
    else:
        out = _judge_concurrency(ctx, name, title, spans, looks)
    out["judged"] = len(spans["sub"])
    if sum(strays):
        ctx.log(f"concurrency: {sum(strays)} process(es) {name} left running stopped "
                f"before {sum(map(bool, strays))} turn(s)")
        out["evidence"].insert(1, B.strays_line(name, sum(strays)))
    return out


def _judge_concurrency(ctx, name, title, spans, looks) -> dict:
    verdict, lo, mid, hi, rounds = B.slower(ctx, spans, B.REF_ONE_LOCK, "sub")
    b_lo, b_mid, b_hi, _ = B.slower(ctx, spans, B.REF_PER_STRING, "sub")[1:]
    k = len(spread(max(ctx.cfg["sizes"]), B.BURST))
    lines = [f"n={max(ctx.cfg['sizes'])}; bursts of {k} simultaneous writes to distinct "
             f"strings, {name} and the grader's own kit-style {B.REF_ONE_LOCK} (one mutex) and "
             f"{B.REF_PER_STRING} (an rwlock per string) in turns, each started afresh for each "
             f"of its turns, {looks} look(s) of {ctx.cfg['burst_rounds']} rounds; error rate "
             f"at most {2 * B.SPEED_ALPHA * looks:.0%}",
             f"{B.REF_ONE_LOCK}'s burst over {name}'s, round by round: median "
             f"{mid:.2f}, 99 % interval {lo:.2f}-{hi:.2f} over {rounds} rounds",
             f"speed against {B.REF_PER_STRING} (its burst over {name}'s; above 1, {name} is "
             f"faster than it): median {b_mid:.2f}, 99 % interval {b_lo:.2f}-{b_hi:.2f}"]
    board = {"speed": b_mid, "low": b_lo, "high": b_hi, "rounds": rounds,
             "against": "the grader's kit-style rwlock per string (kitref4)"}
    traced = ctx.traced.get(name, D.UNDETERMINED)
    if verdict is None:
        status = "undetermined"
        lines.append(f"not clearly faster than one mutex (above "
                     f"{ctx.cfg['speed_ratio_serial']:g}) nor as slow (below "
                     f"{ctx.cfg['speed_ratio']:g}): undetermined, not scored")
    elif verdict:
        status = "pass"
        lines.append(f"{name} serves writes to different strings concurrently")
    elif traced in ONE_LOCK:
        status = "pass"
        lines.append(f"{name} serves writes to different strings one at a time, as its "
                     f"design ({traced}, traced) does: the slower choice the lab discusses")
    elif traced in (D.MUTEX_PER_STRING, D.RWLOCK_PER_STRING):
        status = "fail"
        lines.append(f"{name} locks {traced} (traced) yet serves writes to different "
                     "strings one at a time, no faster than one mutex: its requests are "
                     "serialised somewhere else")
    else:
        status = "undetermined"
        lines.append(f"{name} serves writes to different strings one at a time, as one lock "
                     "for the whole array would; its design was not traced, so this is not "
                     "held against it")
    cpus = ctx.cfg.get("cpus") or len(os.sched_getaffinity(0))
    if status == "fail" and cpus < 2:
        status = "undetermined"
        lines.append(f"undetermined on {cpus:g} CPU: threads cannot run side by side")
    return check("concurrency", title, status, lines, leaderboard=board)


# What the leaderboard's speed rests on: the lock design that makes it, the timing and the
# replies it is a speed of, and the measurement itself. A speed of a server that skips the
# kit's delay, answers wrongly or writes impossible timing lines ranks nothing.
BOARD_RESTS_ON = ("design", "timing", "consistency", "concurrency")


def post_or_withhold(checks: list) -> None:
    """The leaderboard's entry posted only when every check it rests on passed; else its
    speed is kept as evidence but withheld (board['withheld'] says why, and so does the
    concurrency check's evidence). A check the grading command left out (--skip) is the
    course's choice and withholds nothing; one the grader could not decide withholds, as
    nothing unconfirmed is ranked."""
    by = {c["id"]: c for c in checks}
    con = by.get("concurrency")
    board = con.get("leaderboard") if con else None
    if not isinstance(board, dict):
        return
    why = [f"{cid} {by[cid]['status'].upper()}" for cid in BOARD_RESTS_ON
           if cid in by and by[cid]["status"] != "pass"
           and not by[cid].get("left_out")]
    if why:
        board["withheld"] = ", ".join(why)
        lines = con["evidence"]
        at = next((i for i, x in enumerate(lines) if str(x).startswith("judged: ")), len(lines))
        lines.insert(at, f"leaderboard: withheld, as it rests on checks that did not pass "
                         f"({board['withheld']}); the speed above is not ranked")
