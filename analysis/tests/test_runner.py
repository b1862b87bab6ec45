"""The runner against the real build (main1..main4 and client of build/release, or
$LOCKBENCH_BIN_DIR), on loopback: rows, resume, interruption, a server killed
mid-experiment, bad input. Small settings (n=10, a few runs, no artificial delay) keep it
fast. Tests that start binaries are skipped, with the reason, when the build is missing;
`./lockbench test` builds it before pytest. `all --quick` and the report are in
test_e2e.py."""

import csv
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from analysis.launch.procs import parse_summary, pick_port
from analysis.ports import twin
from analysis.tests.helpers import BINARIES, PY, REPO, cli
from analysis.tests.test_traces import assert_chrome_trace

pytestmark = [pytest.mark.slow]

T = 90   # seconds: the bound of any one runner invocation here
LAB = ["--servers", "main1,main2", "--n", "10,100", "--runs", "2", "--delay-us", "0",
       "--trace-limit", "100", "--no-progress"]


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def server_pids(results: Path) -> list:
    """The pids the runner logged for its server starts."""
    pids = []
    for log in (results / "logs").glob("*.log"):
        pids += [int(ln.split("=")[1]) for ln in log.read_text().splitlines()
                 if ln.startswith("# pid=")]
    return pids


def alive(pid):
    """Running (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def procs_of(bin_dir: Path, name: str | None = None) -> list:
    """Live processes started from bin_dir (argv[0] in it; a zombie's is empty), or only
    those of one binary: found in /proc, independent of what the runner says."""
    want = [str(bin_dir / b) for b in ((name,) if name else BINARIES)]
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv0 = (d / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if argv0 in want:
            pids.append(int(d.name))
    return pids


def wait_rows(p: subprocess.Popen, csv_path: Path, k: int, timeout: float = 60) -> None:
    """Waits until csv_path has k complete rows (the runner still running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if p.poll() is not None:
            pytest.fail(f"runner ended early ({p.returncode}): {p.communicate()[1]}")
        if csv_path.exists() and len(rows(csv_path)) >= k:
            return
        time.sleep(0.02)
    p.kill()
    pytest.fail(f"no {k} rows in {csv_path} within {timeout} s")


def _default_sigint():
    # A suite started in the background by a non-interactive shell inherits SIGINT ignored,
    # and Python keeps an ignored SIGINT ignored: the Ctrl-C tests would then test nothing.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_runner(*args) -> subprocess.Popen:
    return subprocess.Popen([PY, "-m", "analysis", *map(str, args)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)


def interrupt_lab(real_bin: Path, res: Path, *more) -> str:
    """Starts a lab of 20 main1 runs 0.1 s apart (a few seconds, so Ctrl-C lands
    mid-experiment) with options `more`, sends SIGINT once 2 rows are written and the
    server runs, and checks the runner exits 130; returns its stderr."""
    p = start_runner("lab", "--servers", "main1", "--n", "10", "--runs", "20", "--delay-us",
                     "0", "--pause", "0.1", "--trace-limit", "0", "--no-progress",
                     "--bin-dir", real_bin, "--results-dir", res, *more)
    try:
        wait_rows(p, res / "lab.csv", 2)
        assert len(procs_of(real_bin, "main1")) == 1
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 130, err
    return err


def test_port_helpers():
    assert twin(3000) == 47115 and twin(twin(12345)) == 12345
    s = parse_summary("main1: summary requests=1000 errors=0 mean_latency_s=8.5e-03 x=y")
    assert s == {"requests": 1000.0, "errors": 0.0, "mean_latency_s": 8.5e-3, "x": "y"}


def test_lab_writes_one_row_per_run_and_stops_servers(real_bin, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", *LAB, "--bin-dir", real_bin, "--results-dir", res, timeout=T)
    assert r.returncode == 0, r.stderr
    lab = rows(res / "lab.csv")
    assert [(x["server"], x["n"], x["rep"]) for x in lab] == [
        (s, n, k) for s in ("main1", "main2") for n in ("10", "100") for k in ("1", "2")]
    assert all(x["time_lines"] == "1" and float(x["latency_s"]) > 0 for x in lab)
    assert all(x["git_sha"] and x["ok"] == "1000" and x["errors"] == "0" for x in lab)
    assert all(x["delay_us"] == "0.0" and x["threads"] == "100" for x in lab)
    srv = rows(res / "lab_servers.csv")
    assert [(x["server"], x["n"]) for x in srv] == [
        (s, n) for s in ("main1", "main2") for n in ("10", "100")]
    assert all(x["exit_code"] == "0" and x["summary_requests"] == "2000.0"
               and x["summary_errors"] == "0.0" for x in srv)
    assert all(x["summary"].startswith(f"{x['server']}: summary ") for x in srv)
    assert sorted(p.name for p in (res / "traces").iterdir()) == sorted(
        f"{s}_n{n}.{ext}" for s in ("main1", "main2") for n in (10, 100)
        for ext in ("csv", "json"))
    # each trace also in the Chrome Trace Event Format, which trace viewers open
    assert_chrome_trace(json.loads((res / "traces" / "main1_n10.json").read_text()))
    trace = (res / "traces" / "main1_n10.csv").read_text().splitlines()
    assert trace[0] == ("pos,is_read,latency_ns,wait_ns,hold_ns,queue_ns,delay_ns,"
                        "cpu_wait_ns,recv_ns,unlock_ns,thread") and len(trace) == 101
    assert (res / "time" / "time_s1_n10").read_text().count("\n") == 2
    assert len((res / "lab_client.jsonl").read_text().splitlines()) == 8
    pids = server_pids(res)
    assert len(pids) == 4 and not any(alive(p) for p in pids)
    assert procs_of(real_bin) == []
    meta = json.loads((res / "metadata.json").read_text())
    assert meta["parameters"]["lab"]["runs"] == 2 and meta["machine"]["cores"] >= 1
    assert meta["client_version"].startswith("lockbench-client ")
    assert set(meta["build"]["binaries"]) == set(BINARIES)


def test_resume_skips_completed_runs(real_bin, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", *LAB, "--bin-dir", real_bin, "--results-dir", res, timeout=T)
    assert r.returncode == 0, r.stderr
    # Simulate a run cut short: drop the last three rows, the last one half written.
    lines = (res / "lab.csv").read_text().splitlines(keepends=True)
    (res / "lab.csv").write_text("".join(lines[:-3]) + lines[-3][:20])
    r = cli("lab", "--resume", res, "--bin-dir", real_bin, "--no-progress", timeout=T)
    assert r.returncode == 0, r.stderr
    assert "3 lab runs and 0 sweep runs to do" in r.stderr
    lab = rows(res / "lab.csv")
    keys = [(x["server"], x["n"], x["rep"]) for x in lab]
    assert sorted(keys) == [(s, n, k) for s in ("main1", "main2") for n in ("10", "100")
                            for k in ("1", "2")]
    assert all(x["ok"] == "1000" and x["time_lines"] == "1" for x in lab)
    r = cli("lab", "--resume", res, "--bin-dir", real_bin, "--no-progress", timeout=T)
    assert r.returncode == 0 and "nothing to run" in r.stderr
    assert len(json.loads((res / "metadata.json").read_text())["sessions"]) == 3
    assert procs_of(real_bin) == []


def test_interrupt_keeps_results_and_stops_server(real_bin, tmp_path):
    res = tmp_path / "r"
    err = interrupt_lab(real_bin, res)
    assert "interrupted" in err and f"--resume {res}" in err
    done = rows(res / "lab.csv")
    assert 2 <= len(done) < 20 and all(x["ok"] == "1000" for x in done)
    pids = server_pids(res)
    assert pids and not any(alive(x) for x in pids)
    assert procs_of(real_bin) == []          # neither the server nor a client is left
    r = cli("lab", "--resume", res, "--bin-dir", real_bin, "--no-progress", timeout=T)
    assert r.returncode == 0, r.stderr
    assert [int(x["rep"]) for x in rows(res / "lab.csv")] == list(range(1, 21))
    assert len(rows(res / "lab_servers.csv")) >= 1
    assert procs_of(real_bin) == []


def test_sweep_rows(real_bin, tmp_path):
    res = tmp_path / "s"
    r = cli("sweep", "--kind", "threads", "--values", "1,2", "--sweep-servers", "main1,main4",
            "--base-n", "10", "--base-delay-us", "0", "--duration", "0.1", "--warmup", "0",
            "--reps", "2", "--no-progress", "--bin-dir", real_bin, "--results-dir", res,
            timeout=T)
    assert r.returncode == 0, r.stderr
    sw = rows(res / "sweep_threads.csv")
    assert len(sw) == 8 and {x["value"] for x in sw} == {"1", "2"}
    assert [x["rep"] for x in sw[:4]] == ["1"] * 4            # repetitions outermost
    assert [x["server"] for x in sw[:2]] == ["main1", "main4"]  # servers innermost
    assert all(x["threads"] == x["value"] and float(x["throughput_rps"]) > 0
               and x["errors"] == "0" for x in sw)
    srv = rows(res / "sweep_threads_servers.csv")
    assert len(srv) == 8 and all(x["exit_code"] == "0" and float(x["summary_requests"]) > 0
                                 for x in srv)
    assert procs_of(real_bin) == []


# ---- bad input: one line naming the cause, non-zero exit ----------------------------------

@pytest.mark.parametrize("args,needle", [
    (["lab", "--servers", "main1,main5"], "unknown server 'main5'"),
    (["lab", "--n", "10,0"], "0 is out of range; allowed: a decimal integer in 1..10000000"),
    (["lab", "--runs", "0"], "0 is out of range"),
    (["lab", "--n", "ten"], "'ten' is not a decimal integer"),
    (["sweep", "--kind", "colour"], "unknown sweep kind"),
    (["sweep", "--kind", "threads,n", "--values", "1"], "--values needs exactly one --kind"),
    (["sweep", "--read-ratio", "1.5"], "1.5 is out of range; allowed: a decimal number in [0, 1]"),
])
def test_usage_errors_exit_2(args, needle, tmp_path):
    r = cli(*args, "--results-dir", tmp_path / "r", timeout=T)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert not (tmp_path / "r").exists()


def test_missing_binary(tmp_path):
    (tmp_path / "bin").mkdir()
    r = cli("lab", "--bin-dir", tmp_path / "bin", "--results-dir", tmp_path / "r", timeout=T)
    assert r.returncode == 2
    assert r.stderr.strip().endswith("release)") and "binary not found" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("gone", ["main2", "client"])
def test_one_binary_missing(real_bin, tmp_path, gone):
    (real_bin / gone).unlink()
    # Without a client in --bin-dir the runner takes build/release's; --client names one.
    more = ["--client", real_bin / "client"] if gone == "client" else []
    r = cli("lab", *LAB, "--bin-dir", real_bin, "--results-dir", tmp_path / "r", *more,
            timeout=T)
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1, err
    if gone == "client":
        assert f"argument --client: '{real_bin / gone}' is not an executable file" in err[0]
    else:
        assert f"binary not found: {real_bin / gone} " in err[0], err
    assert not (tmp_path / "r").exists()          # found before anything is created
    assert procs_of(real_bin) == []               # and before any server is started


@pytest.mark.parametrize("taken", ["port", "twin"])
def test_port_in_use(real_bin, tmp_path, taken):
    port = pick_port()
    with socket.socket() as s:          # a real listener on the port or on its twin
        s.bind(("127.0.0.1", port if taken == "port" else twin(port)))
        s.listen()
        r = cli("lab", *LAB, "--port", port, "--bin-dir", real_bin,
                "--results-dir", tmp_path / "r", timeout=T)
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()
    assert f"error: port {port} or its twin {twin(port)} is in use on 127.0.0.1" in err[-2]
    assert err[-1].startswith("partial results kept in")
    assert procs_of(real_bin) == []
    assert not (tmp_path / "r" / "lab.csv").exists() or rows(tmp_path / "r" / "lab.csv") == []


def test_fixed_port_is_used_for_every_start(real_bin, tmp_path):
    port = pick_port()                  # the pair is free right now
    r = cli("lab", *LAB, "--port", port, "--bin-dir", real_bin, "--results-dir",
            tmp_path / "r", timeout=T)
    if r.returncode == 1 and "is in use" in r.stderr:
        pytest.skip(f"port {port} or its twin taken meanwhile")
    assert r.returncode == 0, r.stderr
    assert {x["port"] for x in rows(tmp_path / "r" / "lab_servers.csv")} == {str(port)}


@pytest.mark.parametrize("when,pause,runs", [("paused runs", "0.1", 20),
                                             ("back-to-back runs", "0", 400)])
def test_server_killed_mid_experiment(real_bin, tmp_path, when, pause, runs):
    res = tmp_path / "r"
    p = start_runner("lab", "--servers", "main1", "--n", "10", "--runs", runs, "--delay-us",
                     "0", "--pause", pause, "--trace-limit", "0", "--client-timeout", "20",
                     "--no-progress", "--bin-dir", real_bin, "--results-dir", res)
    try:
        wait_rows(p, res / "lab.csv", 2)
        pids = procs_of(real_bin, "main1")
        assert len(pids) == 1 and pids == server_pids(res)
        os.kill(pids[0], signal.SIGKILL)
        _, stderr = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 1, stderr
    err = stderr.strip().splitlines()
    assert err[-2] == (f"python -m analysis lab: error: main1 (n=10) died during the "
                       f"experiment (killed by signal SIGKILL (9)); see "
                       f"{res}/logs/lab_main1_n10.log"), err
    assert err[-1] == (f"partial results kept in {res}; continue with: python -m analysis lab "
                       f"--resume {res}")
    kept = rows(res / "lab.csv")                  # the runs before the kill are kept
    assert 2 <= len(kept) < runs and all(x["ok"] == "1000" for x in kept)
    assert [int(x["rep"]) for x in kept] == list(range(1, len(kept) + 1))
    assert "# exit=-9" in (res / "logs" / "lab_main1_n10.log").read_text()
    assert procs_of(real_bin) == []
    if when == "paused runs":    # and a resume completes the experiment on a new server
        r = cli("lab", "--resume", res, "--bin-dir", real_bin, "--no-progress", timeout=T)
        assert r.returncode == 0, r.stderr
        assert [int(x["rep"]) for x in rows(res / "lab.csv")] == list(range(1, runs + 1))
        assert [x["exit_code"] for x in rows(res / "lab_servers.csv")] == ["0"]


def test_resume_needs_metadata(real_bin, tmp_path):
    (tmp_path / "x").mkdir()
    r = cli("lab", "--resume", tmp_path / "x", "--bin-dir", real_bin, timeout=T)
    assert r.returncode == 2 and "cannot resume" in r.stderr
    (tmp_path / "x" / "metadata.json").write_text("{not json")
    r = cli("lab", "--resume", tmp_path / "x", "--bin-dir", real_bin, timeout=T)
    assert r.returncode == 1 and "cannot resume" in r.stderr and "Traceback" not in r.stderr


def test_results_dir_must_be_new(real_bin, tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("")
    r = cli("lab", "--bin-dir", real_bin, "--results-dir", tmp_path / "x", timeout=T)
    assert r.returncode == 2 and "not empty" in r.stderr


# ---- lockserver strategies by name ----------------------------------------------------------

def test_lab_with_a_lockserver_strategy_and_report(real_bin, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", "--servers", "main1,seqlock-per-slot", "--n", "10", "--runs", "2",
            "--delay-us", "0", "--trace-limit", "100", "--no-progress", "--bin-dir", real_bin,
            "--results-dir", res, timeout=T)
    assert r.returncode == 0, r.stderr
    lab = rows(res / "lab.csv")
    assert [(x["server"], x["rep"]) for x in lab] == [
        ("main1", "1"), ("main1", "2"), ("seqlock-per-slot", "1"), ("seqlock-per-slot", "2")]
    assert all(x["time_lines"] == "1" and float(x["latency_s"]) > 0 and x["errors"] == "0"
               for x in lab)
    srv = rows(res / "lab_servers.csv")
    assert [x["server"] for x in srv] == ["main1", "seqlock-per-slot"]
    assert srv[1]["summary"].startswith("lockserver: summary ") and srv[1]["exit_code"] == "0"
    log = (res / "logs" / "lab_seqlock-per-slot_n10.log").read_text()
    assert "lockserver --strategy seqlock-per-slot 10 127.0.0.1 " in log
    assert (res / "time" / "time_seqlock-per-slot_n10").read_text().count("\n") == 2
    assert (res / "traces" / "seqlock-per-slot_n10.csv").exists()
    assert procs_of(real_bin) == []
    out = tmp_path / "report"
    r = cli("report", "--results", res, "--out", out, "--microbench", "none", timeout=T)
    assert r.returncode == 0, r.stderr
    md = (out / "REPORT.md").read_text()
    assert "| main1 (one mutex) |" in md and "| seqlock-per-slot |" in md
    assert md.index("| main1 (one mutex) |") < md.index("| seqlock-per-slot |")
    assert "Table 4: Speedup" in md and "`seqlock-per-slot` = lockserver seqlock-per-slot" in md
    assert "| Microbenchmarks | not included |" in md


def test_striped_strategy_with_stripes(real_bin, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", "--servers", "striped-mutex:4", "--n", "10", "--runs", "1", "--delay-us",
            "0", "--trace-limit", "0", "--no-progress", "--bin-dir", real_bin,
            "--results-dir", res, timeout=T)
    assert r.returncode == 0, r.stderr
    assert [x["server"] for x in rows(res / "lab.csv")] == ["striped-mutex:4"]
    log = (res / "logs" / "lab_striped-mutex:4_n10.log").read_text()
    assert "lockserver --strategy striped-mutex --stripes 4 10 " in log
    out = tmp_path / "report"
    r = cli("report", "--results", res, "--out", out, "--microbench", "none", timeout=T)
    assert r.returncode == 0, r.stderr
    md = (out / "REPORT.md").read_text()
    assert "| striped-mutex:4 |" in md and "Table 4: Speedup" not in md   # no main1


@pytest.mark.parametrize("cmd,servers,needle", [
    ("lab", "main1,no-such-lock", "unknown server 'no-such-lock'; allowed: main1, main2"),
    ("sweep", "seqlock-per-slot:4", "applies only to striped-mutex, striped-rwlock"),
    ("all", "main1,bogus", "seqlock-per-slot"),
])
def test_unknown_strategy_exits_2(real_bin, tmp_path, cmd, servers, needle):
    opt = "--sweep-servers" if cmd == "sweep" else "--servers"
    r = cli(cmd, opt, servers, "--bin-dir", real_bin, "--results-dir", tmp_path / "r",
            timeout=T)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and needle in err[0], r.stderr
    assert not (tmp_path / "r").exists()


def test_strategy_needs_lockserver(real_bin, tmp_path):
    (real_bin / "lockserver").unlink()
    r = cli("lab", "--servers", "main1,seqlock-per-slot", "--bin-dir", real_bin,
            "--results-dir", tmp_path / "r", timeout=T)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1, r.stderr
    assert f"binary not found: {real_bin / 'lockserver'} " in err[0]
    assert not (tmp_path / "r").exists()


def test_relative_bin_dir_is_resolved_before_servers_change_directory(real_bin, tmp_path):
    # The servers run with their results folder as working directory; a relative
    # --bin-dir (as the README's `./lockbench lab` once passed) must still work.
    res = tmp_path / "r"
    r = cli("lab", "--servers", "main1", "--n", "10", "--runs", "1", "--delay-us", "0",
            "--no-progress", "--bin-dir", os.path.relpath(real_bin, tmp_path),
            "--results-dir", res, cwd=tmp_path, env={"PYTHONPATH": str(REPO)}, timeout=T)
    assert r.returncode == 0, r.stderr
    assert len(rows(res / "lab.csv")) == 1
