"""The course-platform bundles, run for real: `grade --bundle gradescope` writes
autograder.zip, whose setup.sh and run_autograder are run on a fake /autograder root
(AUTOGRADER_ROOT) holding a fixture submission, with bubblewrap and with bubblewrap (and
mounting) unavailable as in Gradescope's container; the results are checked against
Gradescope's documented fields. The same for PrairieLearn's external grader (PL_ROOT).
Also: --budget keeps grading inside its time, and the bundles' command line refusals."""

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from analysis.grade import records as checks
from analysis.grade.pages import fmt
from analysis.grade.similarity import compare as S
from analysis.grade.trust import isolation, sandbox
from analysis.tests.helpers import kit_fixture
from analysis.tests.test_grade_similarity import tokenizer_bomb

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

REPO = Path(__file__).resolve().parents[2]
NO_SANDBOX = sandbox.available()
NOT_ROOT = "" if os.geteuid() == 0 else "container mode needs root"

# Gradescope's autograder specification: the fields results.json and each test may have.
GS_TOP = {"score", "execution_time", "output", "output_format", "test_output_format",
          "test_name_format", "visibility", "stdout_visibility", "extra_data", "tests",
          "leaderboard", "max_score"}
GS_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output",
           "output_format", "tags", "visibility", "extra_data"}
GS_VISIBILITY = {"visible", "hidden", "after_due_date", "after_published"}
# PrairieLearn's external grader results.
PL_TOP = {"gradable", "score", "message", "output", "tests", "format_errors", "images",
          "partial_scores", "feedback"}
PL_TEST = {"name", "description", "points", "max_points", "message", "output", "images"}

FAKE_BWRAP = ("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely "
              "because the kernel does not allow non-privileged user namespaces' >&2\nexit 1\n")
FAKE_MOUNT = "#!/bin/sh\necho 'mount: permission denied' >&2\nexit 32\n"


def grade(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "analysis.grade", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=timeout,
                          env={**os.environ, **(env or {})})


def check_gradescope(res: dict) -> None:
    assert set(res) <= GS_TOP, set(res) - GS_TOP
    assert isinstance(res["score"], (int, float)) and isinstance(res["output"], str)
    assert isinstance(res.get("execution_time", 0), int)
    assert res.get("visibility", "visible") in GS_VISIBILITY
    assert res["tests"], "at least one test"
    for t in res["tests"]:
        assert set(t) <= GS_TEST, set(t) - GS_TEST
        assert t["status"] in ("passed", "failed") and isinstance(t["name"], str)
        assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float))
        assert 0 <= t["score"] <= t["max_score"] or t["max_score"] == 0
        assert t.get("visibility", "visible") in GS_VISIBILITY


def check_prairielearn(res: dict) -> None:
    assert set(res) <= PL_TOP, set(res) - PL_TOP
    assert isinstance(res["gradable"], bool)
    assert isinstance(res["score"], float) and 0.0 <= res["score"] <= 1.0
    for t in res["tests"]:
        assert set(t) <= PL_TEST, set(t) - PL_TEST
        assert isinstance(t["name"], str) and 0 <= t["points"] <= t["max_points"]


def grade_folders() -> set:
    """Container mode's private folders now on this machine."""
    return {*Path("/tmp").glob("lockbench-grade-*"), *Path("/var/tmp").glob("lockbench-grade-*")}


def fake_path(tmp: Path) -> str:
    """PATH with a bwrap and a mount that fail as they do in an unprivileged container."""
    d = tmp / "fakebin"
    d.mkdir()
    for name, text in (("bwrap", FAKE_BWRAP), ("mount", FAKE_MOUNT)):
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    return f"{d}:{os.environ['PATH']}"


@pytest.fixture(scope="module")
def gs_bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle")
    weights = out / "weights.toml"
    weights.write_text((REPO / "analysis" / "grade_weights.toml").read_text()
                       + 'timing = "after_due_date"\n')
    p = grade("--bundle", "gradescope", "--out", out, "--quick", "--budget", "150",
              "--weights", weights)
    assert p.returncode == 0, p.stderr
    return out / "autograder.zip"


