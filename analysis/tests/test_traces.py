"""The servers' traces as time (analysis/traces.py): where each request waited and held
its lock, bounded by the next acquisition its lock excludes; the sentences of the report's
timeline; the Chrome Trace Event Format a viewer opens, checked against its schema."""

import json

import pandas as pd
import pytest

from analysis import traces as T


def trace(rows) -> pd.DataFrame:
    """rows: (pos, is_read, recv_us, wait_us, hold_us, unlock_us, thread)."""
    return pd.DataFrame([{"pos": p, "is_read": r, "latency_ns": (u - rv + 1) * 1000,
                          "wait_ns": w * 1000, "hold_ns": h * 1000, "recv_ns": rv * 1000,
                          "unlock_ns": u * 1000, "thread": t}
                         for p, r, rv, w, h, u, t in rows])


# one mutex: three requests in turn; the second's release timed late (its thread
# preempted after unlock), which the third's acquisition bounds
SERIAL = trace([(0, 1, 0, 0, 10, 10, 1), (1, 0, 1, 9, 20, 60, 2), (2, 1, 2, 28, 10, 40, 3)])


def test_holds_and_waits_are_placed_from_the_servers_clock_and_bounded_by_the_next():
    iv = T.intervals(SERIAL, "main1")
    # in order of acquisition: unlock - hold; the wait right before it
    assert list(iv["lock"]) == ["the array"] * 3 and list(iv["thread"]) == [1, 3, 2]
    got = [(w, h, e) for w, h, e in zip(iv["wait_start"], iv["hold_start"], iv["end"])]
    assert got == [(0, 0, 10), (2, 30, 40), (31, 40, 60)]
    # per string: each string its own row, and reads of an rwlock share it
    per = T.intervals(trace([(3, 1, 0, 0, 10, 10, 1), (3, 1, 0, 0, 10, 10, 2)]), "main4")
    assert set(per["lock"]) == {"string 3"} and T.most_holding(per, 0, 20) == 2


def test_a_release_timed_late_is_bounded_by_the_acquisition_its_lock_excludes():
    # thread 1 was preempted after unlock: its release is seen at 50, but thread 2, a
    # writer, took the lock at 20, so under a mutex (or before a write) it ended by 20
    late = trace([(0, 1, 0, 0, 50, 50, 1), (0, 0, 1, 19, 10, 30, 2)])
    for server in ("main1", "main3"):
        iv = T.intervals(late, server).set_index("thread")
        assert iv.at[1, "end"] == 20, server
        assert T.most_holding(T.intervals(late, server), 0, 60) == 1
    # two readers of an rwlock overlap for real: nothing bounds the first
    readers = trace([(0, 1, 0, 0, 50, 50, 1), (0, 1, 1, 19, 10, 30, 2)])
    iv = T.intervals(readers, "main3").set_index("thread")
    assert iv.at[1, "end"] == 50 and T.most_holding(T.intervals(readers, "main3"), 0, 60) == 2


def test_the_timelines_sentences_come_from_the_data():
    iv = T.intervals(SERIAL, "main1")
    assert T.most_holding(iv, 0, 60) == 1
    # someone waited over [2, 30) and [31, 40) of the window [0, 60): 37 us of 60
    assert T.share_waiting(iv, 0, 60) == pytest.approx(37 / 60)
    assert T.share_waiting(iv, 0, 20) == pytest.approx(18 / 20)
    lo, hi = T.busiest_window(iv, 15)
    assert (lo, hi) == (30, 45) and list(T.clip(iv, lo, hi)["thread"]) == [3, 2]


def test_a_trace_without_time_draws_nothing():
    old = SERIAL.drop(columns=["recv_ns", "unlock_ns", "thread"])
    assert not T.has_time(old) and T.has_time(SERIAL)


def assert_chrome_trace(doc: dict) -> None:
    """The Chrome Trace Event Format as Chromium's trace viewer and Perfetto read it: an
    object with traceEvents; each a metadata ("M") or complete ("X") event with a name,
    integer pid and tid, and for "X" a category, ts and dur in microseconds, dur >= 0;
    at least one hold on every thread that appears."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    json.dumps(doc, allow_nan=False)   # plain JSON: no NaN or Infinity
    holds, threads = set(), set()
    for e in doc["traceEvents"]:
        assert e["ph"] in ("M", "X") and isinstance(e["name"], str) and e["name"], e
        assert all(isinstance(e[k], int) for k in ("pid", "tid")), e
        if e["ph"] == "X":
            assert e["cat"] in ("hold", "wait"), e
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)), e
            assert e["dur"] >= 0, e
            threads.add(e["tid"])
            if e["cat"] == "hold":
                holds.add(e["tid"])
    assert threads and holds == threads


def test_the_trace_opens_in_a_viewer(tmp_path):
    doc = T.chrome_trace(SERIAL, "main1 n=10", "main1")
    assert_chrome_trace(doc)
    names = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in names} == {"the array"}
    assert sorted((e["tid"], e["cat"]) for e in names) == [
        (1, "hold"), (2, "hold"), (2, "wait"), (3, "hold"), (3, "wait")]
    csv = tmp_path / "main1_n10.csv"
    SERIAL.to_csv(csv, index=False)
    assert T.write_chrome_trace(csv, tmp_path / "main1_n10.json", "main1", "main1 n=10")
    assert_chrome_trace(json.loads((tmp_path / "main1_n10.json").read_text()))
    SERIAL.drop(columns=["recv_ns", "unlock_ns", "thread"]).to_csv(csv, index=False)
    assert not T.write_chrome_trace(csv, tmp_path / "old.json", "main1", "main1 n=10")
    assert not (tmp_path / "old.json").exists()
