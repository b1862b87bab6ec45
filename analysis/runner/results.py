"""A results folder as the runner keeps it: its CSV files appended row by row (a row cut
short by a crash is dropped on the next open), metadata.json written whole, the folder
claimed or locked so that no two runs write into one, and the commit it was measured at."""

import csv
import datetime as dt
import fcntl
import json
import math
import os
import subprocess
from pathlib import Path

from analysis.launch.procs import RunError

REPO = Path(__file__).resolve().parents[2]


# agents.csv: one row per load agent per client run, and the merged row (agent "all").
AGENT_COLUMNS = ["experiment", "kind", "value", "server", "n", "rep", "agent", "host",
                 "threads", "requests", "ok", "errors", "elapsed_s", "throughput_rps",
                 "throughput_share", "lat_mean_us", "lat_p50_us", "lat_p90_us", "lat_p95_us",
                 "lat_p99_us", "lat_p999_us", "lat_max_us", "saturated"]

def repair_csv(path: Path) -> None:
    """Drops a last line cut short by a crash (no trailing newline), so appends stay valid."""
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def read_rows(path: Path) -> list:
    repair_csv(path)
    if not path.exists() or path.stat().st_size == 0:
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class CsvLog:
    """Appends rows to a CSV (header written once), flushing after every row."""

    def __init__(self, path: Path, columns):
        self.path, self.columns = path, list(columns)
        repair_csv(path)
        new = not path.exists() or path.stat().st_size == 0
        if not new:
            with open(path, newline="") as f:
                header = next(csv.reader(f), [])
            if header != self.columns:
                raise RunError(f"{path} has different columns than this version writes; "
                               "use a new results directory")
        self.f = open(path, "a", newline="")  # noqa: SIM115 - appended to row by row; close()
        self.w = csv.DictWriter(self.f, self.columns, extrasaction="ignore", lineterminator="\n")
        if new:
            self.w.writeheader()
            self.f.flush()

    def write(self, row: dict) -> None:
        self.w.writerow({k: _cell(row.get(k)) for k in self.columns})
        self.f.flush()

    def close(self):
        self.f.close()


def _cell(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return repr(v)
    return v


def fmt_value(v) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def command_output(argv, cwd=None) -> str:
    try:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def git_info(repo: Path = REPO) -> dict:
    commit = command_output(["git", "rev-parse", "HEAD"], cwd=repo) or "unknown"
    dirty = bool(command_output(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo))
    return {"commit": commit, "dirty": dirty,
            "describe": command_output(["git", "describe", "--always", "--dirty"], cwd=repo)}


def write_json(path: Path, doc: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


LOCK_NAME = ".lock"
_HELD_LOCKS: dict = {}   # results folder -> open descriptor holding its flock


def lock_results_dir(path: Path) -> None:
    """Takes an exclusive flock on path/.lock for the rest of this process, so no second
    runner writes into the same folder; RunError if another runner holds it."""
    if path in _HELD_LOCKS:
        return
    fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunError(f"results directory {path} is in use by another runner") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD_LOCKS[path] = fd


def claim_results_dir(path: Path | None, base: Path, stamp: str | None = None) -> Path:
    """Creates the folder of a new run and locks it, exclusively: two runners never share
    one. path=None: base/<UTC time>, or base/<UTC time>-2, -3 ... when a runner started in
    the same second took it (mkdir without exist_ok decides who). A given path must be new
    or empty; RunError if it is not, or if another runner locked it first."""
    if path is None:
        stamp = stamp or dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        base.mkdir(parents=True, exist_ok=True)
        for i in range(1, 1000):
            cand = base / (stamp if i == 1 else f"{stamp}-{i}")
            try:
                cand.mkdir()
            except FileExistsError:
                continue
            lock_results_dir(cand)
            return cand
        raise RunError(f"no free results directory name {stamp}-N under {base}")
    path.mkdir(parents=True, exist_ok=True)
    lock_results_dir(path)
    if any(p.name != LOCK_NAME for p in path.iterdir()):
        raise RunError(f"results directory {path} is not empty (use --resume {path})")
    return path


def is_quick_results(results: Path) -> bool:
    """Whether a results folder holds a --quick (smoke) run: recorded in its metadata, or
    (older runs) kept under results/scratch/."""
    try:
        if json.loads((results / "metadata.json").read_text()).get("quick"):
            return True
    except (OSError, ValueError, AttributeError):
        pass
    return "scratch" in results.resolve().parts


def read_metadata(results: Path) -> dict:
    meta_path = results / "metadata.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise RunError(f"cannot resume: {meta_path} not found") from None
    except (OSError, ValueError) as exc:
        raise RunError(f"cannot resume: {meta_path} is not readable JSON ({exc})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("sessions", []), list):
        raise RunError(f"cannot resume: {meta_path} is not lockbench metadata")
    return meta