def autograder_root(tmp: Path, bundle: Path, submission: Path) -> Path:
    """A fake /autograder: source/ unzipped and set up, run_autograder, the submission."""
    root = tmp / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "results").mkdir()
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
    for f in ("setup.sh", "run_autograder", "lockbench/setup.sh"):  # zip keeps no modes
        (root / "source" / f).chmod(0o755)
    p = subprocess.run([str(root / "source" / "setup.sh")], cwd=root / "source",
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    shutil.copytree(submission, root / "submission")
    return root


def run_autograder(root: Path, path: str | None = None, extra: dict | None = None) -> dict:
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), **(extra or {})}
    if path:
        env["PATH"] = path
    p = subprocess.run([str(root / "run_autograder")], cwd=root, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text())


def test_the_zip_holds_the_two_scripts_at_its_root_and_the_course_weights(gs_bundle):
    with zipfile.ZipFile(gs_bundle) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        settings = json.loads(z.read("lockbench/bundle.json"))
        weights = z.read("lockbench/grade_weights.toml").decode()
    assert {"setup.sh", "run_autograder", "lockbench/analysis/grade/worker.py",
            "lockbench/profile/lockprof.cpp", "lockbench/VERSION"} <= names
    assert not any("/tests/" in n or n.endswith(".pyc") for n in names)
    assert modes["run_autograder"] & stat.S_IXUSR and modes["setup.sh"] & stat.S_IXUSR
    assert settings["budget_s"] == 150 and settings["quick"] is True
    assert settings["sandbox"] == "auto" and 'timing = "after_due_date"' in weights


@pytest.mark.skipif(bool(NO_SANDBOX), reason=f"no sandbox: {NO_SANDBOX}")
def test_run_autograder_with_bubblewrap_writes_gradescope_results(gs_bundle, tmp_path,
                                                                   kit_fixtures):
    root = autograder_root(tmp_path, gs_bundle, kit_fixtures / "correct")
    res = run_autograder(root)
    check_gradescope(res)
    # 100, or 90 with the design check undetermined on a busy machine (not scored)
    assert res["score"] == res["max_score"] >= 90, res["output"][:2000]
    assert "Sandbox: bubblewrap" in res["output"]
    seen = {t["name"]: t.get("visibility") for t in res["tests"]}
    assert seen["The timing file server_output_time_aggregated"] == "after_due_date"
    assert 0 < res["execution_time"] <= 150


@pytest.mark.skipif(bool(NO_SANDBOX), reason=f"no sandbox: {NO_SANDBOX}")
def test_run_autograder_tells_a_2024_main_apart_and_fills_the_leaderboard(gs_bundle, tmp_path):
    root = autograder_root(tmp_path, gs_bundle,
                           kit_fixture("lab2024_main", tmp_path / "subs", "student"))
    assert (root / "source" / "lockbench" / "bin" / "kitref4").is_file()  # setup.sh built it
    res = run_autograder(root)
    check_gradescope(res)
    assert "graded as the 2024+ lab" in res["output"], res["output"][:2000]
    # ranked when every check its speed rests on passed; a busy machine may leave the design
    # or the concurrency check undetermined, and then the page says it is withheld
    if "leaderboard" in res:
        (board,) = res["leaderboard"]
        assert board["name"] == fmt.LEADERBOARD and board["order"] == "desc"
        assert board["value"] > 0
    else:
        assert "leaderboard: withheld" in json.dumps(res) and "UNDETERMINED)" in json.dumps(res)
    # an rwlock per string: concurrent (10 of 10), or not scored on a busy machine
    c = {t["name"]: t for t in res["tests"]}[checks.BY_ID["concurrency"].title]
    assert c["status"] == "passed" and c["score"] == c["max_score"] in (0, 10), c


