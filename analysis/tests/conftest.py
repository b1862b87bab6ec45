"""pytest fixtures shared by the analysis tests."""

from pathlib import Path

import pytest

from analysis.tests.helpers import BINARIES, RELEASE, real_binaries_missing


@pytest.fixture
def real_bin(tmp_path) -> Path:
    """A bin dir of this test's own: symlinks to the real main1..main4, lockserver and client of the
    build (build/release or $LOCKBENCH_BIN_DIR), and to its CMakeCache.txt for the
    metadata. The servers' argv[0] is then a path no other test uses, so a test can find
    (and kill) exactly its own processes in /proc. Skips when the build is missing."""
    missing = real_binaries_missing()
    if missing:
        pytest.skip(missing)
    from analysis.runner import find_binary
    d = tmp_path / "bin"
    d.mkdir()
    for name in BINARIES:
        (d / name).symlink_to(find_binary(RELEASE, name).resolve())
    if (RELEASE / "CMakeCache.txt").is_file():
        (d / "CMakeCache.txt").symlink_to((RELEASE / "CMakeCache.txt").resolve())
    return d
