"""A verdict only from evidence (analysis/grade/checks/evidence.py): every check's record says what
it counts as judged, every runner reports how much it judged, and a check passes only on
something judged: FAIL when the submission answered nothing, UNDETERMINED when the grader
lost its own measurement. The rule is checked check by check here, and end to end: an
honest server of each version passes every check, design and concurrency included, and
--memory names the line of a heap overflow."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.grade import labs
from analysis.grade import records as C
from analysis.grade import worker as W
from analysis.grade.checks import evidence as E
from analysis.grade.checks.timing import check_timing
from analysis.grade.trust import sandbox
from analysis.tests.helpers import kit_fixture, lab2024

REPO = Path(__file__).resolve().parents[2]
JUDGING = [c.id for c in C.CHECKS]


def test_every_check_says_what_it_judges_and_has_a_runner_and_a_stage():
    for c in C.CHECKS:
        assert c.judges and c.stage in C.STAGES, c.id
    for r in C.RECORDS:   # every function a record names resolves, as the worker resolves it
        assert r.stage in C.STAGES and r.kind in (C.CHECK, C.MEASUREMENT), r.id
        for spec in filter(None, (r.runner, r.ends, r.after)):
            assert callable(W.runner(spec)), spec
    assert all(r.runner for r in C.RECORDS)
    assert set(C.SKIPPABLE) == {r.id for r in C.RECORDS if r.skippable}
    assert not set(C.SKIPPABLE) & set(C.ORDER[:4]), "what everything stands on is never skipped"
    # the lab versions' checks come from the records, in page order
    assert labs.by_name("2019-2023").checks == C.for_lab("2019-2023")[:-2]
    assert "speed" not in labs.by_name("2024+").checks
    assert "concurrency" in labs.by_name("2018").checks


@pytest.mark.parametrize("cid", JUDGING)
def test_a_pass_on_nothing_judged_fails_when_nothing_came_back(cid):
    got = E.apply({"id": cid, "status": "pass", "evidence": [], "judged": 0}, {"main": 0})
    assert got["status"] == "fail" and got["fraction"] == 0.0, got
    assert "answered no request" in got["evidence"][-1]
    assert got["evidence"][0] == f"judged: 0 {C.BY_ID[cid].judges}"


@pytest.mark.parametrize("cid", JUDGING)
def test_a_pass_on_nothing_judged_is_undetermined_when_the_grader_lost_it(cid):
    got = E.apply({"id": cid, "status": "pass", "evidence": ["x"]}, {"main": 1000})
    assert got["status"] == "undetermined", got
    assert "a pass needs evidence" in got["evidence"][-1]


@pytest.mark.parametrize("cid", JUDGING)
def test_a_pass_needs_every_server_it_judges_to_have_been_judged(cid):
    judged = {"main1": 12, "main2": 0}
    got = E.apply({"id": cid, "status": "pass", "evidence": [], "judged": judged},
                  {"main1": 1000, "main2": 0})
    assert got["status"] == "fail" and "nothing of main2 was judged" in got["evidence"][-1]
    assert got["evidence"][0] == f"judged: 12 {C.BY_ID[cid].judges} (main1 12, main2 0)"
    got = E.apply({"id": cid, "status": "pass", "evidence": [], "judged": judged},
                  {"main1": 1000, "main2": 1000})
    assert got["status"] == "undetermined"
    ok = E.apply({"id": cid, "status": "pass", "evidence": [], "judged": {"main1": 3}}, {})
    assert ok["status"] == "pass"


def test_what_did_not_pass_keeps_its_verdict_and_says_what_it_judged():
    for status in ("fail", "undetermined", "skip"):
        got = E.apply({"id": "timing", "status": status, "evidence": [], "judged": 0}, {})
        assert got["status"] == status and got["evidence"] == ["judged: 0 timing lines judged"]
    left_out = {"id": "speed", "status": "undetermined", "evidence": ["left out"],
                "not_run": True}
    assert E.apply(left_out, {}) == left_out


def grade(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "analysis", "grade", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=timeout)


MEASURED = ("design", "concurrency", "speed")


@pytest.mark.slow
@pytest.mark.sandbox
@pytest.mark.quiet
def test_an_honest_server_of_each_version_passes_every_check_design_and_concurrency_included(
        tmp_path):
    """One grading at a time (no --jobs), with the default settings' longer looks at the
    bursts (not --quick): a check that stopped judging fails this test. A busy machine can
    leave a measurement undetermined (the grader's loss, not scored): such a submission is
    graded again, at most three times in all, and must pass in one of them."""
    if sandbox.available():
        pytest.skip(f"no sandbox: {sandbox.available()}")
    subs = [kit_fixture("correct", tmp_path), lab2024(tmp_path, "main_rwlock_per_string")]
    for sub in subs:
        for attempt in range(3):
            out = tmp_path / f"out{attempt}"
            p = grade(sub, "--runs", "2", "--sizes", "10,1000", "--no-reference",
                      "--no-progress", "--skip", "pause", "--out", out)
            assert p.returncode == 0, p.stderr[-2000:]
            ev = json.loads((out / sub.name / "evidence.json").read_text())
            got = {c["id"]: c["status"] for c in ev["checks"]}
            if not any(got.get(m) == "undetermined" for m in MEASURED):
                break
        assert set(got.values()) == {"pass"}, (sub.name, got)
        assert set(got) == set(labs.by_name(ev["lab"]["name"]).checks)


@pytest.mark.slow
@pytest.mark.sandbox
def test_memory_names_the_kind_and_line_of_a_heap_overflow(tmp_path):
    if sandbox.available():
        pytest.skip(f"no sandbox: {sandbox.available()}")
    subs = [lab2024(tmp_path, "heap_overflow", defects="HEAP_OVERFLOW"),
            lab2024(tmp_path, "heap_clean")]
    skip = ",".join(C.SKIPPABLE)
    p = grade(*subs, "--quick", "--runs", "1", "--sizes", "10", "--no-reference",
              "--no-progress", "--memory", "--idle-pause", "0", "--skip", skip,
              "--out", tmp_path / "out")
    assert p.returncode == 0, p.stderr[-2000:]

    def memory(name):
        ev = json.loads((tmp_path / "out" / name / "evidence.json").read_text())
        return next(c for c in ev["checks"] if c["id"] == "memory")

    bad, clean = memory("heap_overflow"), memory("heap_clean")
    assert bad["status"] == "fail", bad
    assert bad["evidence"][0].startswith("main: heap-buffer-overflow in start_request server.c:")
    assert clean["status"] == "pass" and "no memory error" in clean["evidence"][0], clean


def _setting(**kw) -> dict:
    e = {"runs": 2, "runs_done": 2, "requests_ok": 2000, "failure": "",
         "client_mean_s": [1e-3] * 2, "timing": ["2.0e-04", "2.1e-04"], "timing_problem": "",
         "short": [], "outcomes": {}, "unreplied_writes": 0}
    return {**e, **kw}


def test_the_timing_file_is_judged_on_the_batches_that_went_through():
    # no batch of 1000 went through (a hang in the first run): no line was due, none judged
    hung = {"main1": {10: _setting(runs_done=0, timing=None, client_mean_s=[],
                                   failure="run 1: hangs")}}
    c = check_timing(hung, 2)
    assert "no batch of 1000 requests went through" in c["evidence"][0]
    assert "no server_output_time_aggregated file" not in "\n".join(c["evidence"])
    assert E.apply(c, {"main1": 300})["status"] == "undetermined"
    # one batch went through before the hang: its line is due and judged, and a missing
    # file is then a fail
    one = {"main1": {10: _setting(runs_done=1, timing=["2.0e-04"], client_mean_s=[1e-3],
                                  failure="run 2: hangs")}}
    assert check_timing(one, 2)["status"] == "pass"
    none = {"main1": {10: _setting(runs_done=1, timing=None, client_mean_s=[1e-3],
                                   failure="run 2: hangs")}}
    c = check_timing(none, 2)
    assert c["status"] == "fail" and "no server_output_time_aggregated file" in c["evidence"][0]
