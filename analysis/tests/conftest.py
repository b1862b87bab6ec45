"""pytest fixtures shared by the analysis tests."""

import os
from pathlib import Path

import pytest

from analysis.tests.helpers import KIT_NAMES, kit_fixture, link_real_binaries


@pytest.fixture
def real_bin(tmp_path) -> Path:
    """A bin dir of this test's own: symlinks to the real main1..main4, lockserver and client of the
    build (build/release or $LOCKBENCH_BIN_DIR), and to its CMakeCache.txt for the
    metadata. The servers' argv[0] is then a path no other test uses, so a test can find
    (and kill) exactly its own processes in /proc. Skips when the build is missing."""
    return link_real_binaries(tmp_path / "bin")


@pytest.fixture(scope="session")
def kit_fixtures(tmp_path_factory) -> Path:
    """A folder holding every honest kit-style fixture (helpers.KIT_NAMES) as a submission:
    FOLDER/<name>, kitserver.h beside main.c, not built; made once per session. Grade them
    as they are; a test that changes one makes its own copy (helpers.kit_fixture)."""
    root = tmp_path_factory.mktemp("kit_fixtures")
    for name in KIT_NAMES:
        kit_fixture(name, root)
    return root


def pytest_runtest_logstart(nodeid, location):
    """The gate names the test that was running when pytest died without a report (killed by
    a signal, out of memory): its output is block-buffered and says nothing then."""
    current = os.environ.get("LOCKBENCH_PYTEST_CURRENT")
    if current:
        Path(current).write_text(nodeid + "\n")
