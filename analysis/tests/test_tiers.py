"""The test tiers: pytest's markers are registered and enforced (pytest.ini), and
`./lockbench test` takes --quick and --only and refuses anything else."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCKBENCH = REPO / "lockbench"
TIERS = ("slow", "sandbox", "chromium", "root", "netns")


def pytest_run(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess:
    """pytest with the project's pytest.ini on one test file of this test's own."""
    (tmp_path / "test_probe.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "pytest", "-c", str(REPO / "pytest.ini"),
                           "--rootdir", str(tmp_path), "-p", "no:cacheprovider", *args,
                           str(tmp_path / "test_probe.py")],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


def test_every_tier_marker_is_registered(tmp_path):
    p = pytest_run(tmp_path, "def test_nothing():\n    pass\n", "--markers")
    assert p.returncode == 0, p.stdout + p.stderr
    for name in TIERS:
        assert f"@pytest.mark.{name}:" in p.stdout, name


def test_a_marker_not_registered_fails_the_run(tmp_path):
    p = pytest_run(tmp_path, "import pytest\n\n@pytest.mark.slwo\ndef test_typo():\n    pass\n")
    assert p.returncode != 0
    assert "'slwo' not found in `markers` configuration option" in p.stdout + p.stderr


def test_a_sandbox_test_not_marked_slow_fails_the_collection(tmp_path):
    p = pytest_run(tmp_path, "import pytest\n\n@pytest.mark.sandbox\ndef test_grading():\n"
                   "    pass\n")
    assert p.returncode != 0
    assert "test_grading (sandbox) but not slow" in p.stdout + p.stderr


def test_not_slow_leaves_out_the_slow_tests_and_runs_the_rest(tmp_path):
    p = pytest_run(tmp_path, "import pytest\n\n@pytest.mark.slow\n@pytest.mark.chromium\n"
                   "def test_page():\n    pass\n\ndef test_quick():\n    pass\n",
                   "-m", "not slow", "-q")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed, 1 deselected" in p.stdout


def lockbench_test(*args: str, timeout: float = 30, logs: Path | None = None
                   ) -> subprocess.CompletedProcess:
    """`./lockbench test ARGS` in this checkout. A gate run inside the gate keeps pytest's
    logs in LOGS, not in build/, where the outer run's failed lines are kept."""
    env = {**os.environ, "LOCKBENCH_PYTEST_LOGS": str(logs)} if logs else None
    return subprocess.run([str(LOCKBENCH), "test", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


@pytest.mark.parametrize("args,message", [
    (["--fast"], "unknown option '--fast'"),
    (["--only"], "--only needs a PATTERN"),
    (["--only", ""], "--only needs a PATTERN"),
    (["--only="], "--only needs a PATTERN"),
    (["--quick", "extra"], "unknown option 'extra'"),
])
def test_lockbench_test_refuses_a_bad_option_in_one_line_before_anything_runs(args, message):
    p = lockbench_test(*args)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == f"lockbench test: {message}" + (
        " (./lockbench test --help)" if "unknown" in message else "")
    assert p.stdout == ""


def test_lockbench_test_help_says_what_each_tier_runs():
    p = lockbench_test("--help")
    assert p.returncode == 0
    for words in ("--quick", "--only PATTERN", "ctest -R PATTERN", "pytest -k PATTERN",
                  "label `unit`", 'pytest -m "not slow"'):
        assert words in p.stdout, words


@pytest.mark.slow
def test_only_passes_its_pattern_to_ctest_and_to_pytest(tmp_path):
    # A C++ suite no Python test is named after: ctest runs it, pytest selects nothing.
    p = lockbench_test("--only", "ParseUnsignedTest", timeout=600, logs=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "ParseUnsignedTest." in p.stdout and "% tests passed" in p.stdout
    summary = [ln for ln in p.stdout.splitlines() if "deselected" in ln]
    assert summary and "passed" not in summary[-1], summary
    # A Python test no C++ test is named after: pytest runs exactly it.
    p = lockbench_test("--only", "test_every_tier_marker_is_registered", timeout=600,
                       logs=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "1 passed" in p.stdout and "% tests passed" not in p.stdout
    assert "1 passed" in (tmp_path / "pytest.log").read_text()
    p = lockbench_test("--only", "NoTestIsCalledThis", timeout=600, logs=tmp_path)
    assert p.returncode == 1
    assert "no test matches 'NoTestIsCalledThis'" in p.stderr
