"""A one-server lab's `main` measured against the grader's own kit-style servers
(analysis/grade/kitref.c: kitref1, one mutex, and kitref4, an rwlock per string) in turns:
the concurrency check and the leaderboard built from it. One grading of 2024+ hand-ins (a
mutex, one rwlock and an rwlock per string, one that locks per string but serves one
request at a time, and one-mutex ones whose clock starts after the lock or keeps its start
time in a global shared by every thread) is shared by the tests of this module. kitref4 is
also what the clock probe compares main's lock waiting with."""

import json
import shutil
from pathlib import Path

import pytest

from analysis.grade.pages import fmt
from analysis.tests.helpers import graded_2024
from analysis.tests.test_grade import NO_SANDBOX, REPO, checks, grade, lab2024

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

SUBS = {"one_mutex": (1, ""), "one_rwlock": (3, ""), "rwlock_per_string": (4, ""),
        "serialised": (4, "SERIALISED"), "clock_after_lock": (1, "CLOCK_AFTER_LOCK"),
        "racy_clock": (1, "RACY_CLOCK")}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    # the checks these tests do not assert on are test_grade.py's (the same server.c)
    return graded_2024(tmp_path_factory, SUBS, "consistency,idle,robustness,pause")


def concurrency(out: Path, name: str) -> dict:
    return checks(out, name)["concurrency"]


def board(out: Path, name: str) -> float:
    res = json.loads((out / name / "results.json").read_text())
    (entry,) = res["leaderboard"]
    assert entry["name"] == fmt.LEADERBOARD and entry["order"] == "desc"
    return entry["value"]


def test_an_rwlock_per_string_serves_writes_concurrently(graded):
    c = concurrency(graded, "rwlock_per_string")
    assert c["status"] == "pass", c["evidence"]
    assert any("serves writes to different strings concurrently" in x for x in c["evidence"])
    assert "each started afresh for each of its turns" in c["evidence"][0]


@pytest.mark.parametrize("name,design", [("one_mutex", "one mutex"),
                                         ("one_rwlock", "one rwlock")])
def test_a_one_lock_design_is_named_the_slower_choice_not_failed(graded, name, design):
    c = concurrency(graded, name)
    # one lock serves these writes one at a time; a busy machine may leave it unclear
    assert c["status"] in ("pass", "undetermined"), c["evidence"]
    if c["status"] == "pass":
        assert any(f"as its design ({design}, traced) does: the slower choice" in x
                   for x in c["evidence"])


def test_a_lock_per_string_that_serves_one_request_at_a_time_fails(graded):
    c = concurrency(graded, "serialised")
    assert c["status"] in ("fail", "undetermined"), c["evidence"]
    if c["status"] == "fail":
        assert any("an rwlock per string (traced) yet serves" in x for x in c["evidence"])
        assert "pthread_join" in (graded / "serialised" / "verdict.md").read_text()


@pytest.mark.parametrize("defect", ["clock_after_lock", "racy_clock"])
def test_the_clock_probe_judges_main_against_the_graders_rwlock_per_string(graded, defect):
    # racy_clock: each request's start time in one global shared by every thread
    honest, after = (checks(graded, n)["timing"] for n in ("one_mutex", defect))
    probe = "main under the grader's clock probe"
    line = next(x for x in honest["evidence"] if x.startswith(probe))
    assert honest["status"] == "pass", honest["evidence"]
    assert "rwlock per string's (kitref4)" in line and "left out" not in line, line
    # one mutex makes the probe's requests queue, unless the probe's client could not keep
    # them queued (a busy machine): then nothing is judged, never a fail
    line = next(x for x in after["evidence"] if x.startswith(probe))
    judged = "no lock waiting stands out" not in line
    assert "the lock waiting is in" not in line, line
    assert (after["status"] == "fail") is judged, after["evidence"]
    if judged:
        assert "the lock waiting is left out" in line, line
        assert any("before pthread_mutex_lock" in f for f in after["fix"])


def test_the_leaderboard_ranks_the_designs_by_the_graders_own_measurement(graded):
    speeds = {name: concurrency(graded, name)["leaderboard"]["speed"] for name in SUBS}
    # a lock per string serves 32 writes to distinct strings at least twice as fast as one
    # lock (each write sleeps under the lock); measured in turns, so noise hits all alike
    assert speeds["rwlock_per_string"] > 1.5 * max(speeds["one_mutex"], speeds["serialised"]), \
        speeds
    page = (graded / "rwlock_per_string" / "verdict.md").read_text()
    assert "99 % interval" in page and "speed against kitref4" in page
    # the class page: the ranked numbers in a sortable column, and why the others are not
    # (a clock that leaves the lock waiting out fails the timing check its speed rests on)
    index = (graded / "index.html").read_text()
    assert "data-key='speed'" in index
    for name, v in speeds.items():
        ev = json.loads((graded / name / "evidence.json").read_text())
        held = fmt.leaderboard_withheld(ev)
        if held:
            assert "leaderboard" not in json.loads((graded / name / "results.json").read_text())
            assert f"withheld: {held}</td>" in index, name
        else:
            assert board(graded, name) == round(v, 2)
            assert f"<td class='num' data-v='{round(v, 2):g}'>{v:.2f}</td>" in index, name
        if checks(graded, name)["timing"]["status"] == "fail":
            assert "timing FAIL" in held, name


def test_without_the_graders_servers_nothing_is_measured_nor_scored(tmp_path):
    if NO_SANDBOX:
        pytest.skip(f"no sandbox: {NO_SANDBOX}")
    tools = tmp_path / "bin"  # the lock tracer, but not the kit-style servers
    tools.mkdir()
    shutil.copy(REPO / "build" / "release" / "liblockprof.so", tools)
    sub = lab2024(tmp_path, "alone", 4)
    p = grade(sub, "--quick", "--runs", "1", "--sizes", "10", "--no-reference", "--no-progress",
              "--skip", "consistency,idle,design,robustness,pause", "--bin-dir", tools,
              "--out", tmp_path / "out")
    assert p.returncode == 0, p.stderr[-2000:]
    c = checks(tmp_path / "out", "alone")
    assert c["concurrency"]["status"] == "undetermined", c["concurrency"]
    assert "kitref1, kitref4) are not built" in c["concurrency"]["evidence"][0]
    assert "not run (needs a server to compare with" in "\n".join(c["timing"]["evidence"])
    res = json.loads((tmp_path / "out" / "alone" / "results.json").read_text())
    assert "leaderboard" not in res
    assert {t["name"]: t["max_score"] for t in res["tests"]}[c["concurrency"]["title"]] == 0
