"""The runner's edges: a server that refuses to start, relative paths, two
runners at once, resume and --quick never writing outside their results folder, and bad
values refused before anything starts. Against the real build (skipped without it), on
loopback, with tiny settings."""

import hashlib
import random
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from analysis.launch.procs import StartError
from analysis.launch.server_spec import Options, Place, ServerSpec, launch
from analysis.runner import experiment as R
from analysis.runner import results as RS
from analysis.tests.helpers import PY, REPO, cli
from analysis.tests.test_runner import procs_of, rows

pytestmark = [pytest.mark.slow]


def ours(binary: Path, port: int, tmp_path: Path, log: str):
    """Our server `binary` at n = 10 on port, not started, its files in tmp_path."""
    return launch(ServerSpec(binary.name, "lockbench", binary), 10, port, Place(tmp_path),
                  log_file=tmp_path / log, opts=Options(time_file=tmp_path / "t"))

T = 90
TINY = ["--servers", "main1", "--n", "10", "--runs", "1", "--delay-us", "0",
        "--trace-limit", "0", "--no-progress"]


def fake_server(bin_dir: Path, name: str, body: str) -> None:
    """Replaces bin_dir/name by a shell script (a real process that behaves badly)."""
    p = bin_dir / name
    p.unlink()
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


def error_lines(stderr: str) -> list:
    return [ln for ln in stderr.splitlines() if ": error: " in ln]


def no_traceback(r):
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


# ---- a server that refuses to start ---------------------------------------------------------

@pytest.mark.parametrize("body,status", [
    ("echo 'main1: error: --delay-us: Value 0.5 not in range 0 to 1000000' >&2\n"
     "echo \"Run 'main1 --help' for every option.\" >&2\nexit 2",
     "exit status 2"),
    ("echo 'main1: error: n: Value 20000000 not in range 1 to 10000000' >&2\nexit 2",
     "exit status 2"),
    ("echo 'main1: error: something bad' >&2\nkill -SEGV $$", "killed by signal SIGSEGV (11)"),
])
def test_server_refusing_to_start_is_one_line(real_bin, tmp_path, body, status):
    fake_server(real_bin, "main1", body)
    res = tmp_path / "r"
    r = cli("lab", *TINY, "--bin-dir", real_bin, "--results-dir", res, timeout=T)
    no_traceback(r)
    assert r.returncode == 1, r.stderr
    err = error_lines(r.stderr)
    assert len(err) == 1, r.stderr
    assert err[0].startswith(f"python -m analysis lab: error: main1 (n=10) exited at start-up "
                             f"({status}): main1: error: "), err
    # Started once: a server that refuses its arguments is not retried on other ports.
    log = (res / "logs" / "lab_main1_n10.log").read_text()
    assert log.count("# pid=") == 1


def test_retry_on_another_port_only_when_taken(real_bin, tmp_path):
    """The port is taken between the runner's probe and the server's bind: the server
    exits at start-up, the runner notes it and starts it on another port."""
    ctx = R.Ctx(results=tmp_path, bin_dir=real_bin, rng=random.Random(7))
    taken, notes = [], []
    ctx.note = notes.append
    holder = socket.socket()

    def make(port):
        if not taken:                     # steal the first port the runner picked
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            holder.bind(("127.0.0.1", port))
            holder.listen()
            taken.append(port)
        return ours(real_bin / "main1", port, tmp_path, f"log{port}")

    try:
        srv = ctx.start_server(make)
        try:
            assert srv.alive() and srv.port != taken[0]
            assert len(notes) == 1 and f"port {taken[0]} (taken meanwhile)" in notes[0]
        finally:
            srv.stop()
    finally:
        holder.close()
    # A server that refuses on a free port is raised at once, without a retry.
    fake_server(real_bin, "main2", "echo 'main2: error: no' >&2; exit 2")
    with pytest.raises(StartError, match=r"exit status 2\): main2: error: no"):
        ctx.start_server(lambda port: ours(real_bin / "main2", port, tmp_path, "log2"))
    assert len(notes) == 1
    assert procs_of(real_bin) == []


# ---- paths ----------------------------------------------------------------------------------

