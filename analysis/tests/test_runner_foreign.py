"""The runner drives any lab server: kit-style servers (the student-like
fixtures of tests/fixtures/, built here with their own Makefile) with only --bin-dir or
--server-cmd; readiness from the kernel's socket table, never a connection; the timing
file read in the server's working directory and renamed like the kit's test.sh; SIGTERM
a normal stop; --client; a server listening on the real port only; refusals."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.tests.helpers import KIT_FIXTURES, cli, kit_fixture, skip_unless_built
from analysis.tests.test_runner import procs_of, rows

pytestmark = [pytest.mark.slow]

T = 120


def build_fixture(name: str, dest: Path) -> Path:
    if not (KIT_FIXTURES / name / "main.c").is_file():
        pytest.skip(f"fixture {name} not in tests/fixtures")
    if not (shutil.which("make") and shutil.which("cc")):
        pytest.skip("make or cc missing")
    d = kit_fixture(name, dest)
    r = subprocess.run(["make", "-s", "-C", str(d), "CC=cc"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return d


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    skip_unless_built()
    d = tmp_path_factory.mktemp("kit")
    return {name: build_fixture(name, d) for name in ("correct", "crash_on_empty")}


def kit_procs(folder: Path) -> list:
    """Live processes of the fixture's main1..main4 (found in /proc)."""
    return [p for name in ("main1", "main2", "main3", "main4") for p in procs_of(folder, name)]


def test_lab_against_a_kit_style_server_and_report(kit, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", "--bin-dir", kit["correct"], "--servers", "main1,main4", "--n", "10,100",
            "--runs", "3", "--no-progress", "--results-dir", res, timeout=T)
    assert r.returncode == 0, r.stderr
    lab = rows(res / "lab.csv")
    assert [(x["server"], x["n"], x["rep"]) for x in lab] == [
        (s, n, k) for s in ("main1", "main4") for n in ("10", "100") for k in ("1", "2", "3")]
    assert all(x["ok"] == "1000" and x["errors"] == "0" and x["time_lines"] == "1"
               and float(x["latency_s"]) > 0 and x["delay_us"] == "" for x in lab)
    # The kit server's own file, renamed per setting like test.sh: one line per run.
    for s, n in (("1", 10), ("1", 100), ("4", 10), ("4", 100)):
        lines = (res / "time" / f"time_s{s}_n{n}").read_text().splitlines()
        assert len(lines) == 3 and all(float(v) > 0 for v in lines)
    assert not (res / "work" / "server_output_time_aggregated").exists()
    srv = rows(res / "lab_servers.csv")
    assert [x["exit_code"] for x in srv] == ["-15"] * 4     # SIGTERM: a normal stop here
    log = (res / "logs" / "lab_main1_n10.log").read_text()
    assert f"{kit['correct'] / 'main1'} 10 127.0.0.1 " in log and "--delay-us" not in log
    assert kit_procs(kit["correct"]) == []
    out = tmp_path / "report"
    r = cli("report", "--results", res, "--out", out, "--microbench", "none", timeout=T)
    assert r.returncode == 0, r.stderr
    md = (out / "REPORT.md").read_text()
    assert "Table 1: Mean" in md and "Table 2: Median" in md
    assert "| n | 10 | 100 |" in md and "| main1 (one mutex) |" in md
    assert "| main4 (rwlock per string) |" in md


def test_server_that_crashes_on_an_empty_connection_is_never_probed(kit, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", "--bin-dir", kit["crash_on_empty"], "--servers", "main2", "--n", "10",
            "--runs", "2", "--no-progress", "--results-dir", res,
            "--server-cmd", "{bin} {n} {ip} {port}", timeout=T)
    assert r.returncode == 0, r.stderr
    assert [x["errors"] for x in rows(res / "lab.csv")] == ["0", "0"]
    assert [x["exit_code"] for x in rows(res / "lab_servers.csv")] == ["-15"]
    assert kit_procs(kit["crash_on_empty"]) == []


def test_server_cmd_with_our_server_on_the_real_port_and_client(real_bin, tmp_path):
    # Our main1 driven as a foreign server, listening on the real port only (--no-twin):
    # the runner sees which port listens and gives the client --real-port; the timing
    # file is main1's default, server_output_time_aggregated in its working directory.
    res = tmp_path / "r"
    (tmp_path / "empty").mkdir()
    r = cli("lab", "--bin-dir", real_bin, "--servers", "main1", "--n", "10", "--runs", "2",
            "--no-progress", "--results-dir", res, "--client", real_bin / "client",
            "--server-cmd", "{bin} {n} {ip} {port} --no-twin --delay-us 0", timeout=T)
    assert r.returncode == 0, r.stderr
    lab = rows(res / "lab.csv")
    assert [x["errors"] for x in lab] == ["0", "0"] and all(float(x["latency_s"]) > 0
                                                            for x in lab)
    assert len((res / "time" / "time_s1_n10").read_text().splitlines()) == 2
    srv = rows(res / "lab_servers.csv")
    assert srv[0]["exit_code"] == "0"            # ours exits 0 on SIGTERM
    log = (res / "logs" / "lab_main1_n10.log").read_text()
    port = srv[0]["port"]
    assert f"# listening on {port}\n" in log
    for line in (res / "lab_client.jsonl").read_text().splitlines():
        cfg = json.loads(line)["client"]["config"]
        assert cfg["connect_port"] == cfg["port"] == int(port)   # --real-port was given
    assert procs_of(real_bin) == []


