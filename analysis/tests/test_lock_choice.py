"""Which lock, when: best and avoided strategies per workload class, with their reasons,
the floor check, and the section as the report renders it (figures included)."""

import json

import pytest

from analysis import report as R
from analysis.report import lock_choice as W
from analysis.report import microbench_tables as M

from .helpers import REPO

RESULTS = REPO / "analysis" / "tests" / "fixtures" / "results_small"


def _doc(settings: dict) -> dict:
    """kv_bench JSON: {(read, n, delay, threads): {strategy: (ops/s repetitions)}}, with
    fairness counters (the faster, the less even) and the timing rows."""
    runs = []
    for (read, n, delay, threads), values in settings.items():
        for name, reps in values.items():
            run = (f"Store/{name}/s:1/read:{read}/n:{n}/delay_us:{delay}/threads:{threads}/"
                   "iterations:1/manual_time")
            for i, v in enumerate(reps):
                runs.append({"name": run, "run_name": run, "run_type": "iteration",
                             "repetition_index": i, "ops_per_s": v,
                             "ns_per_op": threads * 1e9 / v, "fair_jain": 1 - v / 1e9,
                             "fair_rsd": 0.1, "fair_max_min": 1.5, "wait_p50_ns": 40,
                             "wait_p99_ns": 400, "wait_p999_ns": 900, "wait_samples": 100})
    for mode, ns in (("timed", 93.7), ("sampled", 9.1), ("untimed", 7.6)):
        name = f"StoreTiming/unprotected/timing:{mode}"
        runs.append({"name": name, "run_name": name, "run_type": "iteration",
                     "ns_per_op": ns})
    return {"context": {"host_name": "box", "num_cpus": 2, "mhz_per_cpu": 3000},
            "benchmarks": runs}


OVERSUBSCRIBED = (95, 1, 0, 32)
LAB_DELAY = (70, 1000, 10, 8)
DATA = {
    OVERSUBSCRIBED: {"unprotected": (90e6, 100e6, 110e6),
                     "one-futex-mutex": (40e6, 42e6, 44e6),
                     "one-mutex": (38e6, 41e6, 45e6),        # overlaps the leader: tied
                     "one-mcs": (1e6, 1.2e6, 1.3e6),         # FIFO spinning: collapses
                     "one-ttas-backoff": (5e6, 6e6, 7e6)},   # spinning
    LAB_DELAY: {"unprotected": (50e6, 60e6, 70e6),
                "rwlock-per-slot": (20e6, 21e6, 22e6),
                "one-mutex": (1e6, 1.1e6, 1.2e6),
                "mutex-per-slot": (11e6, 12e6, 13e6)},       # slower, not below half
}


@pytest.fixture
def df():
    return M.parse_benchmarks(_doc(DATA))


def test_best_is_the_leaders_tier_and_avoid_is_below_half_beyond_the_spread(df):
    t = W.table(df, cores=2, machine="box, 2 cores").set_index("class")
    assert list(t.index) == ["threads outnumber cores, hot string",
                             "delay inside the critical section (the lab's)"]
    over = t.loc["threads outnumber cores, hot string"]
    assert over["setting"] == "95% reads, n = 1, 32 threads"
    assert over["best"].startswith("one-futex-mutex (waiters sleep, so the holder keeps its "
                                   "core; 1.00 of the best); one-mutex (")
    assert over["n_best"] == 2 and over["n_avoid"] == 2
    # slowest first, each with its mechanism and share of the best
    assert over["avoid"].startswith("one-mcs (FIFO hand-over to a waiter that is not running")
    assert "one-ttas-backoff (waiters spin on the cores the lock holder needs; 0.14" in (
        over["avoid"])
    lab = t.loc["delay inside the critical section (the lab's)"]
    assert lab["best"].startswith("rwlock-per-slot (")
    assert lab["avoid"].startswith("one-mutex (one lock serialises accesses to different")
    assert "mutex-per-slot" not in lab["avoid"]  # 0.57 of the best: slower, not avoided
    assert (t["measured on"] == "box, 2 cores").all()


def test_a_class_with_nothing_beyond_the_spread_says_so():
    df = M.parse_benchmarks(_doc({LAB_DELAY: {"one-mutex": (10e6, 11e6, 12e6),
                                              "mutex-per-slot": (5.5e6, 6e6, 12e6)}}))
    row = W.table(df, 2, "box").iloc[0]
    assert row["avoid"] == "none beyond the spread"


