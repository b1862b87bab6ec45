"""The checks the grader times with its own bursts of simultaneous requests: the speed
check (main2 and main4 against main1), the design check (the lock trace and the bursts
that must confirm it) and a one-server lab's concurrency check (main against the grader's
kit-style servers, and the leaderboard)."""

import math
import os
import random
import statistics
import time
from pathlib import Path

from .. import kernel_sockets as ks
from . import checks as C
from . import design as D
from . import kitload as K
from . import safeio
from . import sandbox as S
from .sandboxed import Server, check, spread, start, start_all

BURST = 32              # simultaneous requests of one burst (distinct slots)


def _rounds(ctx, targets: dict, rounds: int, spans: dict, failed: dict) -> None:
    """`rounds` more rounds of bursts, every target once a round in a shuffled order, so
    noise on the machine hits them alike. targets {key: (Server, positions, reads?)};
    appends to spans {key: [seconds]} and records failures {key: why}."""
    rng = random.Random(20261125 + len(next(iter(spans.values()), [])))
    order = list(targets)
    for _ in range(rounds):
        rng.shuffle(order)
        for key in order:
            if key in failed:
                continue
            s, positions, read = targets[key]
            span, err = K.burst(s.port, positions, ctx.cfg["request_timeout_s"], read=read,
                                queued=lambda port=s.port: ks.accept_queue(port))
            if err:
                failed[key] = err + ("" if s.alive() else f" (server {s.death()})")
            else:
                spans[key].append(span)


def _slower(ctx, spans: dict, slow: str, fast: str, at: tuple | None = None) -> tuple:
    """The sequential rule of the speed and design checks, on the round-by-round ratio
    spans[slow] / spans[fast]: (True when its 99 % interval lies above at[0], False when
    below at[1], else None; low, median, high, rounds). at: (speed_ratio_serial,
    speed_ratio) unless given."""
    above, below = at or (ctx.cfg["speed_ratio_serial"], ctx.cfg["speed_ratio"])
    ratios = [a / b for a, b in zip(spans[slow], spans[fast]) if b > 0]
    lo, mid, hi = median_ci(ratios, 2 * SPEED_ALPHA)
    verdict = True if lo > above else False if hi < below else None
    return verdict, lo, mid, hi, len(ratios)


def median_ci(xs: list, alpha: float) -> tuple:
    """(low, median, high): the median and a distribution-free confidence interval for it
    at level 1 - alpha, from order statistics (binomial with p = 1/2)."""
    xs, m = sorted(xs), len(xs)
    k, tail = 0, 0.0
    while k < m // 2:
        nxt = tail + math.comb(m, k) / 2 ** m
        if nxt > alpha / 2:
            break
        tail, k = nxt, k + 1
    if k == 0:
        return (float("-inf"), statistics.median(xs), float("inf"))
    return xs[k - 1], statistics.median(xs), xs[m - k]


def usleep_floor(samples: int = 200) -> float:
    """The shortest time a usleep(10) took here (seconds): a server holding one lock
    across every access cannot serve k accesses in less than k times this."""
    best = 1.0
    for _ in range(samples):
        t0 = time.monotonic()
        time.sleep(10e-6)
        best = min(best, time.monotonic() - t0)
    return best


