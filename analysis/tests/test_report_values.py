"""report on hand-edited results: every number it reads is checked. A value that is
negative, not finite, or fractional where a count is meant (n, rep, threads, requests,
ok, ...) is refused with one line naming the file, the row and the column (exit 1), before
any file of the report is written; the same data unedited still makes the report."""

import csv
import gzip
import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis.load import load_results
from analysis.tests.helpers import FIXTURES, cli

SMALL = FIXTURES / "results_small"


def edit_cell(path: Path, row: int, column: str, value: str) -> None:
    """Sets data row `row` (1 = the first after the header) of `column` to `value`."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    rows[row][rows[0].index(column)] = value
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)


def report(results: Path, out: Path):
    return cli("report", "--results", results, "--out", out, "--microbench", "none",
               timeout=300)


@pytest.mark.parametrize("file,row,column,value,problem", [
    ("lab.csv", 3, "latency_s", "-0.154", "is negative"),
    ("lab.csv", 2, "latency_s", "inf", "is not a finite number"),
    ("lab.csv", 5, "latency_s", "nan", "is not a finite number"),
    ("lab.csv", 4, "n", "10.5", "is not a whole number"),
    ("lab.csv", 1, "throughput_rps", "-3000.0", "is negative"),
    ("lab.csv", 6, "requests", "1e300", None),     # whole, finite: too big for a count
    ("lab.csv", 2, "lat_p99_us", "-inf", "is not a finite number"),
    ("sweep_threads.csv", 2, "threads", "4.5", "is not a whole number"),
    ("sweep_threads.csv", 1, "elapsed_s", "-1", "is negative"),
    ("lab_servers.csv", 1, "summary_mean_wait_s", "-0.5", "is negative"),
    ("traces/main2_n10.csv", 7, "wait_ns", "-40", "is negative"),
])
def test_a_bad_number_is_one_line_naming_file_row_and_column(tmp_path, file, row, column,
                                                              value, problem):
    d = tmp_path / "r"
    shutil.copytree(SMALL, d)
    edit_cell(d / file, row, column, value)
    r = report(d, tmp_path / "out")
    assert r.returncode == 1, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stderr, err
    assert "internal error" not in err[0], err
    where = f"{d / file}: row {row} (line {row + 1}), column {column}: '{value}'"
    assert where in err[0], err
    if problem:
        assert problem in err[0], err
    assert not (tmp_path / "out" / "REPORT.md").exists()


@pytest.mark.slow  # renders a whole report
def test_exit_codes_may_be_negative_and_the_unedited_copy_still_reports(tmp_path):
    """A server killed by SIGTERM has exit status -15 in *_servers.csv: not refused."""
    d = tmp_path / "r"
    shutil.copytree(SMALL, d)
    edit_cell(d / "lab_servers.csv", 1, "exit_code", "-15")
    r = report(d, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "REPORT.md").is_file()


def _gzip(path: Path, keep: bool = False) -> None:
    """path -> path.gz as `gzip -n -9` makes it (no name, no date)."""
    path.with_name(path.name + ".gz").write_bytes(
        gzip.compress(path.read_bytes(), compresslevel=9, mtime=0))
    if not keep:
        path.unlink()


def test_gzipped_raw_files_load_as_the_plain_ones(tmp_path):
    """Any raw data file may be stored as NAME.gz (load.raw_path): the loaded frames are
    the same; NAME wins when both are there."""
    d = tmp_path / "r"
    shutil.copytree(SMALL, d)
    for f in ("lab.csv", "lab_servers.csv", "sweep_threads.csv", "traces/main2_n10.csv"):
        _gzip(d / f)
    _gzip(d / "traces" / "main1_n10.csv", keep=True)
    plain, packed = load_results(SMALL), load_results(d)
    for key in ("lab", "lab_servers", "traces"):
        pd.testing.assert_frame_equal(packed[key], plain[key])
    assert packed["sweeps"].keys() == plain["sweeps"].keys()
    for kind, frame in plain["sweeps"].items():
        pd.testing.assert_frame_equal(packed["sweeps"][kind], frame)


def test_a_damaged_gzipped_file_is_one_line(tmp_path):
    d = tmp_path / "r"
    shutil.copytree(SMALL, d)
    _gzip(d / "lab.csv")
    gz = d / "lab.csv.gz"
    gz.write_bytes(gz.read_bytes()[:-30])
    r = report(d, tmp_path / "out")
    assert r.returncode == 1, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and f"{gz}: not a readable CSV" in err[0], err
    assert not (tmp_path / "out" / "REPORT.md").exists()
