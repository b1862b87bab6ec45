"""What `lockbench profile` shows of the locks beyond the table, on real programs:
--stacks on profile/stress.c, whose known contended path (contended_worker -> contended_outer
-> contended_inner -> pthread_mutex_lock, a mutex held 1 ms asleep by four threads) must be
the heaviest folded stack, and the flame graph a well-formed SVG; --timeline's trace checked
against the Trace Event Format; and an install (cmake --install into a temporary prefix)
whose liblockprof.so the command finds from the installed client on PATH, profiling the
installed main1 driven by the installed client."""

import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from analysis.tests import test_profile as TP
from analysis.tests.helpers import RELEASE
from analysis.tests.test_profile import N, kit_runs, profile_cmd, run_whole

pytestmark = [pytest.mark.slow]
lib, serve, stress = TP.lib, TP.serve, TP.stress  # the profiler's fixtures, shared

KNOWN_PATH = ["contended_worker", "contended_outer", "contended_inner", "pthread_mutex_lock"]
SVG = "{http://www.w3.org/2000/svg}"


def read_folded(path: Path) -> dict:
    """{'root;...;leaf': weight} of a folded-stacks file, each line checked for its shape."""
    out = {}
    for line in path.read_text().splitlines():
        stack, weight = line.rsplit(" ", 1)
        assert stack and all(stack.split(";")) and int(weight) > 0, line
        out[stack] = out.get(stack, 0) + int(weight)
    return out


def test_stacks_weigh_the_known_contended_path_heaviest(stress, tmp_path):
    folded = tmp_path / "waits.folded"
    p = run_whole(profile_cmd("--stacks", 16, "--folded", folded, "--", stress, 4, 300),
                  timeout=300)
    assert p.returncode == 0 and "FAIL" not in p.stdout, p.stdout + p.stderr
    stacks = read_folded(folded)
    top = max(stacks, key=stacks.get)
    assert top.split(";")[-len(KNOWN_PATH):] == KNOWN_PATH, top
    assert top.split(";")[0] != "pthread_mutex_lock"  # root first: the thread's start
    svg = ET.parse(folded.with_suffix(".svg")).getroot()  # well-formed XML, or it raises
    assert svg.tag == f"{SVG}svg" and float(svg.get("width")) > 0
    frames = {t.text.split(" (")[0]: t.text for t in svg.iter(f"{SVG}title")}
    assert set(KNOWN_PATH) <= set(frames), sorted(frames)
    assert f"{stacks[top]:,} ns waited" in frames["contended_outer"]
    assert f"-> {folded}, flame graph {folded.with_suffix('.svg')}" in p.stdout


def test_stacks_keep_at_most_n_frames(stress, tmp_path):
    folded = tmp_path / "short.folded"
    p = run_whole(profile_cmd("--stacks", 2, "--folded", folded, "--", stress, 4, 200),
                  timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    stacks = read_folded(folded)
    assert stacks and all(len(s.split(";")) <= 3 for s in stacks)  # 2 frames and the call
    assert "contended_outer;contended_inner;pthread_mutex_lock" in stacks


def check_trace_event(e: dict) -> None:
    """One event as the Trace Event Format has it: complete events with µs times."""
    assert isinstance(e["name"], str) and e["name"] and e["ph"] in ("X", "M"), e
    assert type(e["pid"]) is int and type(e["tid"]) is int, e
    if e["ph"] == "X":
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)), e
        assert e["ts"] >= 0 and e["dur"] >= 0 and e["cat"] in ("hold", "wait"), e
        assert int(e["args"]["lock"], 16) > 0 and e["args"]["kind"] in ("mutex", "rwlock"), e
    else:
        assert e["name"] in ("process_name", "thread_name") and e["args"]["name"], e


