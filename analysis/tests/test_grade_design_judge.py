"""The design check's judgement (analysis/grade/measure/design.py): a trace read strictly
(one line the tracer does not write and none of it is believed), the grader's measured findings, and
`judge`, which passes a server only when its trace and the measurement agree. No server
runs here; the grading tests run the forgers (tests/fixtures/hostile/trace_*)."""

import pytest

from analysis.grade.measure import design as D

GOOD = "R 7-1- 1 0x55d4c8a0c040:m"

# the findings (per_string, readers_overlap) each design shows when measured
SHOWS = {D.ONE_MUTEX: (False, False), D.ONE_RWLOCK: (False, True),
         D.MUTEX_PER_STRING: (True, False), D.RWLOCK_PER_STRING: (True, True)}


def measured(kind: str) -> D.Measured:
    return D.Measured(*SHOWS[kind], ratios=(1.0, 1.0))


def test_parse_checked_counts_lines_the_tracer_does_not_write():
    assert D.parse_checked(f"{GOOD}\n{GOOD}\n") == (D.parse(f"{GOOD}\n{GOOD}\n"), 0)
    records, bad = D.parse_checked(f"{GOOD}\nforged by hand\n{GOOD}\n\n")
    assert (len(records), bad) == (2, 1)
    assert D.parse_checked(None) == ([], 1)


def test_a_trace_with_one_foreign_line_is_not_believed():
    text = "".join(f"R {p % 50}-0-x 1 0x{0x55d4c8a0c040 + 64 * (p % 50):x}:m\n"
                   for p in range(200))
    assert D.traced(text, 1000).kind == D.MUTEX_PER_STRING
    assert D.traced(text + "R 1-0-x 1 0x1:m\n", 1000).kind == D.UNDETERMINED
    assert "none of it is believed" in D.traced(text + "junk\n", 1000).evidence
    assert D.traced(None, 1000).kind == D.UNDETERMINED


@pytest.mark.parametrize("kind", list(SHOWS))
def test_the_measurement_names_each_design_and_contradicts_only_on_per_string(kind):
    m = measured(kind)
    assert m.kind() == kind
    for other in SHOWS:
        want = True if other == kind else (
            False if (other in D.PER_STRING) != (kind in D.PER_STRING) else None)
        assert m.agrees(other) is want, (kind, other)


def test_a_partial_measurement_contradicts_only_what_it_decided():
    one_lock = D.Measured(per_string=False)          # mutex or rwlock not clear
    assert one_lock.kind() is None
    assert one_lock.agrees(D.MUTEX_PER_STRING) is False
    assert one_lock.agrees(D.ONE_MUTEX) is None and one_lock.agrees(D.ONE_RWLOCK) is None
    # readers that waited (a busy machine can make an rwlock look so) confirm nothing and
    # contradict nothing
    readers_apart = D.Measured(per_string=True, readers_overlap=False)
    assert readers_apart.agrees(D.MUTEX_PER_STRING) is True
    assert readers_apart.agrees(D.RWLOCK_PER_STRING) is None
    assert readers_apart.agrees(D.ONE_RWLOCK) is False  # per string, not one lock
    assert D.Measured().agrees(D.ONE_MUTEX) is None
    assert D.Measured(*SHOWS[D.ONE_MUTEX], error="x").agrees(D.ONE_MUTEX) is None
    assert D.Measured(False, False).agrees(D.NO_LOCK) is None  # not told from one mutex


@pytest.mark.parametrize("server", list(D.EXPECTED))
def test_a_pass_needs_the_trace_and_the_measurement(server):
    want = D.EXPECTED[server]
    trace = D.Design(want, "300 requests traced", 300)
    ok, line, fix = D.judge(server, trace, measured(want))
    assert ok is True and "as expected" in line and "agrees" in line and fix == ""
    ok, line, _ = D.judge(server, trace, D.Measured())
    assert ok is None and "undetermined" in line


@pytest.mark.parametrize("server", ["main2", "main4"])
def test_a_forged_trace_is_failed_by_the_measurement(server):
    # the real lock is one mutex for the array; the trace shows the lab's design
    want = D.EXPECTED[server]
    ok, line, fix = D.judge(server, D.Design(want, "forged", 300), measured(D.ONE_MUTEX))
    assert ok is False, line
    assert f"the lock calls traced say {want}, the grader's measurement does not" in line
    assert "one lock for the whole array" in line and "one mutex" in fix


