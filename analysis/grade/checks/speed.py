"""The speed check: main2 and main4 clearly faster than main1, judged only from what the
grader times itself (measure/bursts.py)."""

import os
import statistics

from analysis.grade import records as C
from analysis.grade.context import check
from analysis.grade.measure import bursts as B
from analysis.grade.measure.sandboxed import spread, start_all


def _judge_speed(ctx, spans: dict, k: int, floor: float) -> tuple:
    """(status, evidence lines). Per round the ratio main1 / mainX of the paired bursts;
    its median with a 99 % interval. Concurrent (pass) when the interval lies above
    speed_ratio_serial (what two servers that both serve one at a time measure), one at a
    time (fail) when it lies below speed_ratio; otherwise 'undetermined' (measure more)."""
    pass_at, fail_at = ctx.cfg["speed_ratio"], ctx.cfg["speed_ratio_serial"]
    main1 = statistics.median(spans["main1"])
    ev = [f"main1 took {main1 * 1e3:.2f} ms (median) from the first of {k} simultaneous "
          "writes to distinct slots to the last reply; each ratio below is main1's burst "
          "over the other server's burst of the same round"]
    if main1 < k * floor:
        ev.append(f"main1 took less than {k} x usleep(10) = {k * floor * 1e3:.2f} ms, so it "
                  "does not hold one lock across every access")
    words = []
    for fast in ("main2", "main4"):
        verdict, lo, mid, hi, rounds = B.slower(ctx, spans, "main1", fast)
        word = {True: "pass", False: "fail", None: "undetermined"}[verdict]
        words.append(word)
        ev.append(f"main1 / {fast}, round by round: median {mid:.2f}, 99 % interval "
                  f"{lo:.2f}-{hi:.2f} over {rounds} rounds: " + {
                      "pass": f"above {fail_at:g}, {fast} serves these requests concurrently",
                      "fail": f"below {pass_at:g}, {fast} is not clearly faster than main1: "
                              "it serves these requests one at a time (one lock for all, "
                              "or a thread joined at once)",
                      "undetermined": f"not clearly above {fail_at:g} nor below {pass_at:g}"
                  }[word])
    status = "fail" if "fail" in words else "undetermined" if "undetermined" in words else "pass"
    return status, ev


def check_speed(ctx, bin_dir, present: list) -> dict:
    """main2 and main4 clearly faster than main1, judged only from what the grader measures
    itself: fresh main1, main2 and main4 at the largest n take bursts of B.BURST write
    requests to distinct slots, all sent at once over connections opened beforehand, in
    turns. One lock held across each access's usleep(10) makes the replies come out at
    least one delay apart; a lock per slot lets them overlap. A sequential test: rounds
    are added until the interval decides, at most B.SPEED_LOOKS looks, else undetermined
    (not scored). Nothing the submission writes is used."""
    n = max(ctx.cfg["sizes"])
    title = C.title("speed")
    need = ("main1", "main2", "main4")
    missing = [m for m in need if m not in present]
    if missing:
        return check("speed", title, "skip", f"not measured: {', '.join(missing)} missing")
    if not ctx.lab.delay:
        return check("speed", title, "undetermined", f"not measured: {B.NO_DELAY}; not scored",
                     judged=0)
    positions = spread(n, B.BURST)
    floor = B.usleep_floor()
    servers, ev = start_all(ctx, bin_dir, need, n, "burst")
    spans: dict = {name: [] for name in servers}
    failed: dict = {}
    try:
        looks = 0
        for _ in range(B.SPEED_LOOKS):
            looks += 1
            B.rounds(ctx, {name: (s, positions, False) for name, s in servers.items()},
                    ctx.cfg["burst_rounds"], spans, failed)
            if ev or failed:
                break
            status, lines = _judge_speed(ctx, spans, len(positions), floor)
            if status != "undetermined":
                break
    finally:
        for s in servers.values():
            s.stop()
    ev += [f"{name}: a burst of {len(positions)} requests failed: {why}"
           for name, why in failed.items()]
    if ev:
        return check("speed", title, "fail", ev)
    lines.insert(0, f"n={n}; {looks} look(s) of {ctx.cfg['burst_rounds']} rounds, the three "
                    f"servers in turns; error rate at most {2 * B.SPEED_ALPHA * looks:.0%}")
    cpus = ctx.cfg.get("cpus") or len(os.sched_getaffinity(0))
    if status == "fail" and cpus < 2:
        status = "undetermined"
        lines.append(f"undetermined on {cpus:g} CPU: with less than two CPUs the servers' "
                     "threads cannot run side by side, so not being faster here is not held "
                     "against main2 and main4")
    return check("speed", title, status, lines, judged=sum(map(len, spans.values())))