@pytest.mark.root
@pytest.mark.skipif(bool(NOT_ROOT), reason=NOT_ROOT)
def test_run_autograder_without_bubblewrap_grades_in_container_mode(gs_bundle, tmp_path,
                                                                     kit_fixtures):
    before = grade_folders()
    root = autograder_root(tmp_path, gs_bundle, kit_fixtures / "correct")
    res = run_autograder(root, path=fake_path(tmp_path))
    check_gradescope(res)
    # 100, or 90 with the design check undetermined on a busy machine (not scored)
    assert res["score"] == res["max_score"] >= 90, res["output"][:2000]
    assert "container mode (bubblewrap unavailable: bubblewrap cannot start" in res["output"]
    assert "no tmpfs could be mounted" in res["output"]
    assert grade_folders() == before  # its folder is gone
    uids = {isolation.UID_BASE + i for i in range(8)}
    assert not isolation.processes_of(uids)


@pytest.mark.root
@pytest.mark.skipif(bool(NOT_ROOT), reason=NOT_ROOT)
def test_container_mode_still_runs_the_submission_unprivileged_under_limits(tmp_path):
    sub = tmp_path / "probe"
    sub.mkdir()
    (sub / "Makefile").write_text("all:\n\t@echo \"probe uid=$$(id -u) fsize=$$(ulimit -f) "
                                  "cpu=$$(ulimit -t) caps=$$(grep CapEff /proc/self/status "
                                  "| tr -d '\\t')\"; false\n")
    out = tmp_path / "grades"
    p = grade(sub, "--quick", "--no-reference", "--no-progress", "--out", out,
              "--sandbox", "container")
    assert p.returncode == 0, p.stderr
    text = (out / "probe" / "evidence.json").read_text()
    probe = text[text.index("probe uid="):].split('"')[0]
    fields = dict(f.split("=", 1) for f in probe.split()[1:])
    assert int(fields["uid"]) >= isolation.UID_BASE
    assert fields["fsize"] == str(sandbox.Limits().file_size // 512)
    assert fields["cpu"] == str(sandbox.Limits().cpu_s)
    assert fields["caps"] == "CapEff:0000000000000000"


@pytest.mark.root
@pytest.mark.skipif(bool(NOT_ROOT), reason=NOT_ROOT)
def test_when_grading_cannot_run_the_results_say_why_and_blame_the_grader(
        gs_bundle, tmp_path, kit_fixtures):
    root = autograder_root(tmp_path, gs_bundle, kit_fixtures / "correct")
    res = run_autograder(root, path=fake_path(tmp_path),
                         extra={"LOCKBENCH_SANDBOX": "bubblewrap"})
    check_gradescope(res)
    (test,) = res["tests"]
    assert test["status"] == "failed" and "bubblewrap sandbox unavailable" in test["output"]
    assert "grader's failure, not a verdict on your code" in res["output"]


@pytest.fixture(scope="module")
def pl_bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("plbundle")
    # the course of today: every hand-in graded as the 2024+ lab (one server main)
    p = grade("--bundle", "prairielearn", "--out", out, "--quick", "--budget", "150",
              "--lab", "2024")
    assert p.returncode == 0, p.stderr
    dst = out / "prairielearn"
    p = subprocess.run([str(dst / "lockbench" / "setup.sh")], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return dst


def run_prairielearn(dst: Path, tmp: Path, submission: Path, path: str | None = None) -> dict:
    root = tmp / "grade"
    (root / "results").mkdir(parents=True)
    shutil.copytree(submission, root / "student")
    env = {**os.environ, "PL_ROOT": str(root), **({"PATH": path} if path else {})}
    p = subprocess.run([str(dst / "lockbench" / "run_prairielearn")], env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text())


def test_the_prairielearn_bundle_has_its_image_and_question_settings(pl_bundle):
    info = json.loads((pl_bundle / "info.json").read_text())["externalGradingOptions"]
    assert info["entrypoint"] == "/lockbench/run_prairielearn" and info["enabled"] is True
    assert info["timeout"] > 150  # the budget fits inside PrairieLearn's limit
    docker = (pl_bundle / "Dockerfile").read_text()
    assert "COPY lockbench /lockbench" in docker and "/lockbench/setup.sh" in docker


@pytest.mark.root
@pytest.mark.skipif(bool(NOT_ROOT), reason=NOT_ROOT)
def test_prairielearn_grades_an_honest_submission(pl_bundle, tmp_path):
    sub = kit_fixture("lab2024_main", tmp_path / "subs", "student")
    res = run_prairielearn(pl_bundle, tmp_path, sub,
                           path=None if not NO_SANDBOX else fake_path(tmp_path))
    check_prairielearn(res)
    assert res["gradable"] is True and res["score"] == 1.0, res["output"][:2000]
    assert len(res["tests"]) >= 10 and "graded as the 2024+ lab" in res["output"]


@pytest.mark.root
@pytest.mark.skipif(bool(NOT_ROOT), reason=NOT_ROOT)
def test_prairielearn_does_not_charge_an_attempt_for_a_build_failure(pl_bundle, tmp_path):
    sub = tmp_path / "broken"
    sub.mkdir()
    (sub / "Makefile").write_text("all: main1\nmain1: main.c\n\tgcc -o $@ main.c\n")
    (sub / "main.c").write_text("int main( { this is not C\n")
    res = run_prairielearn(pl_bundle, tmp_path, sub, path=fake_path(tmp_path))
    check_prairielearn(res)
    assert res["gradable"] is False and "did not build" in res["message"]


@pytest.mark.skipif(bool(NO_SANDBOX), reason=f"no sandbox: {NO_SANDBOX}")
def test_a_budget_cuts_the_runs_and_grading_ends_in_time(tmp_path, kit_fixtures):
    # What is asserted is the grader's own account (the runs it cut, the time it records),
    # not this machine's wall clock: the subprocess's own timeout only stops a hang.
    p = grade(kit_fixtures / "correct", "--no-reference", "--no-progress", "--out", tmp_path,
              "--budget", "45")
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "correct" / "results.json").read_text())
    ev = json.loads((tmp_path / "correct" / "evidence.json").read_text())
    workload = next(c for c in ev["checks"] if c["id"] == "workload")
    assert any("time budget cut the runs per setting from 100" in x
               for x in workload["evidence"])
    assert res["execution_time"] <= 45
    # a check left out for time is not scored, never failed
    assert all(c["status"] != "fail" for c in ev["checks"]), ev["checks"]


