"""Tests of analysis.report.microbench_tables over a tiny hand-made kv_bench JSON fixture."""

import gzip
import json

import pandas as pd
import pytest

from analysis.report import figures as F
from analysis.report import microbench_tables as M
from analysis.tests.helpers import HERE

FIXTURE = HERE / "fixtures" / "microbench_tiny.json"


@pytest.fixture
def df():
    return M.load_benchmarks(FIXTURE)


def test_load_parses_names_and_ignores_aggregates(df):
    store = df[df["family"] == "Store"]
    assert set(store["strategy"]) == {"unprotected", "one-mutex", "seqlock-per-slot"}
    assert len(store) == 3 * 5 * 3
    row = store[(store["strategy"] == "one-mutex") & (store["read_pct"] == 95)
                & (store["n"] == 1000) & (store["delay_us"] == 0) & (store["threads"] == 1)]
    assert len(row) == 1
    assert row["ops_per_s"].iloc[0] == pytest.approx(2e7 / 1.5)  # not the aggregate's 1.0
    starv = df[df["family"] == "WriterStarvation"]
    assert set(starv["readers"]) == {2, 8}
    assert starv["writer_wait_p99_us"].notna().all()


def test_load_gzipped_json_gives_the_same_frame(tmp_path, df):
    """results/microbench/microbench.json is committed as microbench.json.gz: the gzipped
    file, named as it is or by its plain name (load.raw_path), loads as the JSON does; when
    both are there the plain one is read."""
    gz = tmp_path / "microbench_tiny.json.gz"
    gz.write_bytes(gzip.compress(FIXTURE.read_bytes(), compresslevel=9, mtime=0))
    pd.testing.assert_frame_equal(M.load_benchmarks(gz), df)
    plain = tmp_path / "microbench_tiny.json"
    pd.testing.assert_frame_equal(M.load_benchmarks(plain), df)
    doc = json.loads(FIXTURE.read_text())
    doc["benchmarks"] = [b for b in doc["benchmarks"] if b["name"].startswith("Store/")]
    plain.write_text(json.dumps(doc))
    assert set(M.load_benchmarks(plain)["family"]) == {"Store"}
    gz.write_bytes(gzip.compress(FIXTURE.read_bytes())[:-20])  # cut short
    with pytest.raises(OSError, match="damaged gzip data"):
        M.load_benchmarks(gz)


def test_load_rejects_non_benchmark_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"hello": 1}))
    with pytest.raises(M.MicrobenchError):
        M.load_benchmarks(p)


def test_load_takes_median_of_repetitions(tmp_path):
    doc = json.loads(FIXTURE.read_text())
    first = doc["benchmarks"][0]
    reps = []
    for v in (1.0, 100.0, 10.0):
        b = dict(first)
        b["ops_per_s"] = v
        reps.append(b)
    doc["benchmarks"] = reps
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    d = M.load_benchmarks(p)
    assert len(d) == 1 and d["ops_per_s"].iloc[0] == 10.0


def test_ranking_orders_and_compares_to_baseline(df):
    r = M.table_ranking(df)
    assert "unprotected" not in set(r["strategy"])
    s = r[(r["read_pct"] == 95) & (r["n"] == 1000) & (r["delay_us"] == 0) & (r["threads"] == 2)]
    assert list(s["strategy"]) == ["seqlock-per-slot", "one-mutex"]
    assert list(s["rank"]) == [1, 2]
    assert s["of_best"].iloc[0] == 1.0
    # seqlock: (2e7/1.2*1.9) / (2e7*2)
    assert s["vs_unprotected"].iloc[0] == pytest.approx(1.9 / 1.2 / 2)
    wide = M.table_ranking_wide(r, M.ranking_settings(2))
    assert list(wide.index) == ["one-mutex", "seqlock-per-slot"]
    assert wide.iloc[0, 0].startswith("2 (")


def test_overhead_is_ratio_of_ns_per_op(df):
    o = M.table_overhead(df, cores=2)
    assert "unprotected" not in o.index
    assert o.loc["one-mutex", "95% reads, 1 thr"] == pytest.approx(1.5)
    assert o.loc["seqlock-per-slot", "95% reads, 1 thr"] == pytest.approx(1.2)


