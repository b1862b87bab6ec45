"""pytest fixtures shared by the analysis tests."""

from pathlib import Path

import pytest

from analysis.tests.helpers import HERE


@pytest.fixture
def fake_bin(tmp_path) -> Path:
    """A bin dir whose main1..main4 and client are the Python stand-ins in fakes/."""
    d = tmp_path / "bin"
    d.mkdir()
    for s in ("main1", "main2", "main3", "main4"):
        (d / s).symlink_to(HERE / "fakes" / "fake_server.py")
    (d / "client").symlink_to(HERE / "fakes" / "fake_client.py")
    return d