SPEED_ALPHA = 0.005   # per look and side of the interval; at most SPEED_LOOKS looks
SPEED_LOOKS = 4


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
        verdict, lo, mid, hi, rounds = _slower(ctx, spans, "main1", fast)
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
    itself: fresh main1, main2 and main4 at the largest n take bursts of BURST write
    requests to distinct slots, all sent at once over connections opened beforehand, in
    turns. One lock held across each access's usleep(10) makes the replies come out at
    least one delay apart; a lock per slot lets them overlap. A sequential test: rounds
    are added until the interval decides, at most SPEED_LOOKS looks, else undetermined
    (not scored). Nothing the submission writes is used."""
    n = max(ctx.cfg["sizes"])
    title = C.title("speed")
    need = ("main1", "main2", "main4")
    missing = [m for m in need if m not in present]
    if missing:
        return check("speed", title, "skip", f"not measured: {', '.join(missing)} missing")
    if not ctx.lab.delay:
        return check("speed", title, "undetermined", f"not measured: {NO_DELAY}; not scored",
                     judged=0)
    positions = spread(n, BURST)
    floor = usleep_floor()
    servers, ev = start_all(ctx, bin_dir, need, n, "burst")
    spans: dict = {name: [] for name in servers}
    failed: dict = {}
    try:
        looks = 0
        for _ in range(SPEED_LOOKS):
            looks += 1
            _rounds(ctx, {name: (s, positions, False) for name, s in servers.items()},
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
                    f"servers in turns; error rate at most {2 * SPEED_ALPHA * looks:.0%}")
    cpus = ctx.cfg.get("cpus") or len(os.sched_getaffinity(0))
    if status == "fail" and cpus < 2:
        status = "undetermined"
        lines.append(f"undetermined on {cpus:g} CPU: with less than two CPUs the servers' "
                     "threads cannot run side by side, so not being faster here is not held "
                     "against main2 and main4")
    return check("speed", title, status, lines, judged=sum(map(len, spans.values())))


# The lock tracer: the preload of `./lockbench profile` in its trace mode
# (profile/lockprof_trace.cpp), which the launcher turns on by handing the server a
# descriptor in $LOCKTRACE_FD.
TRACER = Path(S.REFERENCE) / "liblockprof.so"
TRACE_CAP = 8 << 20
DESIGN_THREADS = 30   # of the kit client's 100, ten requests each
NO_DELAY = ("this lab's kit has no delay in the accesses, so how long a lock is held cannot "
            "be timed")


def _design_one(ctx, bin_dir, name) -> tuple:
    """(True conforms | False another design | None undetermined, evidence line, fix): one
    server with the lock tracer preloaded under 300 requests of the kit workload at
    n = 1000 (30 of its 100 threads: enough strings requested twice), then the grader's
    bursts on it; the trace file is the launcher's, the server only holds a descriptor on
    it."""
    n = 1000
    s, why = start(ctx, bin_dir, name, n, f"{name}_design",
                   env=(("LD_PRELOAD", "/sub/liblockprof.so"),),
                   extra_ro={TRACER: "/sub/liblockprof.so"}, trace=True)
    measured = D.Measured(error=why or NO_DELAY)
    if not why:
        K.drive(s.port, K.kit_plan(n, threads=DESIGN_THREADS), ctx.cfg["request_timeout_s"])
        if ctx.lab.delay:
            measured = _measure_design(ctx, s)
        time.sleep(0.2)
    s.stop()
    if why:
        return None, f"{name}: not checked ({why})", ""
    # a course's weights may name the designs of a one-server version's main
    allowed = ctx.cfg.get("designs", {}).get(ctx.lab.name)
    trace = D.traced(_trace_text(s.trace), n)
    ctx.traced[name] = trace.kind
    return D.judge(name, trace, measured,
                   tuple(allowed) if allowed else ctx.lab.designs.get(name, ()))


def _trace_text(path: Path) -> str | None:
    """The trace's whole lines (a cut at TRACE_CAP drops the partial last one), or None
    when there is no readable trace."""
    try:
        text, cut = safeio.read_text(path, TRACE_CAP)
    except (FileNotFoundError, safeio.Unsafe):
        return None
    return text[:text.rfind("\n") + 1] if cut else text


# kind: (reads?, all to one string?), BURST requests each
BURSTS = {"w1": (False, True), "wk": (False, False), "r1": (True, True)}
# finding of D.Measured: (the burst that takes longer when it holds, the one it is compared
# with, the ratio it is decided at: None for the speed check's pair)
FINDINGS = {"per_string": ("w1", "wk", None),
            "readers_overlap": ("w1", "r1", (D.OVERLAP_RATIO, D.OVERLAP_RATIO))}


def _measure_design(ctx, s: Server) -> D.Measured:
    """Bursts of each kind of BURSTS on a running server at n = 1000, in shuffled turns,
    until the findings its design needs are clear (the sequential rule of the speed check,
    at most SPEED_LOOKS looks)."""
    spans, failed = {kind: [] for kind in BURSTS}, {}
    targets = {kind: (s, [0] * BURST if one else spread(s.n, BURST), read)
               for kind, (read, one) in BURSTS.items()}
    got: dict = {}
    for _ in range(SPEED_LOOKS):
        _rounds(ctx, targets, ctx.cfg["burst_rounds"], spans, failed)
        if failed:
            return D.Measured(error=f"a burst failed: {next(iter(failed.values()))}")
        got = {f: _slower(ctx, spans, slow, fast, at)
               for f, (slow, fast, at) in FINDINGS.items()}
        if None not in (verdict for verdict, *_ in got.values()):
            break
    return D.Measured(*(got[f][0] for f in FINDINGS), ratios=tuple(got[f][2] for f in FINDINGS))


def check_design(ctx, bin_dir, present: list) -> dict:
    """The lock design each mainN really uses: its lock calls traced by an LD_PRELOAD
    interposer under the kit workload at n = 1000, confirmed by the grader's own bursts
    (design.judge). A server neither can judge is undetermined and costs nothing."""
    who = C.title("design", ctx.lab)
    if not TRACER.is_file():
        return check("design", who, "undetermined",
                     "not checked: the lock tracer (liblockprof.so) is not built")
    res = [_design_one(ctx, bin_dir, name) for name in present]
    decided = [ok for ok, _, _ in res if ok is not None]
    status = ("fail" if False in decided else
              "pass" if decided and len(decided) == len(res) else "undetermined")
    return check("design", who, status, [line for _, line, _ in res],
                 fraction=sum(decided) / len(decided) if decided else 0.0,
                 fix=[f for _, _, f in res if f],
                 judged={name: int(ok is not None) for name, (ok, _, _) in zip(present, res)})


# The grader's own kit-style servers a one-server lab's `main` is measured against
# (analysis/grade/kitref.c): one mutex, and an rwlock per string.
REF_ONE_LOCK, REF_PER_STRING = "kitref1", "kitref4"
NO_REFS = ("the grader's own kit-style servers (kitref1, kitref4) are not built beside its "
           "lock tracer (./lockbench setup builds them)")
ONE_LOCK = (D.ONE_MUTEX, D.ONE_RWLOCK)


def stop_strays(ctx) -> int:
    """Before a server's turn: how many processes the submission had left running, stopped
    by the launcher. Only in container mode are there any: a process started with setsid
    or a double fork outlives the server that started it there (under bubblewrap the
    server's pid namespace ends with it) and would run on, a CPU hog say, through the
    grader's own servers' turns."""
    return ctx.launcher.call(op="sweep")["stopped"]


def strays_line(name: str, stopped: int) -> str:
    return (f"{stopped} process(es) that {name} left running after its server was stopped "
            "(started with setsid or a double fork, which outlive the server in container "
            "mode) were stopped before the next server's turn: nothing of the submission "
            "ran during another server's turn")


def _turn(ctx, where: tuple, n: int, positions: list, tag: str) -> tuple:
    """(seconds of one burst, '') on a server started afresh for it at n, after one burst
    unmeasured to warm it, and stopped after it; else (None, why not)."""
    s, why = start(ctx, *where, n, tag)
    try:
        if why:
            return None, f"did not start for its turn ({why})"
        queued = lambda: ks.accept_queue(s.port)  # noqa: E731
        K.burst(s.port, positions, ctx.cfg["request_timeout_s"], queued=queued)
        span, err = K.burst(s.port, positions, ctx.cfg["request_timeout_s"], queued=queued)
        if err:
            return None, f"a burst failed: {err}" + ("" if s.alive() else
                                                    f" (server {s.death()})")
        return span, ""
    finally:
        s.stop()


def _turns(ctx, servers: dict, n: int, positions: list, spans: dict, rounds: int,
           strays: list) -> tuple:
    """`rounds` rounds of write bursts, every server of servers {key: (folder,
    executable)} once a round in a shuffled order, each started afresh for its turn and
    stopped after it (_turn), with whatever the submission left running stopped before
    each turn (stop_strays; how many appended to strays): nothing of one runs during
    another's turn, and each is measured alike. Returns ('', '') or (the key whose turn
    failed, why)."""
    rng = random.Random(20261128 + len(spans["sub"]))
    order = list(servers)
    for _ in range(rounds):
        rng.shuffle(order)
        for key in order:
            try:
                strays.append(stop_strays(ctx))
            except OSError as e:  # the grader's own trouble: never the submission's
                return "the grader", f"what the submission left running was not stopped ({e})"
            span, why = _turn(ctx, servers[key], n, positions, f"{key}_turn{len(spans[key])}")
            if why:
                return key, why
            spans[key].append(span)
    return "", ""


def check_concurrency(ctx, bin_dir, present: list) -> dict:
    """A one-server lab's `main` against the grader's own kit-style servers, in turns:
    bursts of BURST simultaneous writes to distinct strings at the largest n. Round by
    round, kitref1's (one mutex) burst over main's decides by the speed check's
    sequential rule whether main serves them concurrently; kitref4's (an rwlock per
    string) over main's is main's speed for the leaderboard (above 1: faster than it).
    Serving them one at a time passes only with a one-lock design traced (the slower
    choice the lab discusses), fails with a lock per string traced (serialised somewhere
    else), and is undetermined otherwise."""
    name, title = ctx.lab.first, C.title("concurrency", ctx.lab)
    refs_dir = Path(S.REFERENCE)
    if not all((refs_dir / m).is_file() for m in (REF_ONE_LOCK, REF_PER_STRING)):
        return check("concurrency", title, "undetermined",
                     f"not measured: {NO_REFS}; not scored")
    if not ctx.lab.delay:
        return check("concurrency", title, "undetermined", f"not measured: {NO_DELAY}")
    n = max(ctx.cfg["sizes"])
    positions = spread(n, BURST)
    servers = {"sub": (bin_dir, name), **{m: (refs_dir, m) for m in (REF_ONE_LOCK,
                                                                       REF_PER_STRING)}}
    spans: dict = {key: [] for key in servers}
    failed, why, looks, verdict, strays = "", "", 0, None, []
    while not why and verdict is None and looks < SPEED_LOOKS:
        looks += 1
        failed, why = _turns(ctx, servers, n, positions, spans, ctx.cfg["burst_rounds"],
                             strays)
        verdict = None if why else _slower(ctx, spans, REF_ONE_LOCK, "sub")[0]
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
        out["evidence"].insert(1, strays_line(name, sum(strays)))
    return out


def _judge_concurrency(ctx, name, title, spans, looks) -> dict:
    verdict, lo, mid, hi, rounds = _slower(ctx, spans, REF_ONE_LOCK, "sub")
    b_lo, b_mid, b_hi, _ = _slower(ctx, spans, REF_PER_STRING, "sub")[1:]
    k = len(spread(max(ctx.cfg["sizes"]), BURST))
    lines = [f"n={max(ctx.cfg['sizes'])}; bursts of {k} simultaneous writes to distinct "
             f"strings, {name} and the grader's own kit-style {REF_ONE_LOCK} (one mutex) and "
             f"{REF_PER_STRING} (an rwlock per string) in turns, each started afresh for each "
             f"of its turns, {looks} look(s) of {ctx.cfg['burst_rounds']} rounds; error rate "
             f"at most {2 * SPEED_ALPHA * looks:.0%}",
             f"{REF_ONE_LOCK}'s burst over {name}'s, round by round: median "
             f"{mid:.2f}, 99 % interval {lo:.2f}-{hi:.2f} over {rounds} rounds",
             f"speed against {REF_PER_STRING} (its burst over {name}'s; above 1, {name} is "
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