def test_relative_results_dir_and_resume(real_bin, tmp_path):
    env = {"PYTHONPATH": str(REPO)}
    r = cli("lab", *TINY, "--runs", "2", "--bin-dir", real_bin, "--results-dir", "r",
            cwd=tmp_path, env=env, timeout=T)
    assert r.returncode == 0, r.stderr
    res = tmp_path / "r"
    assert len(rows(res / "lab.csv")) == 2 and (res / "time" / "time_s1_n10").exists()
    lines = (res / "lab.csv").read_text().splitlines(keepends=True)
    (res / "lab.csv").write_text("".join(lines[:-1]))
    (tmp_path / "sub").mkdir()
    r = cli("lab", "--resume", "../r", "--bin-dir", real_bin, "--no-progress",
            cwd=tmp_path / "sub", env=env, timeout=T)
    assert r.returncode == 0, r.stderr
    assert [x["rep"] for x in rows(res / "lab.csv")] == ["1", "2"]
    assert [p.name for p in (tmp_path / "sub").iterdir()] == []


# ---- two runners ----------------------------------------------------------------------------

def test_default_folders_of_the_same_second_differ(tmp_path):
    a = RS.claim_results_dir(None, tmp_path, stamp="20260101T000000Z")
    b = RS.claim_results_dir(None, tmp_path, stamp="20260101T000000Z")
    assert a != b and a.name == "20260101T000000Z" and b.name == "20260101T000000Z-2"


def test_a_locked_folder_is_refused(tmp_path):
    # Another process holds the lock of an (empty) folder: this process may not take it.
    d = tmp_path / "r"
    d.mkdir()
    code = ("import sys, time; from pathlib import Path; "
            "from analysis.runner import results as RS; "
            "RS.lock_results_dir(Path(sys.argv[1])); print('locked', flush=True); time.sleep(30)")
    p = subprocess.Popen([PY, "-c", code, str(d)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "locked"
        with pytest.raises(R.RunError, match="in use by another runner"):
            RS.claim_results_dir(d, tmp_path)
        with pytest.raises(R.RunError, match="in use by another runner"):
            RS.lock_results_dir(d)
    finally:
        p.kill()
        p.wait()


def test_two_runners_never_share_a_folder(real_bin, tmp_path):
    res = tmp_path / "r"
    argv = [PY, "-m", "analysis", "lab", *TINY, "--runs", "3", "--bin-dir", str(real_bin),
            "--results-dir", str(res)]
    ps = [subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True) for _ in range(2)]
    outs = [p.communicate(timeout=T)[1] for p in ps]
    codes = sorted(p.returncode for p in ps)
    assert codes[0] == 0 and codes[1] in (1, 2), outs
    loser = outs[[p.returncode for p in ps].index(codes[1])]
    assert len(error_lines(loser)) == 1 and ("in use by another runner" in loser
                                             or "is not empty" in loser), loser
    assert [x["rep"] for x in rows(res / "lab.csv")] == ["1", "2", "3"]
    assert procs_of(real_bin) == []


# ---- resume and --quick stay in their folder -------------------------------------------------

def _digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()} if folder.exists() else {}


def test_resume_and_quick_never_touch_the_committed_report(real_bin, tmp_path):
    committed = _digest(REPO / "report")
    res = tmp_path / "r"
    r = cli("lab", *TINY, "--quick", "--bin-dir", real_bin, "--results-dir", res, timeout=T)
    assert r.returncode == 0, r.stderr
    # The resume hint an interrupted --quick run prints, followed to the letter.
    r = cli("all", "--resume", res, "--no-sweeps", "--microbench", "none", "--bin-dir",
            real_bin, "--no-progress", timeout=T)
    assert r.returncode == 0, r.stderr
    assert (res / "report" / "REPORT.md").is_file()
    assert f"report: {res / 'report' / 'REPORT.md'}" in r.stderr
    for args in (["all", "--resume", res, "--no-sweeps", "--out", REPO / "report"],
                 ["all", "--quick", "--out", REPO / "report" / "x"],
                 ["report", "--results", res],
                 ["report", "--results", res, "--out", "report"]):
        r = cli(*args, "--bin-dir", real_bin, timeout=T) if args[0] == "all" else \
            cli(*args, timeout=T)
        err = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(err) == 1 and "the committed report" in err[0], r.stderr
    assert _digest(REPO / "report") == committed
    r = cli("report", "--results", res, "--out", tmp_path / "elsewhere", "--microbench",
            "none", timeout=T)
    assert r.returncode == 0, r.stderr


