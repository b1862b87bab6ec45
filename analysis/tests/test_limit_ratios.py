"""analysis/report/limit_ratios.py: ratios are paired by round, targets judged on the median."""

import json

import pandas as pd
import pytest

from analysis.report import TEMPLATE, write_perf_section
from analysis.report import limit_ratios as perf
from analysis.report.sections import performance as section
from analysis.report.sections.base import Prose

PROSE = Prose(TEMPLATE.read_text())


def _targets(runs) -> dict:
    """The targets by the name the report gives them."""
    return {section.target_name(t, PROSE): t for t in perf.targets(runs)}


def _detail(t) -> str:
    return section.target_detail(t, PROSE)


def _row(rnd, server, rps, *, kind="throughput", server_kind="lockbench", io="default",
         client="loadgen", mode="keepalive", delay_us=0, timing="on", **extra):
    return {"round": rnd, "kind": kind, "server": server, "server_kind": server_kind, "io": io,
            "client": client, "mode": mode, "delay_us": delay_us, "timing": timing,
            "delay_mode": extra.pop("delay_mode", None), "workload": extra.pop("workload", None),
            "rps": rps, **extra}


def _runs():
    rows = []
    # Round 0 is a slow minute (everything halves): ratios must not move.
    for rnd, f in ((0, 0.5), (1, 1.0), (2, 1.0)):
        for mode, m4, m1, tpc, epoll in (("keepalive", 100, 90, 110, 50),
                                          ("per-request", 13, 20, 13, 24)):
            rows.append(_row(rnd, "main4", m4 * f, mode=mode))
            rows.append(_row(rnd, "main1", m1 * f, mode=mode))
            rows.append(_row(rnd, "nullsrv_tpc", tpc * f, server_kind="null", io=None, mode=mode))
            rows.append(_row(rnd, "nullsrv_epoll", epoll * f, server_kind="null", io=None,
                             mode=mode, client_cpu_us_per_req=4.0 * (1 + rnd)))
            rows.append(_row(rnd, "nullsrv_epoll", epoll * f * 1.1, server_kind="null", io=None,
                             client="ours", mode=mode, client_cpu_us_per_req=3.0 * (1 + rnd)))
        rows.append(_row(rnd, "redis-get", 60 * f, server_kind="redis", io=None,
                         client="redis-benchmark"))
        rows.append(_row(rnd, "redis-set", 70 * f, server_kind="redis", io=None,
                         client="redis-benchmark"))
        for k, (t, v, c) in enumerate((("on", 100, 10.5), ("off", 101, 10.0),
                                       ("off", 101, 10.0), ("on", 100, 10.5))):
            rows.append(_row(rnd, "main4", v * f, kind="timing", timing=t, workload=f"abba{k}",
                             server_cpu_us_per_req=c))
        for wl, lat in (("kit", 30e-6), ("uncontended", 20e-6)):
            rows.append(_row(rnd, "main4", None, kind="lab", client="ours", mode="per-request",
                             delay_us=10, delay_mode="precise", workload=wl,
                             summary_mean_latency_s=lat, summary_mean_wait_s=1e-6,
                             summary_mean_hold_s=15e-6, summary_mean_delay_s=14e-6,
                             summary_mean_queue_s=0.0, summary_mean_cpu_wait_s=2e-6,
                             summary_mean_delay_slept_us=10.5))
    return pd.DataFrame(rows)


def test_ratio_pairs_rounds_and_drops_unpaired():
    num = pd.Series({0: 10.0, 1: 20.0, 2: 30.0})
    den = pd.Series({0: 10.0, 1: 10.0})
    r = perf.ratio(num, den)
    assert (r.rounds, r.median, r.low, r.high) == (2, 1.5, 1.0, 2.0)
    assert perf.ratio(num, pd.Series(dtype="float64")).rounds == 0
    assert perf.ratio(num, pd.Series(dtype="float64")).text() == "n/a"


