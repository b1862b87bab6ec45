"""The Chrome Trace Event Format's events, as Chromium's trace viewer (chrome://tracing) and
Perfetto (ui.perfetto.dev) open them in `{"traceEvents": [...]}`: what the lab's traces
(traces.py) and the profiler's timeline (profile/timeline.py) are written in. Standard
library only (the profiler's help runs without the venv)."""


def complete(name: str, cat: str, ts_us: float, dur_us: float, pid: int, tid: int,
             args: dict) -> dict:
    """One complete event ("ph": "X") of the Chrome Trace Event Format: an interval on the
    track of thread tid of process pid, in microseconds."""
    return {"name": name, "cat": cat, "ph": "X", "ts": ts_us, "dur": dur_us, "pid": pid,
            "tid": tid, "args": args}


def named(what: str, pid: int, tid: int, name: str) -> dict:
    """A metadata event ("ph": "M") naming a process (what "process_name") or a thread."""
    return {"name": what, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