# ---- bad values: refused before anything starts ---------------------------------------------

@pytest.mark.parametrize("cmd,option,value,allowed", [
    ("lab", "--port", "70000", "1..65535"),
    ("lab", "--port", "0", "1..65535"),
    ("lab", "--port", "03000", "1..65535"),            # octal-looking (the kit's atoi: 3000)
    ("lab", "--port", "0x0bb8", "1..65535"),
    ("lab", "--port", "3000.0", "1..65535"),
    ("lab", "--delay-us", "0.5", "0..1000000"),        # fractional where an integer is meant
    ("lab", "--delay-us", "1000001", "0..1000000"),
    ("lab", "--delay-us", "nan", "0..1000000"),
    ("lab", "--n", "10,1e3", "1..10000000"),
    ("lab", "--n", "10,-1", "1..10000000"),
    ("lab", "--runs", "1_000", "1..1000000"),
    ("lab", "--pause", "inf", "[0, 3600]"),
    ("lab", "--pause", "nan", "[0, 3600]"),
    ("lab", "--client-timeout", "1e999", "[1, 86400]"),
    ("lab", "--trace-limit", " 5", "0..1000000000"),
    ("sweep", "--read-ratio", "nan", "[0, 1]"),
    ("sweep", "--read-ratio", "-0.1", "[0, 1]"),
    ("sweep", "--threads", "4097", "1..4096"),
    ("sweep", "--duration", "infinity", "[0.01, 86400]"),
    ("sweep", "--warmup", "-inf", "[0, 86400]"),
    ("sweep", "--base-delay-us", "2.5", "0..1000000"),
    ("sweep", "--base-n", "0", "1..10000000"),
    ("sweep", "--reps", "007", "1..1000"),
    ("all", "--duration", "0", "[0.01, 86400]"),
])
def test_bad_values_refused_before_start(real_bin, tmp_path, cmd, option, value, allowed):
    res = tmp_path / "r"
    r = cli(cmd, f"{option}={value}", "--bin-dir", real_bin, "--results-dir", res, timeout=T)
    no_traceback(r)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1, r.stderr
    assert f"argument {option}:" in err[0], err
    assert value.split(",")[-1].strip() in err[0] and allowed in err[0], err
    assert not res.exists()
    assert procs_of(real_bin) == []


@pytest.mark.parametrize("cmd,args,needle", [
    ("sweep", ["--kind", "delay", "--values", "0,0.5"], "'0.5' is not a decimal integer"),
    ("sweep", ["--kind", "read-ratio", "--values", "nan"], "'nan' is not a decimal number"),
    ("lab", ["--bin-dir", "/nonexistent/bin"], "argument --bin-dir: '/nonexistent/bin' is not"),
    ("report", ["--results", "/nonexistent/results"], "argument --results:"),
    ("report", ["--results", ".", "--microbench", "/nonexistent.json"], "argument --microbench:"),
])
def test_bad_paths_and_values_exit_2(cmd, args, needle, tmp_path):
    r = cli(cmd, *args, *(["--results-dir", tmp_path / "r"] if cmd != "report" else []),
            timeout=T)
    no_traceback(r)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and needle in err[0], r.stderr
    assert not (tmp_path / "r").exists()


def test_results_dir_that_is_a_file_exit_2(tmp_path):
    (tmp_path / "f").write_text("")
    r = cli("lab", "--results-dir", tmp_path / "f", timeout=T)
    assert r.returncode == 2 and "is a file" in r.stderr and len(r.stderr.splitlines()) == 1


def test_failure_after_start_is_one_line_exit_1(real_bin, tmp_path):
    # The client fails on its first run (a client that exits 3 without a word).
    fake_server(real_bin, "client", "exit 3")
    res = tmp_path / "r"
    r = cli("lab", *TINY, "--bin-dir", real_bin, "--results-dir", res, timeout=T)
    no_traceback(r)
    assert r.returncode == 1
    err = error_lines(r.stderr)
    assert len(err) == 1 and "client exited with code 3" in err[0], r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(f"partial results kept in {res}")
    assert procs_of(real_bin) == []
