"""report: files made, non-empty, and byte-identical when rebuilt from the same raw data."""

import filecmp
import shutil

import pytest

from analysis.report import build_report
from analysis.tests.helpers import FIXTURES, cli

SMALL = FIXTURES / "results_small"
FIGURES = ["plot_mean_latency", "plot_latency_distribution", "plot_wait_hold",
           "plot_latency_cdf", "plot_saturation", "plot_latency_vs_n",
           "plot_sweep_read_ratio", "plot_sweep_delay", "plot_sweep_connection"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "a"
    build_report(SMALL, out)
    return out


def test_report_writes_tables_figures_and_text(built):
    tmp_path = built
    for name in FIGURES:
        for ext in ("png", "svg"):
            p = tmp_path / "figures" / f"{name}.{ext}"
            assert p.stat().st_size > 1000, p
    for t in ("table_mean", "table_median", "table_ci95", "table_speedup"):
        for ext in ("md", "csv", "tex"):
            assert (tmp_path / "tables" / f"{t}.{ext}").stat().st_size > 0
    md = (tmp_path / "REPORT.md").read_text()
    assert "| main1 (one mutex) | 8.32E+00 | 8.32E+00 | 8.32E+00 |" in md
    assert "| n | 10 | 100 | 1000 |" in md
    assert "Table 2: Median" in md and md.count("![") == len(FIGURES)
    assert "Synthetic CPU, 2 logical cores" in md


def _same_files(a, b, skip=()):
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file() and p.name not in skip)
    _, mismatch, errors = filecmp.cmpfiles(a, b, files, shallow=False)
    return len(files), mismatch + errors


def test_report_is_reproducible_byte_for_byte(built, tmp_path):
    a, b = built, tmp_path / "b"
    build_report(SMALL, b)
    count, bad = _same_files(a, b)
    assert count > 30 and not bad, bad
    # The same raw data elsewhere: tables and figures identical; REPORT.md differs only in
    # the line naming the results directory.
    copy = tmp_path / "copy" / SMALL.name
    shutil.copytree(SMALL, copy)
    build_report(copy, tmp_path / "c")
    count, bad = _same_files(a, tmp_path / "c", skip=("REPORT.md",))
    assert not bad, bad
    diff = [x for x, y in zip((a / "REPORT.md").read_text().splitlines(),
                              (tmp_path / "c" / "REPORT.md").read_text().splitlines()) if x != y]
    assert len(diff) == 1 and "raw results in" in diff[0]


def test_report_cli_and_bad_input(tmp_path):
    d = tmp_path / "lab_only"
    d.mkdir()
    shutil.copy(SMALL / "lab.csv", d)
    r = cli("report", "--results", d, "--out", tmp_path / "out", "--microbench", "none")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "REPORT.md").exists()
    r = cli("report", "--results", tmp_path / "nothing", "--out", tmp_path / "o2")
    assert r.returncode == 2 and "not a directory" in r.stderr  # a bad path: exit 2 (issue 10)
    assert len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    r = cli("report", "--results", tmp_path / "empty", "--out", tmp_path / "o3")
    assert r.returncode == 1 and "nothing to report" in r.stderr


def test_report_with_lab_only(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    shutil.copy(SMALL / "lab.csv", d)
    build_report(d, tmp_path / "out")
    md = (tmp_path / "out" / "REPORT.md").read_text()
    assert "Table 1" in md and "Sweeps" not in md
    figures = sorted(p.name for p in (tmp_path / "out" / "figures").glob("*.png"))
    assert figures == ["plot_latency_distribution.png", "plot_latency_vs_n.png",
                       "plot_mean_latency.png"]


def test_report_with_microbench_fixture_is_reproducible(tmp_path):
    mb = FIXTURES / "microbench_tiny.json"
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        r = cli("report", "--results", SMALL, "--out", out, "--microbench", mb)
        assert r.returncode == 0, r.stderr
    md = (a / "REPORT.md").read_text()
    assert "| Microbenchmarks | `analysis/tests/fixtures/microbench_tiny.json` |" in md
    assert md.index("## Microbenchmarks") > md.index("## Sweeps")
    assert md.index("## Microbenchmarks") < md.index("## Method")
    assert list((a / "figures").glob("microbench_*.png"))
    count, bad = _same_files(a, b)
    assert count > 30 and not bad, bad
    r = cli("report", "--results", SMALL, "--out", tmp_path / "c", "--microbench", "none")
    assert r.returncode == 0 and "| Microbenchmarks | not included |" in (
        tmp_path / "c" / "REPORT.md").read_text()
    assert not list((tmp_path / "c" / "figures").glob("microbench_*"))
    r = cli("report", "--results", SMALL, "--out", tmp_path / "d", "--microbench",
            tmp_path / "missing.json")
    assert r.returncode == 2 and "argument --microbench:" in r.stderr  # exit 2 (issue 10)
