"""The grader's own bursts of simultaneous requests, what the speed, design and concurrency
checks and the clock probe time: one burst (kitload.burst) on each server in turns,
rounds of them, the sequential rule that decides a ratio with a distribution-free
interval of its median, and the grader's own kit-style servers (kitref.c) a one-server
lab's `main` is timed against."""

import random
import time

from analysis import kernel_sockets as ks
from analysis.grade.measure import kitload as K
from analysis.grade.measure.design import BURST  # noqa: F401  (simultaneous requests of a burst)
from analysis.grade.measure.sandboxed import start
from analysis.stats import median_ci


def rounds(ctx, targets: dict, rounds: int, spans: dict, failed: dict) -> None:
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
            elif not s.alive():   # its connections closed as it died: no span
                failed[key] = f"the server {s.death()} during a burst"
            else:
                spans[key].append(span)


def slower(ctx, spans: dict, slow: str, fast: str, at: tuple | None = None) -> tuple:
    """The sequential rule of the speed and design checks, on the round-by-round ratio
    spans[slow] / spans[fast]: (True when its 99 % interval lies above at[0], False when
    below at[1], else None; low, median, high, rounds). at: (speed_ratio_serial,
    speed_ratio) unless given."""
    above, below = at or (ctx.cfg["speed_ratio_serial"], ctx.cfg["speed_ratio"])
    ratios = [a / b for a, b in zip(spans[slow], spans[fast]) if b > 0]
    lo, mid, hi = median_ci(ratios, 2 * SPEED_ALPHA)
    verdict = True if lo > above else False if hi < below else None
    return verdict, lo, mid, hi, len(ratios)


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


NO_DELAY = ("this lab's kit has no delay in the accesses, so how long a lock is held cannot "
            "be timed")


# The grader's own kit-style servers a one-server lab's `main` is measured against
# (analysis/grade/kitref.c): one mutex, and an rwlock per string.
REF_ONE_LOCK, REF_PER_STRING = "kitref1", "kitref4"
NO_REFS = ("the grader's own kit-style servers (kitref1, kitref4) are not built beside its "
           "lock tracer (./lockbench setup builds them)")


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


def turn(ctx, where: tuple, n: int, positions: list, tag: str) -> tuple:
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
        if not s.alive():   # its connections closed as it died: no span
            return None, f"the server {s.death()} during a burst"
        return span, ""
    finally:
        s.stop()


def turns(ctx, servers: dict, n: int, positions: list, spans: dict, rounds: int,
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
            span, why = turn(ctx, servers[key], n, positions, f"{key}_turn{len(spans[key])}")
            if why:
                return key, why
            spans[key].append(span)
    return "", ""