def test_targets_use_same_round_ratios():
    ts = _targets(_runs())
    per_req = ts["one connection per request, delay 0: best configuration / nullsrv_epoll"]
    assert per_req.ratio.median == pytest.approx(20 / 24) and per_req.met is False
    assert _detail(per_req) == "best: main1"
    tpc = ts["keep-alive, delay 0: main4 / nullsrv_tpc -k"]
    assert tpc.ratio.median == pytest.approx(100 / 110) and tpc.ratio.low == tpc.ratio.high
    assert tpc.met is False
    get = ts["keep-alive, delay 0: main4 / Redis GET (redis-benchmark)"]
    assert get.ratio.median == pytest.approx(100 / 60) and get.met is True
    lab = ts["lab metric, precise delay, main4 n=1000 kit workload / uncontended"]
    assert lab.ratio.median == pytest.approx(1.5) and lab.met is False
    timing = ts["timing cost at 100 connections: main4 keep-alive server CPU per request, "
                "timing on / --no-timing"]
    assert timing.ratio.median == pytest.approx(1.05) and timing.met is False
    assert "1.01x" in _detail(timing)  # the throughput ratio, shown alongside
    ours = ts["our client / loadgen against nullsrv_epoll, keepalive"]
    assert ours.ratio.median == pytest.approx(1.1) and ours.met is True
    # The client's own CPU per request beside loadgen's: medians, and the ratio by round.
    assert _detail(ours) == ("client CPU per request: ours 6.0 us, loadgen 8.0 us, "
                           "ours / loadgen **0.75x** (0.75-0.75)")


def test_lab_target_takes_the_io_model_with_the_best_ratio():
    runs = _runs()
    epoll = runs[runs["kind"] == "lab"].copy()
    epoll["io"] = "epoll"
    epoll.loc[epoll["workload"] == "kit", "summary_mean_latency_s"] = 22e-6
    ts = _targets(pd.concat([runs, epoll], ignore_index=True))
    lab = ts["lab metric, precise delay, main4 n=1000 kit workload / uncontended"]
    assert lab.ratio.median == pytest.approx(1.1) and lab.met is True
    assert _detail(lab).startswith("best: main4 (epoll); kit 22 us vs uncontended 20 us")
    split = perf.split_table(pd.concat([runs, epoll], ignore_index=True))
    assert list(split["server"]) == ["main4", "main4", "main4 (epoll)", "main4 (epoll)"]


def test_missing_measurement_is_not_measured_not_failed():
    runs = _runs()
    runs = runs[~runs["server"].str.startswith("redis")]
    ts = _targets(runs)
    t = ts["keep-alive, delay 0: main4 / Redis SET (redis-benchmark)"]
    assert t.met is None and t.ratio.rounds == 0


def test_tables_and_section(tmp_path):
    runs = _runs()
    table = perf.ratio_table(runs)
    row = table[(table["server"] == "main4") & (table["mode"] == "keepalive")].iloc[0]
    assert row["/ nullsrv_tpc"].median == pytest.approx(100 / 110)
    split = perf.split_table(runs)
    assert list(split["workload"]) == ["kit", "uncontended"]
    assert split.iloc[0]["lab metric"] == pytest.approx(30.0)
    meta = {"cpu": "test cpu", "cores": 2, "kernel": "6.x", "started_utc": "now",
            "duration_s": 3, "loadavg_start": "1 1 1"}
    raw = tmp_path / "raw"
    raw.mkdir()
    runs.to_csv(raw / "runs.csv", index=False)
    (raw / "meta.json").write_text(json.dumps(meta))
    paths = write_perf_section(raw, tmp_path / "out")
    md = (tmp_path / "out" / "performance.md").read_text()
    assert md.startswith("## Performance")
    assert "\n### Targets\n" in md and "How to read a target" in md  # the template's wording
    assert "**not met**" in md and "**met**" in md and "test cpu" in md
    assert "2 cores" in md and "2-core" not in md     # the machine from meta, not the code
    assert "(figures/perf_throughput.png)" in md
    assert (tmp_path / "out" / "figures" / "perf_throughput.png").stat().st_size > 0
    assert [x.relative_to(tmp_path / "out").as_posix() for x in paths] == [
        "figures/perf_throughput.png", "performance.md", "tables/perf_ratios.csv",
        "tables/perf_split.csv"]