@pytest.mark.parametrize("args, says", [
    (["--bundle", "gradescope", "somewhere"], "give no SUBMISSION"),
    (["--bundle", "moodle"], "invalid choice"),
    (["--budget", "0", "x"], "out of range"),
    (["--budget", "inf", "x"], "is not a decimal number"),
    (["--budget", "+5", "x"], "is not a decimal number"),
    (["--runs", "1e3", "x"], "is not a decimal integer"),
    (["--budget", "nan", "x"], "--budget"),
    ([], "give at least one SUBMISSION"),
    (["--similarity", "--boilerplate", "/nonexistent", "x"], "--boilerplate"),
    (["--boilerplate", "."], "needs --similarity"),
    (["--sandbox", "chroot", "x"], "invalid choice"),
])
def test_bad_bundle_and_budget_options_are_refused_with_one_line(args, says, tmp_path):
    p = grade(*args, "--out", tmp_path / "o")
    assert p.returncode == 2 and says in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.skipif(bool(NO_SANDBOX), reason=f"no sandbox: {NO_SANDBOX}")
def test_a_class_with_similarity_flags_the_copy_on_the_dashboard(tmp_path):
    """The similarity fixtures (sources without a Makefile: each fails to build at once)
    graded as a class with --similarity and the kit as boilerplate."""
    sim = Path(__file__).parent / "fixtures" / "similarity"
    out = tmp_path / "grades"
    # beside them, a source copydetect's tokenizer would take minutes on: it is named, the
    # phase ends within its limit and every class page is written
    bomb = tokenizer_bomb(tmp_path, "frank")
    p = grade(*(sim / n for n in ("alice", "bob_copy", "carol", "dave", "erin")), bomb,
              "--quick", "--no-reference", "--no-progress", "--out", out, "--similarity",
              "--boilerplate", sim / "kit", timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (out / "similarity.html").is_file() and (out / "similarity.csv").is_file()
    for page in ("index.html", "summary.csv", "frank/verdict.html", "alice/verdict.html"):
        assert (out / page).is_file(), page
    assert (f"frank: not fingerprinted within {S.PER_SUBMISSION_S:.0f} s"
            in (out / "similarity.html").read_text())
    index = (out / "index.html").read_text()
    assert "href='similarity.html'" in index or 'href="similarity.html"' in index
    rows = {r["submission"]: r for r in csv_rows(out / "summary.csv")}
    assert "bob_copy" in rows["alice"]["similarity"] and "alice" in rows["bob_copy"]["similarity"]
    assert not rows["carol"]["similarity"] and not rows["dave"]["similarity"]


def csv_rows(path: Path) -> list:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.skipif(bool(NO_SANDBOX), reason=f"no sandbox: {NO_SANDBOX}")
def test_a_budget_too_small_for_the_workload_still_hands_in_results_in_time(tmp_path):
    """The worker hands in what it has before the outer limit: checks not finished are
    undetermined (not scored), never failed, and the grading is not lost."""
    # A correct server made slow (2 ms inside each critical section, where it had 10 us), so
    # the workload (hundreds of seconds of delays) cannot fit 20 s however fast the machine
    # is, while the build fits it on a busy one.
    slow = kit_fixture("correct", tmp_path)
    source = slow / "kitserver.h"
    text = source.read_text()
    assert "#define ACCESS_DELAY() usleep(10)" in text  # else this test would time nothing
    source.write_text(text.replace("#define ACCESS_DELAY() usleep(10)",
                                   "#define ACCESS_DELAY() usleep(2000)"))
    out = tmp_path / "out"
    # what is asserted is the hand-in at the budget (its log line), not the clock: grade()'s
    # timeout only stops a hang
    p = grade(slow, "--no-reference", "--no-progress", "--out", out, "--budget", "20")
    assert p.returncode == 0, p.stderr
    ev = json.loads((out / "correct" / "evidence.json").read_text())
    status = {c["id"]: c["status"] for c in ev["checks"]}
    assert not ev.get("error") and status["build"] == "pass", ev
    assert status["workload"] == "undetermined" and "fail" not in status.values(), status
    assert any("handed in" in line for line in ev["log"])


def _cpu_cgroup() -> Path | None:
    """A fresh cgroup v1 cpu folder this test may use, or None (v2 only, no root)."""
    base = Path("/sys/fs/cgroup/cpu")
    if NOT_ROOT or not (base / "cgroup.procs").is_file():
        return None
    d = base / f"lockbench-test-{os.getpid()}"
    try:
        d.mkdir()
    except OSError:
        return None
    return d


def test_a_cgroup_cpu_quota_is_the_cpus_the_grader_counts():
    """Gradescope gives half a CPU while every core is visible: the grader must count 0.5."""
    d = _cpu_cgroup()
    if d is None:
        pytest.skip("no writable cgroup v1 cpu controller here")
    try:
        (d / "cpu.cfs_period_us").write_text("100000")
        (d / "cpu.cfs_quota_us").write_text("50000")
        code = (f"import os; open('{d}/cgroup.procs', 'w').write(str(os.getpid())); "
                "from analysis.grade.trust import isolation; print(isolation.effective_cpus())")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=REPO, timeout=60)
        assert p.returncode == 0, p.stderr
        assert float(p.stdout) == 0.5
    finally:
        for _ in range(50):
            try:
                d.rmdir()
                break
            except OSError:
                time.sleep(0.1)
