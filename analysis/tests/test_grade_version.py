"""Which grader graded a page: a checkout's commit, a bundle's VERSION, or for a copy
without .git (a release from `git archive` or a forge's download) the commit and date
that `git archive` writes into analysis/grade/release.txt."""

import io
import subprocess
import tarfile
from pathlib import Path

from analysis.grade import cli

REPO = Path(__file__).resolve().parents[2]


def test_a_release_made_by_git_archive_names_its_commit_and_date(tmp_path):
    tar = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD", "analysis/grade/release.txt"],
                         capture_output=True, check=True).stdout
    release = tmp_path / "release.txt"
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        release.write_bytes(t.extractfile("analysis/grade/release.txt").read())
    head = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%h %cs"],
                          capture_output=True, text=True, check=True).stdout.split()
    got = cli.release_version(release)
    assert got == f"{head[0]} (released {head[1]})"


def test_a_copy_that_carries_no_version_says_unknown(tmp_path):
    assert cli.release_version(tmp_path / "absent.txt") == "unknown"
    unfilled = tmp_path / "release.txt"
    unfilled.write_text((REPO / "analysis" / "grade" / "release.txt").read_text())
    assert cli.release_version(unfilled) == "unknown"   # a checkout's own, never filled
    unfilled.write_text("<script> 2026-12-01\n")