def test_without_a_trace_the_measurement_fails_but_never_passes():
    gone = D.Design(D.UNDETERMINED, "no trace written")
    ok, line, fix = D.judge("main2", gone, measured(D.ONE_MUTEX))
    assert ok is False and "no usable lock trace" in line and "expected a mutex per" in line
    assert fix.startswith("main2 must use a mutex per string")
    ok, line, fix = D.judge("main2", gone, measured(D.MUTEX_PER_STRING))
    assert ok is None and "undetermined" in line and fix == ""


def test_a_trace_of_another_design_fails_whatever_was_measured():
    ok, line, fix = D.judge("main1", D.Design(D.NO_LOCK, "none took a lock", 300),
                            measured(D.ONE_MUTEX))
    assert ok is False and "takes no lock" in line and "measured:" in line
    assert "it behaves as no lock" in fix


def test_describe_says_what_was_measured_with_the_ratios():
    text = D.Measured(True, False, ratios=(4.2, 1.6)).describe()
    assert "a lock per string" in text and "(4.20x)" in text and "(1.60x): a mutex" in text
    assert D.Measured(True, False).kind() == D.MUTEX_PER_STRING
    assert "not clear" in D.Measured().describe()
    assert D.Measured(error="a burst failed").describe() == "not measured (a burst failed)"


ANY = (D.ONE_MUTEX, D.MUTEX_PER_STRING, D.ONE_RWLOCK, D.RWLOCK_PER_STRING)


@pytest.mark.parametrize("kind", ANY)
def test_a_server_free_to_choose_passes_with_its_design_named(kind):
    # the lab of one server `main`: any of the four designs earns the check
    ok, line, fix = D.judge("main", D.Design(kind, "300 requests traced", 300), measured(kind),
                            ANY)
    assert ok is True and "one of the lab's designs" in line and kind in line and fix == ""


def test_a_server_free_to_choose_still_needs_a_lock_and_an_agreeing_measurement():
    ok, line, fix = D.judge("main", D.Design(D.NO_LOCK, "none took a lock", 300),
                            measured(D.ONE_MUTEX), ANY)
    assert ok is False and "expected one of one mutex" in line and fix.startswith("main must")
    forged = D.Design(D.RWLOCK_PER_STRING, "forged", 300)
    ok, line, _ = D.judge("main", forged, measured(D.ONE_MUTEX), ANY)
    assert ok is False and "the lock calls traced say an rwlock per string" in line
    # not traced: any design measured is one the lab accepts, so never failed, never passed
    ok, line, _ = D.judge("main", D.Design(D.UNDETERMINED, "no trace"), measured(D.ONE_MUTEX),
                          ANY)
    assert ok is None and "undetermined" in line


def test_writes_to_one_string_faster_than_the_delay_name_a_server_that_skips_it():
    # 32 writes to one string hold its lock one after another, each across two usleep(10)s
    fast = D.Measured(False, False, ratios=(1.0, 1.0), one_string_s=900e-6, usleep_s=45e-6)
    slow = D.Measured(False, False, ratios=(1.0, 1.0), one_string_s=3e-3, usleep_s=45e-6)
    assert fast.skips_delay and not slow.skips_delay and not D.Measured().skips_delay
    trace = D.Design(D.MUTEX_PER_STRING, "300 requests traced", 300)
    ok, line, fix = D.judge("main", trace, fast, (D.MUTEX_PER_STRING,))
    assert ok is False and line.startswith(f"main {D.SKIPS_DELAY}: the fastest burst of 32 ")
    assert "28.1 us a write" in line and "one lock for the whole array" not in line
    assert "usleep(ART_DELAY)" in fix
    # the same timing with no lock traced, or no trace: no lock, or no delay, said as such
    for t in (D.Design(D.NO_LOCK, "none took a lock", 300), D.Design(D.UNDETERMINED, "none")):
        ok, line, _ = D.judge("main", t, fast, (D.MUTEX_PER_STRING,))
        assert ok is not True and f"{D.SKIPS_DELAY} or locks nothing" in line
    # an honest mutex per string that the measurement shows so: passes as before
    honest = D.Measured(True, False, ratios=(3.0, 1.5), one_string_s=4e-3, usleep_s=45e-6)
    assert D.judge("main2", D.Design(D.MUTEX_PER_STRING, "traced", 300), honest)[0] is True
