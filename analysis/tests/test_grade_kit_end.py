"""The kit's workload run to its end, and a leaderboard nobody can game: 2024+ hand-ins
(lab2024_main's DEFECT) graded as a TA grades them. One grading shared by the module:

- `write_no_reply`: reads answered, each write done and its connection closed without a
  reply. The kit's client reads 0 bytes and goes on, so its runs finish and every batch
  of 1000 gets its timing line; only the write's reply is wrong, and fails once, named.
- `no_delay`: a correct mutex per string that leaves the kit's usleep(10) out of its
  accesses. Its holds are far shorter than the delay allows, so it is fast: named "skips
  the kit's delay" by the design and timing checks, with the hold times, and its speed is
  withheld from the leaderboard.
- `honest`: the same mutex per string with the delay, ranked when its checks pass."""

import json
from pathlib import Path

import pytest

from analysis.tests.helpers import BUSY_UNDETERMINED, graded_2024
from analysis.tests.test_grade import checks

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

SUBS = {"write_no_reply": (4, "WRITE_NO_REPLY"), "no_delay": (2, "NO_DELAY"), "honest": (2, "")}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return graded_2024(tmp_path_factory, SUBS, "idle,robustness,pause")


def text(c: dict) -> str:
    return "\n".join(c["evidence"])


def results(out: Path, name: str) -> dict:
    return json.loads((out / name / "results.json").read_text())


def test_writes_closed_without_a_reply_fail_the_write_reply_once_and_nothing_else(graded):
    c = checks(graded, "write_no_reply")
    # the kit's client goes on after a 0-byte read: every run went through
    assert c["workload"]["status"] == "pass", c["workload"]["evidence"]
    assert "2 runs, " in text(c["workload"]) and " closed without a reply" in text(c["workload"])
    assert "finding: main:" in text(c["workload"]) and "writes); the kit's client reads 0 " \
        "bytes, goes on" in text(c["workload"])
    # the write's reply: failed once, named, with its fix; the histories still checked
    con = c["consistency"]
    assert con["status"] == "fail", con["evidence"]
    assert sum("answered with nothing" in x for x in con["evidence"]) == 1, con["evidence"]
    assert any("answer every request before closing" in f for f in con["fix"])
    assert "judged: 0 " not in text(con)
    # every batch of 1000 went through, so its line was due and came
    t = c["timing"]
    assert t["status"] == "pass", t["evidence"]
    assert "no server_output_time_aggregated file" not in text(t)
    assert any("plausible %e lines" in x for x in t["evidence"]), t["evidence"]
    # the grader's bursts end a write at its close: the design and the speed are measured
    for cid in ("design", "concurrency"):
        assert c[cid]["status"] in ("pass", "undetermined"), c[cid]["evidence"]
        assert "closed before its reply" not in text(c[cid])


def test_a_server_that_skips_the_kits_delay_is_named_with_its_hold_times(graded):
    c = checks(graded, "no_delay")
    d = c["design"]
    assert d["status"] == "fail", d["evidence"]
    assert "main skips the kit's delay: the fastest burst of 32 writes to one string was " \
        "answered within" in text(d), d["evidence"]
    assert "say a mutex per string" in text(d)          # its trace: the right design
    assert "one lock for the whole array (or none)" not in text(d)
    assert any("usleep(ART_DELAY)" in f for f in d["fix"])
    t = c["timing"]
    assert t["status"] == "fail" and "impossible with usleep(10) per access: the server " \
        "skips the kit's delay" in text(t), t["evidence"]
    assert "main skips the kit's delay: the fastest burst of 32 writes" in text(t)
    for cid in ("workload", "consistency"):
        assert c[cid]["status"] == "pass", c[cid]["evidence"]


def test_a_leaderboard_nobody_can_game(graded):
    gamed = checks(graded, "no_delay")["concurrency"]
    assert "leaderboard" not in results(graded, "no_delay")
    assert "leaderboard: withheld" in text(gamed) and "design FAIL" in text(gamed)
    index = (graded / "index.html").read_text()
    assert "withheld: design FAIL, timing FAIL" in index
    # the honest server: ranked when every check the speed rests on passed; a busy machine
    # may leave its design or concurrency undetermined, and then it is withheld for that
    honest = checks(graded, "honest")
    held = [cid for cid in ("design", "timing", "consistency", "concurrency")
            if honest[cid]["status"] != "pass"]
    assert all(honest[cid]["status"] == "undetermined" and cid in BUSY_UNDETERMINED
               for cid in held), {cid: honest[cid]["evidence"] for cid in held}
    assert ("leaderboard" in results(graded, "honest")) == (not held)
