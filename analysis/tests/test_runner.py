"""The runner against stand-in binaries (fakes/): rows, resume, interruption, bad input.
The same runner against the real build is in test_e2e.py."""

import csv
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.procs import parse_summary, twin
from analysis.tests.helpers import REPO, cli

LAB = ["--servers", "main1,main2", "--n", "10,100", "--runs", "2", "--no-progress"]


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def server_pids(results: Path) -> list:
    pids = []
    for log in (results / "logs").glob("*.log"):
        pids += [int(l.split("=")[1]) for l in log.read_text().splitlines()
                 if l.startswith("# pid=")]
    return pids


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_port_helpers():
    assert twin(3000) == 47115 and twin(twin(12345)) == 12345
    s = parse_summary("main1: summary requests=1000 errors=0 mean_latency_s=8.5e-03 x=y")
    assert s == {"requests": 1000.0, "errors": 0.0, "mean_latency_s": 8.5e-3, "x": "y"}


def test_lab_writes_one_row_per_run_and_stops_servers(fake_bin, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", *LAB, "--bin-dir", fake_bin, "--results-dir", res)
    assert r.returncode == 0, r.stderr
    lab = rows(res / "lab.csv")
    assert [(x["server"], x["n"], x["rep"]) for x in lab] == [
        (s, n, k) for s in ("main1", "main2") for n in ("10", "100") for k in ("1", "2")]
    assert all(x["time_lines"] == "1" and float(x["latency_s"]) > 0 for x in lab)
    assert all(x["git_sha"] and x["ok"] == "1000" for x in lab)
    srv = rows(res / "lab_servers.csv")
    assert len(srv) == 4 and all(x["exit_code"] == "0" and x["summary_requests"] == "2000.0"
                                 for x in srv)
    assert sorted(p.name for p in (res / "traces").iterdir()) == [
        "main1_n10.csv", "main1_n100.csv", "main2_n10.csv", "main2_n100.csv"]
    assert (res / "time" / "time_s1_n10").read_text().count("\n") == 2
    assert len((res / "lab_client.jsonl").read_text().splitlines()) == 8
    pids = server_pids(res)
    assert len(pids) == 4 and not any(alive(p) for p in pids)
    import json
    meta = json.loads((res / "metadata.json").read_text())
    assert meta["parameters"]["lab"]["runs"] == 2 and meta["machine"]["cores"] >= 1
    assert meta["client_version"] == "lockbench-client fake"


def test_resume_skips_completed_runs(fake_bin, tmp_path):
    res = tmp_path / "r"
    assert cli("lab", *LAB, "--bin-dir", fake_bin, "--results-dir", res).returncode == 0
    # Simulate a run cut short: drop the last three rows, the last one half written.
    lines = (res / "lab.csv").read_text().splitlines(keepends=True)
    (res / "lab.csv").write_text("".join(lines[:-3]) + lines[-3][:20])
    r = cli("lab", "--resume", res, "--bin-dir", fake_bin, "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "3 lab runs and 0 sweep runs to do" in r.stderr
    lab = rows(res / "lab.csv")
    keys = [(x["server"], x["n"], x["rep"]) for x in lab]
    assert len(keys) == 8 and len(set(keys)) == 8
    r = cli("lab", "--resume", res, "--bin-dir", fake_bin, "--no-progress")
    assert r.returncode == 0 and "nothing to run" in r.stderr
    import json
    assert len(json.loads((res / "metadata.json").read_text())["sessions"]) == 3


def test_interrupt_keeps_results_and_stops_server(fake_bin, tmp_path):
    res = tmp_path / "r"
    p = subprocess.Popen([sys.executable, "-m", "analysis", "lab", "--servers", "main1",
                          "--n", "10", "--runs", "50", "--no-progress", "--bin-dir", str(fake_bin),
                          "--results-dir", str(res)], cwd=REPO, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (res / "lab.csv").exists() and len(rows(res / "lab.csv")) >= 2:
            break
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert "interrupted" in err and f"--resume {res}" in err
    done = len(rows(res / "lab.csv"))
    assert 2 <= done < 50
    pids = server_pids(res)
    assert pids and not any(alive(x) for x in pids)
    r = cli("lab", "--resume", res, "--bin-dir", fake_bin, "--no-progress")
    assert r.returncode == 0, r.stderr
    assert len(rows(res / "lab.csv")) == 50


def test_sweep_rows(fake_bin, tmp_path):
    res = tmp_path / "s"
    r = cli("sweep", "--kind", "threads", "--values", "1,2", "--sweep-servers", "main1,main4",
            "--duration", "0.1", "--warmup", "0", "--reps", "2", "--no-progress",
            "--bin-dir", fake_bin, "--results-dir", res)
    assert r.returncode == 0, r.stderr
    sw = rows(res / "sweep_threads.csv")
    assert len(sw) == 8 and {x["value"] for x in sw} == {"1", "2"}
    assert [x["rep"] for x in sw[:4]] == ["1"] * 4            # repetitions outermost
    assert len(rows(res / "sweep_threads_servers.csv")) == 8


# ---- bad input: one line naming the cause, non-zero exit ----------------------------------

@pytest.mark.parametrize("args,needle", [
    (["lab", "--servers", "main1,main5"], "unknown server 'main5'"),
    (["lab", "--n", "10,0"], "must be >= 1"),
    (["lab", "--runs", "0"], "must be >= 1"),
    (["lab", "--n", "ten"], "not an integer"),
    (["sweep", "--kind", "colour"], "unknown sweep kind"),
    (["sweep", "--kind", "threads,n", "--values", "1"], "--values needs exactly one --kind"),
    (["sweep", "--read-ratio", "1.5"], "must be [0, 1]"),
])
def test_usage_errors_exit_2(args, needle, tmp_path):
    r = cli(*args, "--results-dir", tmp_path / "r")
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()


def test_missing_binary(tmp_path):
    (tmp_path / "bin").mkdir()
    r = cli("lab", "--bin-dir", tmp_path / "bin", "--results-dir", tmp_path / "r")
    assert r.returncode == 1
    assert r.stderr.strip().endswith("release)") and "binary not found" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_port_in_use(fake_bin, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = cli("lab", *LAB, "--port", port, "--bin-dir", fake_bin, "--results-dir", tmp_path / "r")
    assert r.returncode == 1
    assert f"port {port} or its twin {twin(port)} is in use" in r.stderr


def test_server_dying_mid_experiment(fake_bin, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", *LAB, "--bin-dir", fake_bin, "--results-dir", res,
            env={"FAKE_DIE_AFTER": "1500"})
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()
    assert "main1 (n=10) died during the experiment with exit code 3" in err[-2], err
    assert err[-1].startswith("partial results kept in")
    assert len(rows(res / "lab.csv")) == 1        # the run before the crash is kept


def test_resume_needs_metadata(fake_bin, tmp_path):
    (tmp_path / "x").mkdir()
    r = cli("lab", "--resume", tmp_path / "x", "--bin-dir", fake_bin)
    assert r.returncode == 1 and "cannot resume" in r.stderr


def test_results_dir_must_be_new(fake_bin, tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("")
    r = cli("lab", "--bin-dir", fake_bin, "--results-dir", tmp_path / "x")
    assert r.returncode == 1 and "not empty" in r.stderr
