"""Tables on tiny synthetic data with exactly known answers."""

import math

import pandas as pd
import pytest

from analysis.load import LoadError, load_lab, load_results, load_trace
from analysis.report import tables as T
from analysis.tests.helpers import FIXTURES

T2 = 4.302652729749464  # t(0.975, 2)


@pytest.fixture
def summary():
    return T.lab_summary(load_lab(FIXTURES / "lab_tiny.csv"))


def test_summary_exact(summary):
    s = summary.set_index(["server", "n"])
    assert list(summary["server"]) == ["main1", "main1", "main2", "main2"]
    assert s.loc[("main1", 10), "mean_s"] == pytest.approx(0.011, abs=1e-15)
    assert s.loc[("main1", 10), "median_s"] == pytest.approx(0.011, abs=1e-15)
    assert s.loc[("main1", 10), "ci_hi_s"] - 0.011 == pytest.approx(T2 * 0.001 / math.sqrt(3))
    assert s.loc[("main1", 100), "mean_s"] == pytest.approx(0.022)
    assert s.loc[("main1", 100), "median_s"] == pytest.approx(0.020)
    assert s.loc[("main1", 100), "std_s"] == pytest.approx(math.sqrt(12e-6))
    assert s.loc[("main2", 10), "ci_lo_s"] == pytest.approx(0.002)   # zero spread
    assert s.loc[("main2", 10), "errors"] == 3


def test_missing_time_value_is_excluded_but_counted(summary):
    r = summary.set_index(["server", "n"]).loc[("main2", 100)]
    assert (r["runs"], r["missing"], r["errors"]) == (3, 1, 1)
    assert r["mean_s"] == pytest.approx(0.002)
    assert r["median_s"] == pytest.approx(0.002)


def test_tables_layout_and_values(summary):
    mean = T.table_mean(summary)
    assert list(mean.index) == ["main1", "main2"] and list(mean.columns) == [10, 100]
    assert mean.loc["main1", 10] == pytest.approx(11.0)      # ms
    assert T.table_median(summary).loc["main1", 100] == pytest.approx(20.0)
    assert T.table_ci95(summary).loc["main1", 10] == pytest.approx(T2 / math.sqrt(3))
    sp = T.table_speedup(summary)
    assert sp.loc["main1", 10] == pytest.approx(1.0)
    assert sp.loc["main2", 10] == pytest.approx(5.5)
    assert sp.loc["main2", 100] == pytest.approx(11.0)
    assert T.table_runs(summary).loc["main2", 100] == 3


def test_markdown_in_seed_report_format(summary):
    md = T.format_markdown(T.table_mean(summary), T.fmt_sci, "Table 1: Mean")
    assert md == ("**Table 1: Mean**\n\n| n | 10 | 100 |\n|---|---:|---:|\n"
                  "| main1 (one mutex) | 1.10E+01 | 2.20E+01 |\n"
                  "| main2 (mutex per string) | 2.00E+00 | 2.00E+00 |\n")
    assert T.fmt_sci(0.0145) == "1.45E-02"
    assert T.fmt_sci(float("nan")) == "-"


def test_csv_and_latex(summary):
    csv = T.format_csv(T.table_speedup(summary))
    assert csv.splitlines()[0] == "server,10,100"
    assert csv.splitlines()[2] == "main2,5.500000000e+00,1.100000000e+01"
    tex = T.format_latex(T.table_mean(summary), T.fmt_sci, "Mean")
    assert r"\begin{tabular}{lrr}" in tex and "main2 (mutex per string) & 2.00E+00" in tex


def test_speedup_without_main1_is_empty(summary):
    assert T.table_speedup(summary[summary["server"] != "main1"]).empty


def test_saturation_knee():
    thr = pd.DataFrame({"server": ["main1"] * 5, "threads": [1, 2, 4, 8, 16],
                        "throughput_rps": [100.0, 180.0, 195.0, 200.0, 150.0],
                        "lat_p95_us": [10.0, 11.0, 20.0, 40.0, 90.0]})
    k = T.saturation_points(thr).iloc[0]
    assert (k["peak_threads"], k["knee_threads"], k["knee_p95_us"]) == (8, 2, 11.0)
    assert k["peak_rps"] == 200.0 and k["p95_at_max_us"] == 90.0


