"""`./lockbench demo`'s program: each lab server started through the one launcher on a free
port pair, our client's kit workload against it, and the timing line it wrote."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "build" / "release"

pytestmark = pytest.mark.slow


def test_each_server_serves_the_kit_workload_and_writes_its_timing_line():
    p = subprocess.run([sys.executable, "-m", "analysis.runner.demo", str(BIN)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = re.findall(r"^(main[1-4]): timing file line: (\S+)$", p.stdout, re.M)
    assert [name for name, _ in lines] == ["main1", "main2", "main3", "main4"], p.stdout
    assert all(0 < float(v) < 1 for _, v in lines), lines


def test_a_bin_dir_without_the_servers_is_refused_with_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "analysis.runner.demo", str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "usage:" in p.stderr
