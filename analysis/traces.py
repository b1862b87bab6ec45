"""The servers' per-request traces (traces/<server>_n<n>.csv) as time: when each request
waited for its lock and when it held it, on which thread, and which lock. What the report's
timeline draws and what a trace viewer opens (the Chrome Trace Event Format, which
Chromium's about:tracing and Perfetto read).

A trace row gives durations and points in the server's time (from its start): recv_ns, the
request received, and unlock_ns, its lock released. A request held its lock over
[unlock - hold, unlock) and waited for it right before: [unlock - hold - wait, unlock -
hold). A row without unlock_ns (a store that does not time one interval) is placed to end
when its reply was ready, recv + latency, which is later by the copy of the reply.
"""

from __future__ import annotations  # annotations name pd without importing pandas

import bisect
import json
from pathlib import Path

# pandas on first use (load.pd): the runner's command line imports this module and answers
# --help without the venv's packages
from analysis.load import load_trace, pd
from analysis.trace_events import complete, named

# The lab's servers with one lock for the whole array (the others lock each string), and
# those whose locks are mutexes (the others' are read/write locks: reads share them).
ONE_LOCK = ("main1", "main3")
MUTEX = ("main1", "main2")
TIMED = ("recv_ns", "thread")           # the columns that place a request in time
# (unlock_ns, when there, places its hold exactly)
MAX_EVENTS = 2_000                      # per trace file written (two per request): about
                                        # one kit run's 1000 requests, a quarter MB


def has_time(trace: pd.DataFrame) -> bool:
    """Whether the trace's rows say when and on which thread (servers before these columns
    wrote none)."""
    return all(c in trace.columns for c in TIMED) and trace["recv_ns"].notna().any()


def lock_of(server: str, pos) -> str:
    """The lock a request of `server` took: the array's for a one-lock server, else its
    string's."""
    return "the array" if server in ONE_LOCK else f"string {int(pos)}"


def intervals(trace: pd.DataFrame, server: str) -> pd.DataFrame:
    """One row per request with a time: lock, thread, is_read, wait_start, hold_start,
    end (microseconds from the server's start), in order of hold_start. A release is timed
    after unlock() returns, so a thread preempted there is seen to hold on; the next
    acquisition its lock excludes (any, of a mutex; of a read/write lock, a write after
    anything and anything after a write) is a bound on the release too, and a hold ends at
    the earlier of the two."""
    t = trace.dropna(subset=list(TIMED))
    ready = t["recv_ns"] + t["latency_ns"]
    end = (t["unlock_ns"].fillna(ready) if "unlock_ns" in t.columns else ready) / 1e3
    got = (t["unlock_ns"].fillna(ready) - t["hold_ns"] if "unlock_ns" in t.columns
           else ready - t["hold_ns"]) / 1e3
    out = pd.DataFrame({
        "lock": [lock_of(server, p) for p in t["pos"]],
        "thread": t["thread"].astype("int64"),
        "is_read": t["is_read"].astype(bool),
        "wait_start": got - t["wait_ns"] / 1e3,
        "hold_start": got,
        "end": end,
    }).sort_values("hold_start", kind="stable").reset_index(drop=True)
    out["end"] = _released_by_next(out, server in MUTEX)
    return out


def _released_by_next(iv: pd.DataFrame, mutex: bool) -> list:
    """Each hold's end, bounded by the next acquisition of its lock that it excludes
    (iv in order of hold_start)."""
    ends = iv["end"].tolist()
    nxt_any: dict = {}     # lock -> the hold_start of the next hold seen (scanning back)
    nxt_write: dict = {}   # lock -> the hold_start of the next write
    for i in range(len(iv) - 1, -1, -1):
        lock, start, read = iv.at[i, "lock"], iv.at[i, "hold_start"], iv.at[i, "is_read"]
        bound = nxt_write.get(lock) if read and not mutex else nxt_any.get(lock)
        if bound is not None:
            ends[i] = max(start, min(ends[i], bound))
        nxt_any[lock] = start
        if not read:
            nxt_write[lock] = start
    return ends


def busiest_window(iv: pd.DataFrame, width_us: float) -> tuple:
    """(start, end) of the `width_us` window that holds the most holds beginning in it."""
    if iv.empty:
        return 0.0, width_us
    starts = iv["hold_start"].tolist()
    counts = [bisect.bisect_left(starts, a + width_us) - i for i, a in enumerate(starts)]
    i = counts.index(max(counts))
    return float(starts[i]), float(starts[i] + width_us)


def clip(iv: pd.DataFrame, lo: float, hi: float) -> pd.DataFrame:
    """The requests that waited or held within [lo, hi)."""
    return iv[(iv["end"] > lo) & (iv["wait_start"] < hi)]


def most_holding(iv: pd.DataFrame, lo: float, hi: float) -> int:
    """The most requests that held a lock at one moment of [lo, hi)."""
    edges = sorted([(max(s, lo), 1) for s in iv["hold_start"] if s < hi]
                   + [(min(e, hi), -1) for e, s in zip(iv["end"], iv["hold_start"]) if s < hi
                      and e > lo], key=lambda x: (x[0], x[1]))
    now = best = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best


def share_waiting(iv: pd.DataFrame, lo: float, hi: float) -> float:
    """The share of [lo, hi) in which at least one request was waiting for its lock."""
    spans = sorted((max(w, lo), min(h, hi)) for w, h in zip(iv["wait_start"], iv["hold_start"])
                   if h > w and h > lo and w < hi)
    covered, reach = 0.0, lo
    for a, b in spans:
        if b > reach:
            covered += b - max(a, reach)
            reach = b
    return covered / (hi - lo) if hi > lo else 0.0


def chrome_trace(trace: pd.DataFrame, label: str, server: str) -> dict:
    """The trace in the Chrome Trace Event Format: per request a complete event for its
    wait (category "wait", when it waited) and one for its hold (category "hold"), named
    after the lock, on the serving thread's track; times in microseconds. At most
    MAX_EVENTS events (the first requests in time)."""
    iv = intervals(trace, server).sort_values("wait_start", kind="stable")
    events = [named("process_name", 1, 0, label)]
    for r in iv.itertuples():
        if len(events) > MAX_EVENTS:
            break
        op = {"op": "read" if r.is_read else "write"}
        if r.hold_start > r.wait_start:
            events.append(complete(r.lock, "wait", round(r.wait_start, 3),
                                   round(r.hold_start - r.wait_start, 3), 1, int(r.thread), op))
        events.append(complete(r.lock, "hold", round(r.hold_start, 3),
                               round(r.end - r.hold_start, 3), 1, int(r.thread), op))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"server": label, "requests": len(iv),
                          "placement": "a hold ends when the reply was ready; its wait comes "
                                       "right before it"}}


def write_chrome_trace(csv_path: Path, out: Path, server: str, label: str) -> bool:
    """out written from the trace CSV at csv_path; False (nothing written) when its rows
    keep no time."""
    trace = load_trace(csv_path)
    if not has_time(trace):
        return False
    out.write_text(json.dumps(chrome_trace(trace, label, server), separators=(",", ":")))
    return True