def test_kit_server_exiting_at_start_up_is_one_line(real_bin, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", "--bin-dir", real_bin, "--servers", "main1", "--n", "10", "--runs", "1",
            "--no-progress", "--results-dir", res,
            "--server-cmd", "sh -c 'echo \"usage: main1 n ip port\" >&2; exit 3' sh {port}",
            timeout=T)
    assert r.returncode == 1, r.stderr
    err = [ln for ln in r.stderr.splitlines() if ": error: " in ln]
    assert err == ["python -m analysis lab: error: main1 (n=10) exited at start-up "
                   "(exit status 3): usage: main1 n ip port"], r.stderr
    assert "Traceback" not in r.stderr


def test_kit_server_that_never_listens_times_out(real_bin, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", "--bin-dir", real_bin, "--servers", "main1", "--n", "10", "--runs", "1",
            "--no-progress", "--results-dir", res,
            "--server-cmd", "sh -c 'exec sleep 60' sh {port}", timeout=T)
    assert r.returncode == 1, r.stderr
    err = [ln for ln in r.stderr.splitlines() if ": error: " in ln]
    assert len(err) == 1 and "did not listen on port" in err[0], r.stderr
    log = (res / "logs" / "lab_main1_n10.log").read_text()
    pids = [int(ln.split("=")[1]) for ln in log.splitlines() if ln.startswith("# pid=")]
    assert len(pids) == 1 and "# exit=-15" in log      # stopped, not left behind
    assert not Path(f"/proc/{pids[0]}").exists()


@pytest.mark.parametrize("template,needle", [
    ("{bin} {n} {ip}", "has no {port}"),
    ("{bin} {n} {ip} {port} {nope}", "unknown field {nope}"),
    ("{bin} {n} {ip} {port:x}", "unknown field {port}"),
    ("'{bin} {port}", "does not split into words"),
    ("", "empty command"),
])
def test_bad_server_cmd_exit_2(template, needle, tmp_path):
    r = cli("lab", f"--server-cmd={template}", "--results-dir", tmp_path / "r", timeout=T)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and needle in err[0], r.stderr
    assert "argument --server-cmd:" in err[0]
    assert not (tmp_path / "r").exists()


def test_sweeps_of_kit_servers(kit, tmp_path):
    # No --delay-us and one request per connection: those sweeps are refused by name...
    r = cli("sweep", "--kind", "delay", "--sweep-servers", "main1", "--bin-dir",
            kit["correct"], "--results-dir", tmp_path / "x", timeout=T)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and "delay cannot be swept" in err[0], r.stderr
    # ... and a threads sweep runs (each point a fresh server, SIGTERM a normal stop).
    res = tmp_path / "r"
    r = cli("sweep", "--kind", "threads", "--values", "1,4", "--sweep-servers", "main1",
            "--base-n", "10", "--duration", "0.2", "--warmup", "0", "--reps", "1",
            "--no-progress", "--bin-dir", kit["correct"], "--results-dir", res, timeout=T)
    assert r.returncode == 0, r.stderr
    sw = rows(res / "sweep_threads.csv")
    assert [x["value"] for x in sw] == ["1", "4"] and all(float(x["throughput_rps"]) > 0
                                                          for x in sw)
    assert all(x["delay_us"] == "" for x in sw)
    assert [x["exit_code"] for x in rows(res / "sweep_threads_servers.csv")] == ["-15", "-15"]
    assert kit_procs(kit["correct"]) == []


def test_resume_keeps_the_server_cmd(kit, tmp_path):
    res = tmp_path / "r"
    r = cli("lab", "--bin-dir", kit["correct"], "--servers", "main3", "--n", "10", "--runs",
            "3", "--no-progress", "--results-dir", res, "--server-cmd",
            "{bin} {n} {ip} {port}", timeout=T)
    assert r.returncode == 0, r.stderr
    lines = (res / "lab.csv").read_text().splitlines(keepends=True)
    (res / "lab.csv").write_text("".join(lines[:-1]))
    r = cli("lab", "--resume", res, "--bin-dir", kit["correct"], "--no-progress", timeout=T)
    assert r.returncode == 0, r.stderr
    assert [x["rep"] for x in rows(res / "lab.csv")] == ["1", "2", "3"]
    assert rows(res / "lab_servers.csv")[-1]["exit_code"] == "-15"
    assert len((res / "time" / "time_s3_n10").read_text().splitlines()) == 4
