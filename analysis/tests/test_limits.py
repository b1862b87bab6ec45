"""The bounds `python -m analysis` checks before it passes a value on to a server or the
client are the C++ command lines' own: common/limits.h is the one place they are written,
and this test reads that header, so a bound changed there and not here (or the reverse)
fails."""

import re

import pytest

from analysis.runner import cli as M
from analysis.tests.helpers import REPO

HEADER = REPO / "common" / "limits.h"
CONSTANT = re.compile(r"^inline constexpr [\w:]+ (k\w+) = ([0-9']+);", re.M)


def header_bounds():
    """{name: value} of every bound in common/limits.h; each must be a plain decimal
    literal (digit separators allowed), so none can be skipped unread."""
    text = HEADER.read_text()
    bounds = {name: int(value.replace("'", "")) for name, value in CONSTANT.findall(text)}
    assert len(bounds) == text.count("inline constexpr "), "a bound in limits.h is not a literal"
    return bounds


@pytest.mark.parametrize("python_name, header_name", [
    ("MAX_N", "kMaxArraySize"),
    ("MAX_THREADS", "kMaxClientThreads"),
    ("MAX_DELAY_US", "kMaxDelayUs"),
    ("MAX_STRIPES", "kMaxStripes"),
])
def test_python_bound_is_the_headers(python_name, header_name):
    assert getattr(M, python_name) == header_bounds()[header_name]


def test_every_bound_is_read():
    bounds = header_bounds()
    assert {"kMaxArraySize", "kMaxClientThreads", "kMaxDelayUs", "kMaxStripes"} <= set(bounds)
    assert all(v > 0 for v in bounds.values())
