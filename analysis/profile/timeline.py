"""The timeline of `lockbench profile --timeline FILE.json` (profile/lockprof_stacks.cpp
records every wait and hold with its thread): written in the Trace Event Format that
Chromium's trace viewer (chrome://tracing) and Perfetto (ui.perfetto.dev) open, as
`{"traceEvents": [...]}`: one complete event (`"ph": "X"`) per interval, `ts` and `dur` in
microseconds from the run's first interval, `pid` the process, `tid` the thread, the lock's
site (or its address) as the name, `cat` "hold" or "wait", the lock's address, kind and mode
in `args`; metadata events (`"ph": "M"`) name the processes and threads. The event shapes are
analysis/trace_events.py's; standard library only."""

import json
from pathlib import Path

from analysis import trace_events as TR

MODES = {"m": ("mutex", "mutex"), "r": ("rwlock", "read"), "w": ("rwlock", "write")}
CATEGORY = {"h": "hold", "w": "wait"}


def lock_names(recs: list) -> dict:
    """(pid, address, kind) -> the record's site, as the table names it."""
    return {(r["pid"], int(r["addr"], 16), r["kind"]): r["site"] for r in recs}


def events(docs: list, names: dict) -> list:
    """Every interval of every process as a complete event, earliest first."""
    rows = [(d["pid"], e) for d in docs for e in d.get("timeline", {}).get("events", [])]
    if not rows:
        return []
    origin = min(e[4] for _, e in rows)
    out = []
    for pid, (what, mode, addr, tid, start, dur) in rows:
        kind, side = MODES[mode]
        lock = int(addr, 16)
        site = names.get((pid, lock, kind))
        out.append(TR.complete(site if site and site != "?" else f"{kind} 0x{lock:x}",
                               CATEGORY[what], (start - origin) / 1000, dur / 1000, pid, tid,
                               {"lock": f"0x{lock:x}", "kind": kind, "mode": side}))
    out.sort(key=lambda e: (e["ts"], e["pid"], e["tid"]))
    return out


def metadata(docs: list, evs: list) -> list:
    """The processes named by their program, the threads by their id."""
    out = [TR.named("process_name", d["pid"], 0,
                    f"{Path(d.get('program') or '?').name} (pid {d['pid']})") for d in docs]
    threads = sorted({(e["pid"], e["tid"]) for e in evs})
    out += [TR.named("thread_name", pid, tid, f"thread {tid}") for pid, tid in threads]
    return out


def totals(docs: list, evs: list) -> dict:
    return {"events": len(evs), "threads": len({(e["pid"], e["tid"]) for e in evs}),
            "lost": sum(d["timeline"]["lost"] for d in docs if "timeline" in d)}


def write(docs: list, recs: list, path: Path, command: list) -> dict:
    """Writes the trace of the dumps, the locks named as in recs (the table's records);
    how many intervals it holds, of how many threads, and how many did not fit."""
    evs = events(docs, lock_names(recs))
    said = totals(docs, evs)
    doc = {"traceEvents": metadata(docs, evs) + evs, "displayTimeUnit": "ns",
           "otherData": {"command": " ".join(command), "intervals_lost": said["lost"]}}
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    return said