def test_plot_returns_one_line_per_strategy(df):
    fig, ax = F.new_figure()
    lines = F.plot_ops_vs_threads(ax, M.setting_runs(df, 95, 1000, 0), "t", 2)
    assert [ln.get_label() for ln in lines] == ["unprotected", "one-mutex", "seqlock-per-slot"]
    assert list(lines[1].get_xdata()) == [1, 2, 32]
    assert ax.get_xlabel() == "threads (machine has 2 cores)"
    bars = F.plot_writer_wait(ax, M.starvation_runs(df, 10), "t")
    assert len(bars) == 2


def test_findings_are_computed_from_the_data(df):
    f = M.findings(df, 2)
    text = "\n".join(f)
    # The fixture ran each setting once: said, and a +-25% band assumed around each value.
    assert f[0].startswith("Each setting ran once: no spread is known")
    assert "cheapest seqlock-per-slot 1.20x (0.72-2.00x), dearest one-mutex 1.50x" in text
    assert "so even these two are a tie" in text
    assert "one-rwlock-wpref" in text
    assert any(s.startswith("One hot string") and "one-mutex falls beyond the spread" in s
               for s in f)
    # 1 thread, n = 1000, no delay: unprotected ns/op median 50 (reads 95, 70) and 62.5 (50)
    assert any(s.startswith("Fixed cost") and "(10 ns per read here), about 30 ns" in s
               for s in f)


def _repeated(values: dict) -> dict:
    """A kv_bench document with one Store setting (95% reads, n = 1000, no delay, 2
    threads) and the given ops/s repetitions per strategy."""
    doc = json.loads(FIXTURE.read_text())
    runs = []
    for name, reps in values.items():
        for i, v in enumerate(reps):
            run = (f"Store/{name}/s:1/read:95/n:1000/delay_us:0/threads:2/iterations:1/"
                   "manual_time")
            runs.append({"name": run, "run_name": run, "run_type": "iteration",
                         "repetition_index": i, "ops_per_s": v, "ns_per_op": 2e9 / v})
    return {"context": doc["context"], "benchmarks": runs}


def test_repetitions_give_the_spread_and_overlaps_are_ties():
    df = M.parse_benchmarks(_repeated({
        "unprotected": (10e6, 20e6, 30e6),
        "seqlock-per-slot": (25e6, 28e6, 29e6),   # median above the floor, inside its spread
        "one-mutex": (18e6, 22e6, 40e6),          # overlaps the leader: tied for first
        "one-rwlock": (5e6, 6e6, 7e6)}))          # below the leader's range: ranked after
    row = df[df["strategy"] == "seqlock-per-slot"].iloc[0]
    assert (row["ops_per_s"], row["ops_per_s_lo"], row["ops_per_s_hi"], row["reps"]) == (
        28e6, 25e6, 29e6, 3)
    r = M.table_ranking(df).set_index("strategy")
    assert r.loc["seqlock-per-slot", "rank"] == 1 and r.loc["one-mutex", "rank"] == 1
    assert r.loc["seqlock-per-slot", "tied"] and not r.loc["one-rwlock", "tied"]
    assert r.loc["one-rwlock", "rank"] == 3
    assert r.loc["seqlock-per-slot", "vs_unprotected"] == pytest.approx(1.4)
    assert r.loc["seqlock-per-slot", "vs_unprotected_lo"] == pytest.approx(25 / 30)
    text = "\n".join(M.findings(df, 2))
    assert "Spread: the 3 repetitions" in text
    assert "tied with 1 other(s) whose ranges overlap it (one-mutex)" in text
    assert "against the unprotected store 1.40x (0.83-2.90x), a tie" in text
    assert "all of them lie within the spread" in text
    wide = M.table_ranking_wide(M.table_ranking(df), M.ranking_settings(2))
    assert wide.loc["one-mutex"].iloc[0] == "1= (22; 18-40)"
    assert wide.loc["one-rwlock"].iloc[0] == "3 (6; 5-7)"


