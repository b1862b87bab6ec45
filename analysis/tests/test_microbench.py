"""Tests of analysis.microbench over a tiny hand-made kv_bench JSON fixture."""

import json

import pytest

from analysis import figures as F
from analysis import microbench as M
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
    assert "cheapest strategy, seqlock-per-slot, takes 1.2x" in text
    assert "dearest, one-mutex, 1.5x" in text
    assert "one-rwlock-wpref" in text
    assert any(s.startswith("One hot string") and "one-mutex suffers most" in s for s in f)
    # 1 thread, n = 1000, no delay: unprotected ns/op median 50 (reads 95, 70) and 62.5 (50)
    assert any(s.startswith("Fixed cost") and "(10 ns per read here), about 30 ns" in s
               for s in f)
    assert not any(s.startswith("Noise warning") for s in f)
