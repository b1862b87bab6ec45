"""pytest fixtures shared by the analysis tests."""

from pathlib import Path

import pytest

from analysis.tests.helpers import link_real_binaries


@pytest.fixture
def real_bin(tmp_path) -> Path:
    """A bin dir of this test's own: symlinks to the real main1..main4, lockserver and client of the
    build (build/release or $LOCKBENCH_BIN_DIR), and to its CMakeCache.txt for the
    metadata. The servers' argv[0] is then a path no other test uses, so a test can find
    (and kill) exactly its own processes in /proc. Skips when the build is missing."""
    return link_real_binaries(tmp_path / "bin")