def test_faster_than_no_lock_beyond_the_spread_is_called_a_disturbed_measurement():
    df = M.parse_benchmarks(_repeated({"unprotected": (9e6, 10e6, 11e6),
                                       "seqlock-per-slot": (20e6, 21e6, 22e6),
                                       "one-mutex": (1e6, 2e6, 3e6)}))
    text = "\n".join(M.findings(df, 2))
    assert "faster beyond the spread: a disturbed measurement" in text
    assert "1 lie beyond the spread (seqlock-per-slot)" in text


def test_the_racing_store_is_compared_with_not_ranked_and_shown_against_the_floor():
    df = M.parse_benchmarks(_repeated({"unprotected": (90e6, 100e6, 110e6),
                                       "unprotected-racy": (9e6, 10e6, 11e6),
                                       "one-ttas-backoff": (20e6, 25e6, 26e6)}))
    r = M.table_ranking(df).set_index("strategy")
    assert list(r.index) == ["one-ttas-backoff"]
    assert r.loc["one-ttas-backoff", "vs_racy"] == pytest.approx(2.5)
    assert r.loc["one-ttas-backoff", "vs_racy_lo"] == pytest.approx(20 / 11)
    assert r.loc["one-ttas-backoff", "vs_unprotected"] == pytest.approx(0.25)
    assert "none of 1 strategy-setting medians measured faster than the unprotected store" in (
        "\n".join(M.findings(df, 2)))
    ranked = M.table_ranking(df, include_baseline=True)
    assert set(ranked["strategy"]) == {"unprotected", "unprotected-racy", "one-ttas-backoff"}


def test_fairness_math():
    even = M.fairness([100, 100, 100, 100])
    assert even == {"jain": 1.0, "rsd": 0.0, "max_min": 1.0}
    one = M.fairness([400, 0, 0, 0])  # one thread did everything: Jain = 1/n
    assert one["jain"] == pytest.approx(0.25)
    assert one["max_min"] == 400.0  # a zero min counts as 1
    assert one["rsd"] == pytest.approx((3 * 100**2 + 300**2) ** 0.5 / 2 / 100)
    two = M.fairness([1, 3])  # (4)^2 / (2 * 10) = 0.8; sd 1, mean 2
    assert two == {"jain": pytest.approx(0.8), "rsd": pytest.approx(0.5), "max_min": 3.0}
    assert M.fairness([])["jain"] == 0.0


def _run(name, **counters):
    return {"name": name, "run_name": name, "run_type": "iteration", **counters}


def test_fairness_and_timing_counters_parsed(tmp_path):
    store = "Store/one-mutex/s:1/read:95/n:1000/delay_us:0/threads:2"
    doc = {"benchmarks": [
        _run(store, ops_per_s=4e7, ns_per_op=50, fair_jain=0.96, fair_rsd=0.2,
             fair_max_min=1.5, wait_p50_ns=29, wait_p99_ns=34, wait_p999_ns=42,
             wait_samples=6000),
        _run(store, ops_per_s=5e7, ns_per_op=40, fair_jain=0.98, fair_rsd=0.1,
             fair_max_min=1.2, wait_p50_ns=31, wait_p99_ns=36, wait_p999_ns=44,
             wait_samples=7000),
        _run("StoreTiming/unprotected/timing:timed", ns_per_op=93.7),
        _run("StoreTiming/unprotected/timing:untimed", ns_per_op=7.6),
        _run("StoreTiming/unprotected/timing:sampled", ns_per_op=9.1),
        _run("TimerCost/rdtsc", ns_per_op=15.1)]}
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    df = M.load_benchmarks(p)
    f = M.table_fairness(df, threads=2)
    assert len(f) == 1
    assert f["fair_jain"].iloc[0] == pytest.approx(0.97)  # median of the two repetitions
    assert f["wait_p99_ns"].iloc[0] == pytest.approx(35)
    t = M.table_timing(df).set_index(["what", "timing"])
    assert t.loc[("unprotected", "timed"), "x_untimed"] == pytest.approx(93.7 / 7.6)
    assert t.loc[("unprotected", "untimed"), "x_untimed"] == pytest.approx(1.0)
    assert t.loc[("rdtsc", ""), "ns_per_op"] == pytest.approx(15.1)


def test_old_json_has_no_fairness(df):
    assert df["fair_jain"].isna().all()
    assert M.table_fairness(df).empty
    assert M.table_timing(df).empty
