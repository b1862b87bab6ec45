"""A --server-host prefix that fails: hangs at one step, exits with its own error, or prints
bytes that are not UTF-8. Each prefix here is a script of the test's own that runs its
arguments on this machine (as `env` does) but misbehaves at one step. Whatever the step,
the runner ends with one error line (no traceback, no "internal error") that says what
became of the server, and nothing of the run is left: no server process (by the pid the
log names), no /tmp/lockbench-* folder (by the name the log names), no hung prefix."""

import contextlib
import os
import signal
from pathlib import Path

import pytest

from analysis.tests.helpers import cli
from analysis.tests.test_runner import procs_of, rows

pytestmark = [pytest.mark.slow]

T = 120
# The hung steps sleep this long: a number no other process here sleeps, to find them.
HANG = "sleep 313"
TIME_FILE = "server_output_time_aggregated"


def fake_prefix(tmp_path: Path, body: str) -> str:
    """A prefix that runs its arguments here with the script on its standard input, after
    `body` (shell; the script it was given is in $script) has had its say."""
    p = tmp_path / "prefix"
    p.write_text("#!/bin/sh\nscript=$(cat)\n" + body + '\nprintf "%s\\n" "$script" | exec "$@"\n')
    p.chmod(0o755)
    return str(p)


def lab(real_bin, res, prefix, runs=2):
    return cli("lab", "--servers", "main1", "--n", "10", "--runs", runs, "--delay-us", "0",
               "--trace-limit", "0", "--no-progress", "--bin-dir", real_bin,
               "--results-dir", res, "--server-host", prefix, "--server-addr", "127.0.0.1",
               timeout=T)


def started(res: Path) -> tuple:
    """(pids, folders) the runner logged for its server starts on the host."""
    pids, folders = [], []
    for log in (res / "logs").glob("*.log"):
        for ln in log.read_text(errors="replace").splitlines():
            if ln.startswith("# pid=") and ln.endswith("(on the host)"):
                pids.append(int(ln.split("=")[1].split()[0]))
            elif ln.startswith("# cwd=/tmp/lockbench-"):
                folders.append(ln[len("# cwd="):])
    return pids, folders


def is_server(pid: int) -> bool:
    try:
        return b"main1" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def hung_prefixes() -> list:
    out = []
    for d in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (d / "cmdline").read_bytes().split(b"\0")[:-1]
            if d.name.isdigit() and argv == HANG.encode().split():
                out.append(int(d.name))
    return out


@pytest.fixture
def leftovers(real_bin, tmp_path):
    """After the test (passed or not), kills what a failing runner left and removes its
    folders, so one failure does not leak into the next test."""
    yield
    pids, folders = started(tmp_path / "r")
    for pid in [p for p in pids if is_server(p)] + procs_of(real_bin) + hung_prefixes():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for f in folders:
        with contextlib.suppress(OSError):
            for child in Path(f).iterdir():
                child.unlink()
            Path(f).rmdir()


def assert_one_error_line(r, res: Path) -> str:
    """Exit 1, one error line (then the resume hint; before them only the runner's opening
    lines), no traceback; returns the line."""
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    err = r.stderr.strip().splitlines()
    assert [ln for ln in err if "error" in ln] == [err[-2]], err
    assert err[-2].startswith("python -m analysis lab: error: host "), err
    assert err[-1].startswith(f"partial results kept in {res}"), err
    return err[-2]


def assert_nothing_left(real_bin, res: Path) -> None:
    pids, folders = started(res)
    assert pids and folders
    assert [p for p in pids if is_server(p)] == [] and procs_of(real_bin) == []
    assert [f for f in folders if os.path.exists(f)] == []
    assert hung_prefixes() == []


def test_prefix_hanging_on_the_timing_file_cleans_up(real_bin, tmp_path, leftovers):
    """The host stops answering when the timing file is read (after the first run, and
    again when it would be brought back at the stop): the server is still stopped by pid
    and its folder removed over the prefix, each step bounded, and the line says so."""
    res = tmp_path / "r"
    prefix = fake_prefix(tmp_path, f'case $script in *"cat "*{TIME_FILE}*) exec {HANG};; esac')
    line = assert_one_error_line(lab(real_bin, res, prefix), res)
    pids, folders = started(res)
    assert "no answer within 10 s (reading the timing file)" in line, line
    assert "no answer within 5 s (bringing back the timing file)" in line, line
    assert line.endswith(f"the server (pid {pids[0]}) was stopped and {folders[0]} "
                         "removed there"), line
    assert_nothing_left(real_bin, res)


def test_prefix_hanging_once_when_stopping_cleans_up(real_bin, tmp_path, leftovers):
    """The host does not answer the kill -TERM (once): the server is killed with -KILL
    over the prefix, the folder removed, and the line names the step that hung."""
    res = tmp_path / "r"
    mark = tmp_path / "hung-once"
    prefix = fake_prefix(tmp_path, f'case $script in *"kill -TERM"*) [ -e {mark} ] || '
                                   f'{{ : >{mark}; exec {HANG}; }};; esac')
    line = assert_one_error_line(lab(real_bin, res, prefix, runs=1), res)
    pids, folders = started(res)
    assert f"stopping main1: no answer within 10 s (kill -TERM of pid {pids[0]})" in line, line
    assert line.endswith(f"the server (pid {pids[0]}) was stopped and {folders[0]} "
                         "removed there"), line
    assert len(rows(res / "lab.csv")) == 1       # the run itself was measured
    assert_nothing_left(real_bin, res)


def test_prefix_failing_with_bytes_that_are_not_utf8(real_bin, tmp_path, leftovers):
    """The prefix fails as ssh does when its connection drops (exit status 255) with a
    message in Latin-1: one line naming the step and quoting the message (undecodable
    bytes replaced), the server stopped and its folder removed."""
    res = tmp_path / "r"
    prefix = fake_prefix(tmp_path, f'case $script in *"cat "*{TIME_FILE}*) '
                                   "printf 'ssh: Verbindung zu h\\366st verloren\\n' >&2; "
                                   "exit 255;; esac")
    line = assert_one_error_line(lab(real_bin, res, prefix), res)
    assert ("reading the timing file failed (exit status 255: ssh: Verbindung zu "
            "h\ufffdst verloren)") in line, line
    pids, folders = started(res)
    assert line.endswith(f"the server (pid {pids[0]}) was stopped and {folders[0]} "
                         "removed there"), line
    assert_nothing_left(real_bin, res)


def test_prefix_noise_that_is_not_utf8_is_harmless(real_bin, tmp_path, leftovers):
    """A prefix that warns in Latin-1 on every call, and a server log holding bytes that
    are not UTF-8: the lab runs to the end, the log keeps them (replaced)."""
    res = tmp_path / "r"
    prefix = fake_prefix(tmp_path, "printf 'Warnung: Schl\\374ssel f\\374r h\\366st\\n' >&2\n"
                                   'case $script in *"cat "*server.log*) '
                                   'printf "%s\\n" "$script" | "$@"; '
                                   "printf 'main1: \\377\\376 bytes\\n'; exit 0;; esac")
    r = lab(real_bin, res, prefix)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert [x["ok"] for x in rows(res / "lab.csv")] == ["1000", "1000"]
    log = (res / "logs" / "lab_main1_n10.log").read_text(errors="replace")
    assert "main1: \ufffd\ufffd bytes" in log
    assert_nothing_left(real_bin, res)