def test_more_than_shown_are_counted():
    many = {f"striped-mutex:{k}": (10e6, 10e6 + k, 11e6) for k in range(1, 8)}
    row = W.table(M.parse_benchmarks(_doc({LAB_DELAY: many})), 2, "box").iloc[0]
    assert row["n_best"] == 7 and row["best"].endswith("; and 3 more")


def test_faster_than_the_floor_beyond_the_spread_is_reported_as_disturbed(df):
    assert W.beyond_floor(df).empty and W.floor_summary(df) is None
    broken = M.parse_benchmarks(_doc({
        LAB_DELAY: {"unprotected": (9e6, 10e6, 11e6), "seqlock-per-slot": (20e6, 21e6, 22e6)},
        (50, 1, 0, 4): {"unprotected": (9e6, 10e6, 11e6), "one-ttas-backoff": (20e6, 25e6, 26e6),
                        "one-mutex": (5e6, 6e6, 7e6)}}))
    f = W.beyond_floor(broken)
    assert sorted(f["strategy"]) == ["one-ttas-backoff", "seqlock-per-slot"]
    s = W.floor_summary(broken)
    assert s["rows"] == 2 and s["most"] == "150.0 %"
    assert s["where"] == ("one-ttas-backoff at 50% r, n=1, 0 us, 4 thr; "
                          "seqlock-per-slot at 70% r, n=1000, 10 us, 8 thr")


def test_locks_faster_than_racing_writers_are_explained_and_not_called_disturbed():
    hot = (50, 1, 0, 4)
    df = M.parse_benchmarks(_doc({hot: {
        "unprotected": (90e6, 100e6, 110e6), "unprotected-racy": (9e6, 10e6, 11e6),
        "one-ttas-backoff": (20e6, 25e6, 26e6), "one-mutex": (5e6, 6e6, 7e6)}}))
    assert W.floor_summary(df) is None  # the floor is above every lock
    r = W.racing_summary(df)
    assert (r["rows"], r["settings"], r["hot"], r["less_fair"]) == (1, 1, 1, 1)
    assert r["example"] == ("one-ttas-backoff at 50% reads, n = 1, 4 threads: 2.50x, "
                            "Jain's index 0.97 against 0.99")
    assert r["elsewhere"] == "none"
    # neither store without a lock is ranked or recommended
    assert not set(M.table_ranking(df)["strategy"]) & set(M.NO_LOCK)
    assert W.racing_summary(M.parse_benchmarks(_doc(DATA))) is None


@pytest.mark.parametrize("strategy, why", [
    ("one-clh", "FIFO hand-over"), ("ticketlock-per-slot", "FIFO hand-over"),
    ("spinlock-per-slot", "waiters spin"), ("flat-combining", "one combiner"),
    ("rwlock-per-slot-wpref", "writer preference"), ("one-bravo", "every write revokes"),
    ("one-futex-mutex", "one lock serialises")])
def test_reasons_follow_what_the_strategy_is(strategy, why):
    c = W.WorkloadClass("x", 95, 1000, 0, "32")
    assert W.why_slow(strategy, c, cores=2).startswith(why)


def test_the_report_has_the_table_the_fairness_figure_and_the_timing_figure(df, tmp_path):
    bench = tmp_path / "microbench.json"
    bench.write_text(json.dumps(_doc(DATA)))
    out = tmp_path / "report"
    R.build_report(RESULTS, out, microbench=bench)
    text = (out / "REPORT.md").read_text()
    assert "## Which lock, when" in text
    assert "| threads outnumber cores, hot string | 95% reads, n = 1, 32 threads |" in text
    assert "Sanity check: no strategy is faster than the unprotected store" in text
    assert "What a 2-core machine cannot show" in text
    assert "Fairness and acquire latency at 95% reads, n = 1, delay 0 us, 32 threads" in text
    for name in ("which_lock_fairness", "microbench_timing_cost"):
        assert (out / "figures" / f"{name}.png").is_file(), name
    assert "unprotected store 12.3 times slower" in text
    assert (out / "tables" / "which_lock.csv").is_file()