def test_sweep_summary_uses_medians_and_orders_connection():
    res = load_results(FIXTURES / "results_small")
    s = T.sweep_summary(res["sweeps"]["threads"], res["sweep_servers"]["threads"])
    r = s[(s["server"] == "main1") & (s["threads"] == 8)].iloc[0]
    assert r["reps"] == 2
    assert r["throughput_rps"] == pytest.approx(2000 * 1.015)   # median of 2020, 2010
    assert r["throughput_min_rps"] == pytest.approx(2020) and r["lat_p95_us"] == 400
    c = T.sweep_summary(res["sweeps"]["connection"], None)
    assert list(c[c["server"] == "main1"]["connection"]) == ["per-request", "keepalive"]


def test_wait_hold_prefers_trace_then_summary(tmp_path):
    tr = load_trace(FIXTURES / "results_small" / "traces" / "main1_n10.csv")
    tr.insert(0, "n", 10)
    tr.insert(0, "server", "main1")
    res = load_results(FIXTURES / "results_small")
    wh = T.wait_hold(tr, res["lab_servers"])
    traced = wh[wh["source"] == "trace"]
    assert set(zip(traced["server"], traced["n"])) == {("main1", 10)}
    assert len(wh) == 12
    r = wh[(wh["server"] == "main1") & (wh["n"] == 10)].iloc[0]
    assert r["wait_s"] == pytest.approx(tr["wait_ns"].mean() / 1e9)
    s = wh[(wh["server"] == "main2") & (wh["n"] == 10)].iloc[0]
    assert s["source"] == "summary" and s["wait_s"] == pytest.approx(4e-4 * 1.04 * 0.8)


def test_load_errors_name_the_problem(tmp_path):
    p = tmp_path / "lab.csv"
    p.write_text("server,n\nmain1,10\n")
    with pytest.raises(LoadError, match="missing column"):
        load_lab(p)
    text = (FIXTURES / "lab_tiny.csv").read_text()
    p.write_text(text.replace("main1,10,1", "main9,10,1"))
    with pytest.raises(LoadError, match="unknown server.*main9"):
        load_lab(p)
    p.write_text(text.replace("main1,10,2", "main1,10,1"))
    with pytest.raises(LoadError, match="more than once"):
        load_lab(p)
    p.write_text(text.replace("0.011,", "fast,"))
    with pytest.raises(LoadError, match="latency_s"):
        load_lab(p)
    with pytest.raises(LoadError, match="no such file"):
        load_lab(tmp_path / "nope.csv")


def test_client_thread_fairness_reaches_the_sweep_rows_and_the_report(tmp_path):
    """results.fairness of the client's JSON -> fair_* columns of a row -> the least even
    repetition per sweep point -> one sentence; results written without it load as missing."""
    from analysis.launch.procs import client_row
    from analysis.report import observe as O
    doc = {"results": {"ok": 10, "errors": {"total": 0}, "elapsed_s": 1.0,
                       "throughput_rps": 10.0, "latency_us": {"mean": 5.0},
                       "fairness": {"clients": 4, "jain": 0.8, "rsd": 0.5, "max_min": None}}}
    row = client_row(doc)
    assert (row["fair_jain"], row["fair_rsd"], row["fair_max_min"]) == (0.8, 0.5, None)
    assert client_row({**doc, "results": {**doc["results"], "fairness": None}})["fair_jain"] \
        is None
    res = load_results(FIXTURES / "results_small")   # written before the client had it
    sweep = res["sweeps"]["threads"]
    assert sweep["fair_jain"].isna().all()
    assert O.observe_sweep_fairness(T.sweep_summary(sweep), "threads", "threads") == []
    sweep = sweep.assign(fair_jain=[0.5 + 0.01 * i for i in range(len(sweep))])
    s = T.sweep_summary(sweep)
    worst = s.loc[s["fair_jain_min"].idxmin()]
    assert worst["fair_jain_min"] == pytest.approx(0.5)
    (text,) = O.observe_sweep_fairness(s, "threads", "threads")
    assert text.startswith("Fairness across the client threads") and "lowest 0.500" in text