def test_timeline_is_a_trace_a_viewer_opens(stress, tmp_path):
    trace, prof = tmp_path / "locks.trace.json", tmp_path / "p.json"
    p = run_whole(profile_cmd("--timeline", trace, "--json", prof, "--", stress, 4, 300),
                  timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(trace.read_text())
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    for e in doc["traceEvents"]:
        check_trace_event(e)
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    holds = Counter((e["pid"], e["tid"]) for e in spans if e["cat"] == "hold")
    threads = {(e["pid"], e["tid"]) for e in spans}
    assert len(threads) >= 4 and all(holds[t] >= 1 for t in threads), threads - set(holds)
    # every hold is timed with the timeline on: the known path's mutex, 4 threads x 25
    [hot] = [r for r in json.loads(prof.read_text())["locks"]
             if r["site"].startswith("contended_inner+")]
    named = [e for e in spans if e["name"] == hot["site"]]
    assert sum(e["cat"] == "hold" for e in named) == hot["acquisitions"]["mutex"] == 100
    assert sum(e["cat"] == "wait" for e in named) == hot["contended"]
    assert all(e["dur"] >= 900 for e in named if e["cat"] == "hold")  # 1 ms asleep, in µs
    assert f"-> {trace}" in p.stdout


@pytest.fixture(scope="module")
def prefix(lib, tmp_path_factory) -> Path:
    if not (RELEASE / "cmake_install.cmake").is_file() or shutil.which("cmake") is None:
        pytest.skip(f"{RELEASE} is not a CMake build tree to install from")
    out = tmp_path_factory.mktemp("install") / "prefix"
    p = subprocess.run(["cmake", "--install", str(RELEASE), "--prefix", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def test_an_install_puts_the_tools_in_bin_and_the_preload_in_lib(prefix):
    for tool in ("main1", "main2", "main3", "main4", "lockserver", "client"):
        assert os.access(prefix / "bin" / tool, os.X_OK), tool
    assert (prefix / "lib" / "liblockprof.so").is_file()


def test_the_installed_preload_is_found_from_the_installed_client(prefix, serve, tmp_path):
    """No build where the command looks ($LOCKBENCH_BIN_DIR an empty folder), no
    $LOCKPROF_LIB: the interposer is the one beside the client on PATH."""
    (tmp_path / "no-build").mkdir()
    env = (("PATH", f"{prefix / 'bin'}{os.pathsep}{os.environ['PATH']}"),
           ("LOCKBENCH_BIN_DIR", str(tmp_path / "no-build")))
    s = serve(prefix / "bin" / "main1", env=env)
    done = subprocess.run([str(prefix / "bin" / "client"), str(N), "127.0.0.1", str(s.port),
                           "--time-limit", "60"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    kit_runs(s.port)
    code, out, doc = s.stop()
    assert code == 0, out
    assert doc["interposer"] == str((prefix / "lib" / "liblockprof.so").resolve())
    assert max(sum(r["acquisitions"].values()) for r in doc["locks"]) >= 1000


def test_the_old_trace_variables_are_refused_with_their_new_names(lib, tmp_path):
    """LOCKTRACE_*: the command refuses to start (exit 2, one line), and the preload
    ignores the variable and says the new name, tracing nothing."""
    env = {**os.environ, "LOCKTRACE_FILE": str(tmp_path / "t.trace")}
    p = subprocess.run(profile_cmd("--", "true"), capture_output=True, text=True, timeout=60,
                       env=env, cwd=TP.REPO)
    assert p.returncode == 2 and p.stdout == "", p.stdout + p.stderr
    assert p.stderr.count("\n") == 1 and "$LOCKPROF_TRACE_FILE" in p.stderr, p.stderr
    env = {k: v for k, v in env.items() if not k.startswith("LOCKPROF_")}
    p = subprocess.run(["true"], env={**env, "LD_PRELOAD": str(lib)}, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "LOCKTRACE_FILE is now called LOCKPROF_TRACE_FILE" in p.stderr
    assert not (tmp_path / "t.trace").exists()
