"""linearize: per-slot register linearizability of recorded histories (pure)."""

import ctypes

from analysis.grade.measure import kitload as K
from analysis.grade.measure import linearize as L

R = K.Request


def test_sequential_history_is_linearizable():
    h = [R(0, 1, False, "x", 0, 1, "x"), R(1, 1, True, "", 2, 3, "x")]
    assert L.check_history(h, {1: "init"})[1].ok is True


def test_stale_read_after_a_completed_write_is_a_violation_with_a_counterexample():
    h = [R(0, 1, False, "x", 0, 1, "x"), R(1, 1, True, "", 2, 3, "init")]
    res = L.check_history(h, {1: "init"})[1]
    assert res.ok is False
    assert "thread 1 read slot 1 -> 'init'" in res.explanation
    assert "holds 'x'" in res.explanation


def test_concurrent_read_may_see_either_value():
    w = R(0, 1, False, "x", 0, 10, "x")
    for seen in ("x", "init"):
        assert L.check_history([w, R(1, 1, True, "", 1, 2, seen)], {1: "init"})[1].ok


def test_torn_value_is_named():
    h = [R(0, 2, False, "aaaa", 0, 1, "aaaa"), R(1, 2, True, "", 0, 1, "aabb")]
    res = L.check_history(h, {2: "init"})[2]
    assert res.ok is False and "torn" in res.explanation and "'aabb'" in res.explanation


def test_write_reply_may_see_a_later_write_but_not_an_earlier_state():
    # Thread 0's write replies 'y' (a server that locks twice): fine if y's write overlaps.
    a = R(0, 3, False, "x", 0, 10, "y")
    b = R(1, 3, False, "y", 1, 2, "y")
    assert L.check_history([a, b], {3: "init"})[3].ok
    # ... but a reply of the initial value after its own write is not.
    c = R(0, 3, False, "x", 0, 1, "init")
    assert L.check_history([c], {3: "init"})[3].ok is False


def test_unknown_initial_value_is_taken_from_the_history_but_only_once():
    b = R(2, 1, True, "", 3, 4, "x")
    w = R(1, 1, False, "x", 1, 2, "x")
    a = R(0, 1, True, "", 0, 10, "init")
    assert L.check_history([b, w, a])[1].ok
    late = R(3, 1, True, "", 5, 6, "init")
    assert L.check_history([b, w, a, late])[1].ok is False


def test_failed_write_may_or_may_not_have_happened():
    w = R(0, 1, False, "x", 0, 1, None, "no reply within 1 s")
    for seen in ("x", "init"):
        assert L.check_history([w, R(1, 1, True, "", 5, 6, seen)], {1: "init"})[1].ok


def test_kit_plan_uses_glibc_rand_r_seeded_with_the_thread_index():
    libc = ctypes.CDLL("libc.so.6")
    for t in (0, 1, 57, 99):
        seed = ctypes.c_uint(t)
        want = []
        for _ in range(K.PER_THREAD):
            pos = libc.rand_r(ctypes.byref(seed)) % 100
            is_read = libc.rand_r(ctypes.byref(seed)) % 100 < 70
            want.append((pos, is_read))
        got = [(r.pos, r.is_read) for r in K.kit_plan(100)[t]]
        assert got == want
    plan = K.kit_plan(10)
    assert sum(len(p) for p in plan) == 1000
    w = next(r for p in plan for r in p if not r.is_read)
    assert w.text == f"String[{w.pos}] has been modified by thread {w.thread}"


def test_frames_are_exactly_100_bytes_nul_terminated():
    f = K.frame("3-1-")
    assert len(f) == 100 and f.startswith(b"3-1-\0")
    assert len(K.frame("x" * 300)) == 100 and K.frame("x" * 300)[99] == 0


def test_each_request_has_one_outcome_and_the_kit_goes_on_after_an_unanswered_one():
    got = {q.outcome: q.goes_on for q in (
        R(0, 1, True, "", reply="x", size=100), R(0, 1, True, "", reply="x", size=2),
        R(0, 1, True, "", error=K.EMPTY),
        R(0, 1, True, "", error="ConnectionResetError: Connection reset by peer"),
        R(0, 1, True, "", error=f"{K.TIMED_OUT} 3 s"), R(0, 1, True, "", error=K.REFUSED),
        R(0, 1, True, "", error="OSError: Network is unreachable"))}
    assert got == {"answered": True, "short": True, "empty": True, "reset": True,
                   "timed out": False, "refused": False, "failed": False}
    assert tuple(got) == K.OUTCOMES


def test_a_write_closed_without_a_reply_was_over_at_the_close():
    # a kit-style server closes a connection last: the write happened before the close, so
    # a read that starts after it must see it (or a later write), never the old value
    w = R(0, 1, False, "x", 0, 1, None, K.EMPTY)
    assert L.check_history([w, R(1, 1, True, "", 5, 6, "x")], {1: "init"})[1].ok
    bad = L.check_history([w, R(1, 1, True, "", 5, 6, "init")], {1: "init"})[1]
    assert bad.ok is False and "the slot holds 'x'" in bad.explanation
    # a reset says nothing of when: it may or may not have happened
    reset = R(0, 1, False, "x", 0, 1, None, "ConnectionResetError: Connection reset by peer")
    assert L.check_history([reset, R(1, 1, True, "", 5, 6, "init")], {1: "init"})[1].ok
