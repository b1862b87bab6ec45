"""The tier rule, loaded by pytest.ini (-p analysis.tests.tiers) on every run: a test that
needs the sandbox, Chromium, root, network namespaces or a quiet machine is also `slow`, so that
`pytest -m "not slow"` (./lockbench test --quick) can never start one. A test marked with
one of them and not `slow` fails the collection, naming it."""

import pytest

NEEDS = ("sandbox", "chromium", "root", "netns", "quiet")


def pytest_collection_modifyitems(config, items):
    bad = []
    for item in items:
        needs = [m for m in NEEDS if item.get_closest_marker(m)]
        if needs and not item.get_closest_marker("slow"):
            bad.append(f"{item.nodeid} ({', '.join(needs)})")
    if bad:
        raise pytest.UsageError("marked as needing " + "; ".join(bad)
                                + " but not slow: add @pytest.mark.slow")
