"""The kit workload, like the kit's test.sh: per server and n a fresh server and R runs of
1000 kit requests (100 client threads x 10), the servers of one n side by side taking their
runs in turns; what every check after it stands on (its results, ctx.wl), and how a failed
run is told (a crash and the request in flight, a hang)."""

import math
import random
import statistics
import time

from analysis.grade.context import MIN_RUNS
from analysis.grade.measure import kitload as K
from analysis.grade.measure.sandboxed import Server, await_lines, start


def describe_failure(s: Server, failed: list) -> str:
    first = min(failed, key=lambda r: r.start)
    if not s.alive():
        inflight = [r for r in failed if r.error and "refused" not in r.error]
        culprit = min(inflight, key=lambda r: r.start) if inflight else first
        return (f"crashed: {s.death()}; the first request that got no reply: "
                f"{K.request_text(culprit.pos, culprit.is_read, culprit.text)!r} "
                f"({len(inflight)} in flight)")
    timeouts = [r for r in failed if "no reply" in r.error]
    if timeouts:
        return (f"hangs: {len(timeouts)} request(s) got no reply within "
                f"{ctx_timeout(timeouts)}, e.g. {first.describe()}")
    return f"errors: {first.describe()}"


def ctx_timeout(reqs):
    return reqs[0].error.split("within ")[-1]


def _new_entry() -> dict:
    return {"runs": 0, "runs_done": 0, "requests_ok": 0, "failure": "", "client_mean_s": [],
            "client_wall_s": [], "timing": None, "timing_problem": "", "history": None,
            "short": [], "pause": None, "outcomes": {}, "unreplied_writes": 0}


def _one_run(ctx, s, entry, n, r) -> None:
    """One kit client run (1000 requests) against a started server, sent to its end as
    the kit's client sends them, whatever the replies; records each request's outcome.
    The run failed only as the kit would fail: the server died, a request got no reply
    (a hang), or a connection was refused. A run that went through is a batch of 1000 the
    server received, whose timing line is due, even where replies were missing."""
    done, wall = K.drive(s.port, K.kit_plan(n), ctx.cfg["request_timeout_s"])
    ok = [q for q in done if q.ok]
    failed = [q for q in done if not q.ok]
    entry["requests_ok"] += len(ok)
    entry["short"] += [q.size for q in K.short(ok)]
    for q in done:
        entry["outcomes"][q.outcome] = entry["outcomes"].get(q.outcome, 0) + 1
    entry["unreplied_writes"] += sum(not q.is_read and q.outcome == "empty" for q in done)
    if r == 0:
        entry["history"] = done
    stopped = [q for q in failed if not q.goes_on]
    if stopped or len(done) < K.THREADS * K.PER_THREAD or (failed and not s.alive()):
        time.sleep(0.2)
        entry["failure"] = (f"run {r + 1}: " + describe_failure(s, failed) if failed
                            else f"run {r + 1}: only {len(done)} requests finished")
        return
    entry["runs_done"] += 1
    entry["client_mean_s"].append(statistics.fmean(q.end - q.start for q in done))
    entry["client_wall_s"].append(wall)
    ctx.run_s.append(wall)
    if ctx.cfg["pause_s"]:
        time.sleep(ctx.cfg["pause_s"])


def _finish(ctx, s, entry, tag, runs) -> None:
    await_lines(ctx, s, entry["runs_done"])
    ended = s.ended()
    s.stop()
    if ended and not entry["failure"]:
        entry["failure"] = f"ended after the runs: {ended}"
    entry["timing"], entry["timing_problem"] = s.timing_lines()
    ctx.log(f"  {tag}: {entry['runs_done']}/{entry['runs']} runs"
            + (f", {entry['failure']}" if entry["failure"] else ""))


def _slot_end(ctx, sizes_left: int) -> float:
    """When the runs at this n must stop under a time budget: what is left once the later
    checks are provided for (at this machine's pace so far), split evenly over the sizes
    still to run; infinite without a budget."""
    if not ctx.budget_s:
        return math.inf
    later = ctx.later_cost()
    now = time.monotonic()
    return now + max(0.0, ctx.left() - later) / sizes_left


def workload(ctx, bin_dir, servers, sizes, runs, tag_prefix="") -> dict:
    """The kit workload like test.sh: per server and n a fresh server, `runs` client runs
    (fewer, never below MIN_RUNS, when a time budget would run out: entry['runs'] says how
    many were asked of that setting). The servers of one n are started side by side and
    take their runs in turns, in a shuffled order each round, so a burst of noise on the
    machine hits them alike and the speed check can compare them round by round. Returns
    {name: {n: {...}}}."""
    res: dict = {}
    rng = random.Random(20261124)
    for i, n in enumerate(sizes):
        stop_at = _slot_end(ctx, len(sizes) - i)
        live = {}
        for name in servers:
            tag = f"{tag_prefix}{name}_n{n}"
            entry = res.setdefault(name, {})[n] = _new_entry()
            s, why = start(ctx, bin_dir, name, n, tag)
            if why:
                entry["failure"] = f"did not start: {why}"
                s.stop()
                continue
            live[name] = (s, entry, tag)
        order, asked = list(live), runs
        for r in range(runs):
            if r >= MIN_RUNS and time.monotonic() > stop_at:
                asked = r
                break
            rng.shuffle(order)
            for name in order:
                s, entry, _ = live[name]
                if not entry["failure"]:
                    _one_run(ctx, s, entry, n, r)
        for name in servers:
            res[name][n]["runs"] = asked
        for s, entry, tag in live.values():
            _finish(ctx, s, entry, tag, runs)
    return res


def kit_workload(ctx, bin_dir, present: list) -> None:
    """The kit workload's measurement (its record in records.py): every present server at
    every n of the grading, its results left in ctx.wl for the checks after it."""
    ctx.log(f"kit workload: {ctx.cfg['runs']} runs x n={ctx.cfg['sizes']}")
    ctx.wl = workload(ctx, bin_dir, present, ctx.cfg["sizes"], ctx.cfg["runs"])
