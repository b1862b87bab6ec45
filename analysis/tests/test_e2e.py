"""The runner end to end against the real build (build/release, or $LOCKBENCH_BIN_DIR):
`all --quick`, then the report rebuilt byte for byte, then resume. Skipped, with the
reason, when the binaries are not built (the README's test command builds them first)."""

import csv
import filecmp
import json

import pytest

from analysis.tests.helpers import RELEASE, cli, real_binaries_missing

pytestmark = [pytest.mark.slow, pytest.mark.skipif(real_binaries_missing() is not None,
                                                    reason=str(real_binaries_missing()))]


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    res = tmp_path_factory.mktemp("e2e") / "results"
    r = cli("all", "--quick", "--no-progress", "--bin-dir", RELEASE, "--results-dir", res,
            timeout=900)
    assert r.returncode == 0, r.stderr
    return res


def test_quick_lab_results(quick):
    lab = rows(quick / "lab.csv")
    assert len(lab) == 4 * 3 * 5
    assert {(x["server"], x["n"]) for x in lab} == {
        (s, n) for s in ("main1", "main2", "main3", "main4") for n in ("10", "100", "1000")}
    assert all(x["time_lines"] == "1" and float(x["latency_s"]) > 0 for x in lab)
    assert sum(int(x["errors"]) for x in lab) == 0
    servers = rows(quick / "lab_servers.csv")
    assert len(servers) == 12 and all(x["exit_code"] == "0" for x in servers)
    assert all(float(x["summary_requests"]) >= 5000 for x in servers)
    assert len(list((quick / "traces").glob("main*_n*.csv"))) == 12
    meta = json.loads((quick / "metadata.json").read_text())
    assert meta["build"].get("build_type") and meta["client_version"].startswith("lockbench")


def test_quick_sweeps(quick):
    for kind in ("threads", "read-ratio", "n", "delay", "connection"):
        sw = rows(quick / f"sweep_{kind}.csv")
        assert sw and all(float(x["throughput_rps"]) > 0 for x in sw), kind


def test_quick_report_and_rebuild_is_identical(quick, tmp_path):
    out = quick / "report"
    md = (out / "REPORT.md").read_text()
    for t in ("Table 1: Mean", "Table 2: Median"):
        assert t in md
    assert "| n | 10 | 100 | 1000 |" in md
    figures = sorted(p.stem for p in (out / "figures").glob("*.png"))
    assert len(figures) >= 5 and not list((out / "figures").glob("*.svg"))  # SVG: --svg
    r = cli("report", "--results", quick, "--out", tmp_path / "again")
    assert r.returncode == 0, r.stderr
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    _, mismatch, errors = filecmp.cmpfiles(out, tmp_path / "again", files, shallow=False)
    assert not mismatch and not errors


def test_resume_with_real_servers(tmp_path):
    res = tmp_path / "r"
    args = ["--servers", "main4", "--n", "10", "--runs", "3", "--trace-limit", "0",
            "--no-progress", "--bin-dir", RELEASE]
    assert cli("lab", *args, "--results-dir", res).returncode == 0
    lines = (res / "lab.csv").read_text().splitlines(keepends=True)
    (res / "lab.csv").write_text("".join(lines[:-1]))
    r = cli("lab", "--resume", res, "--no-progress", "--bin-dir", RELEASE)
    assert r.returncode == 0, r.stderr
    assert [x["rep"] for x in rows(res / "lab.csv")] == ["1", "2", "3"]
