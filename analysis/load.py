"""The raw results layout and its loaders.

A results directory (written by runner.py, read-only afterwards) holds:
  metadata.json           machine, build, git commit, every parameter, one entry per session
  lab.csv                 one row per client run of the lab experiment (LAB_COLUMNS)
  lab_servers.csv         one row per server start of the lab experiment (SERVER_COLUMNS)
  lab_client.jsonl        the client's JSON output of every lab run, as printed
  sweep_<kind>.csv        one row per client run of a sweep (SWEEP_COLUMNS)
  sweep_<kind>_servers.csv one row per server start of a sweep (SERVER_COLUMNS)
  sweep_<kind>_client.jsonl
  traces/<server>_n<n>.csv per-request trace of the lab servers (TRACE_COLUMNS, bounded)
  time/time_s<S>_n<n>     the servers' time files, as the kit names them
                          (time_<strategy>_n<n> for a lockserver strategy)
  logs/                   server stdout/stderr
Loaders check columns and types and raise LoadError naming the file and the problem.

A raw data file may be stored gzipped, NAME.gz in place of NAME (`gzip -n -9`: no name, no
date, so the same data gives the same bytes); NAME is taken when both are there. raw_path is
that one rule, read_raw_text and raw_files its helpers; every reader of raw data (these
loaders, the microbenchmark JSON, bench/perf.py's runs) opens files through them. Only
metadata.json stays plain: it marks a results directory and the runner rewrites it.
"""

from __future__ import annotations  # annotations name pd without importing pandas

import gzip
import json
import zlib
from pathlib import Path

from analysis import is_server_label


class _LazyPandas:
    """pandas, imported on first use: the runner's command line (which needs only the
    column lists here) answers a bad option without paying for the pandas import."""

    def __getattr__(self, name):
        import pandas
        return getattr(pandas, name)


pd = _LazyPandas()

SWEEP_KINDS = ("threads", "read-ratio", "n", "delay", "connection")

# Client result columns shared by lab and sweep rows (from the client's JSON "results").
CLIENT_RESULT_COLUMNS = {
    "ok": "Int64", "errors": "Int64", "elapsed_s": "float64", "throughput_rps": "float64",
    "lat_mean_us": "float64", "lat_p50_us": "float64", "lat_p90_us": "float64",
    "lat_p95_us": "float64", "lat_p99_us": "float64", "lat_p999_us": "float64",
    "lat_max_us": "float64", "saturated": "boolean",
    # how evenly the client threads shared the throughput (results.fairness); results
    # written before the client reported it lack these columns: they load as missing
    "fair_jain": "float64", "fair_rsd": "float64", "fair_max_min": "float64",
}
OPTIONAL_COLUMNS = {"fair_jain", "fair_rsd", "fair_max_min", "recv_ns", "unlock_ns", "thread"}

LAB_COLUMNS = {
    "server": "string", "n": "int64", "rep": "int64", "delay_us": "float64",
    "read_ratio": "float64", "threads": "Int64", "requests": "Int64", "connection": "string",
    "port": "int64", "git_sha": "string",
    "latency_s": "float64",      # the run's line of the server's time file (the lab metric)
    "time_lines": "int64",       # lines the run added to the time file (1 when in step)
    **CLIENT_RESULT_COLUMNS,
}

SWEEP_COLUMNS = {
    "kind": "string", "value": "string", "server": "string", "n": "int64", "rep": "int64",
    "delay_us": "float64", "read_ratio": "float64", "threads": "int64",
    "connection": "string", "duration_s": "float64", "warmup_s": "float64",
    "port": "int64", "git_sha": "string",
    **CLIENT_RESULT_COLUMNS,
}

SUMMARY_KEYS = ("requests", "errors", "mean_latency_s", "mean_wait_s", "mean_hold_s",
                "mean_delay_slept_us")

SERVER_COLUMNS = {
    "experiment": "string", "value": "string", "server": "string", "n": "int64",
    "rep": "int64", "delay_us": "float64", "port": "int64", "exit_code": "Int64",
    **{f"summary_{k}": "float64" for k in SUMMARY_KEYS},
    "summary": "string",
}

TRACE_COLUMNS = {"pos": "int64", "is_read": "int64", "latency_ns": "int64",
                 "wait_ns": "int64", "hold_ns": "int64",
                 # when received and unlocked (from the server's start) and by which
                 # thread: optional, servers before them wrote none
                 "recv_ns": "float64", "unlock_ns": "float64", "thread": "float64"}


# Columns whose values may be negative: a process's exit status (-15: stopped by SIGTERM).
SIGNED_COLUMNS = frozenset({"exit_code"})


class LoadError(Exception):
    """A raw results file is missing, malformed, or inconsistent."""


GZ = ".gz"


def raw_path(path) -> Path:
    """The file that holds raw file `path`: NAME itself if it exists, else NAME.gz if that
    exists (the gzipped copy), else NAME (so a missing file is named as asked). A path
    already ending in .gz is taken as given."""
    p = Path(path)
    if p.name.endswith(GZ) or p.exists():
        return p
    gz = p.with_name(p.name + GZ)
    return gz if gz.exists() else p


def raw_exists(path) -> bool:
    """Whether raw file `path` is there, plain or gzipped."""
    return raw_path(path).exists()


def read_raw_text(path) -> str:
    """The text of raw file `path` (raw_path: plain or gzipped), UTF-8. OSError if it cannot
    be read (gzip.BadGzipFile for damaged gzip data), UnicodeDecodeError if not UTF-8."""
    p = raw_path(path)
    data = p.read_bytes()
    if p.name.endswith(GZ):
        try:
            data = gzip.decompress(data)
        except (EOFError, zlib.error) as exc:
            raise gzip.BadGzipFile(f"{p}: damaged gzip data: {exc}") from None
    return data.decode("utf-8")


def raw_files(folder, pattern: str) -> list:
    """The raw files in `folder` whose name matches the glob `pattern`, plain or gzipped,
    each once under its plain name (open it through raw_path), sorted by name."""
    d = Path(folder)
    names = {p.name for p in d.glob(pattern)} | {p.name[:-len(GZ)] for p in d.glob(pattern + GZ)}
    return [d / name for name in sorted(names)]


def _typed(df: pd.DataFrame, schema: dict, where: str) -> pd.DataFrame:
    missing = [c for c in schema if c not in df.columns and c not in OPTIONAL_COLUMNS]
    if missing:
        raise LoadError(f"{where}: missing column(s) {', '.join(missing)}")
    df = df.assign(**{c: float("nan") for c in OPTIONAL_COLUMNS
                      if c in schema and c not in df.columns})
    out = df.copy()
    for col, dtype in schema.items():
        try:
            if dtype == "boolean":
                out[col] = out[col].map(
                    lambda v: pd.NA if pd.isna(v) else str(v).strip().lower() in ("true", "1")
                ).astype("boolean")
            elif dtype == "string":
                out[col] = out[col].astype("string")
            else:
                out[col] = _numbers(df[col], col, dtype, where).astype(dtype)
        except (ValueError, TypeError) as exc:
            raise LoadError(f"{where}: column {col} is not {dtype}: {exc}") from None
    return out


def _numbers(raw: pd.Series, col: str, dtype: str, where: str) -> pd.Series:
    """The column's strings as numbers, each checked: finite, >= 0 (but SIGNED_COLUMNS),
    and for a count (an integer dtype) whole and within int64. Empty cells stay missing. A
    hand-edited value otherwise lands in the tables as if measured; the first bad one is a
    LoadError naming the row (1 = the first after the header), its line and the column."""
    import numpy as np
    num = pd.to_numeric(raw, errors="coerce")
    v = num.astype("float64")
    given = raw.notna()
    count = dtype.lower() == "int64"
    checks = [(~np.isfinite(v), "is not a number" if count else "is not a finite number")]
    if col not in SIGNED_COLUMNS:
        checks.append((v < 0, "is negative"))
    if count:
        checks.append((v != np.floor(v), "is not a whole number"))
        checks.append((v.abs() >= 2.0 ** 63, "is out of range"))
    allowed = ("a whole number" if count else "a finite number") + \
        ("" if col in SIGNED_COLUMNS else " >= 0")
    first = None  # (row index, problem) of the first bad value
    for bad, problem in checks:
        rows = np.flatnonzero((given & bad).to_numpy())
        if rows.size and (first is None or rows[0] < first[0]):
            first = (int(rows[0]), problem)
    if first is not None:
        i, problem = first
        raise LoadError(f"{where}: row {i + 1} (line {i + 2}), column {col}: "
                        f"{raw.iloc[i]!r} {problem}; allowed: {allowed}")
    return num


def _read_csv(path: Path) -> pd.DataFrame:
    """A CSV as strings; path is the file itself (raw_path): pandas reads NAME.gz gzipped."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except FileNotFoundError:
        raise LoadError(f"{path}: no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError,
            OSError, EOFError, zlib.error) as exc:
        raise LoadError(f"{path}: not a readable CSV: {exc}") from None


def check_lab(df: pd.DataFrame, where: str = "lab data") -> pd.DataFrame:
    """Types the lab rows and checks they make sense (known servers, n >= 1, unique runs)."""
    df = _typed(df, LAB_COLUMNS, where)
    unknown = sorted(s for s in set(df["server"].dropna()) if not is_server_label(s))
    if unknown:
        raise LoadError(f"{where}: unknown server(s) {', '.join(unknown)}")
    if (df["n"] < 1).any():
        raise LoadError(f"{where}: n must be >= 1")
    dup = df.duplicated(["server", "n", "rep"])
    if dup.any():
        first = df[dup].iloc[0]
        raise LoadError(f"{where}: run {first['server']} n={first['n']} rep={first['rep']} "
                        "appears more than once")
    return df.sort_values(["server", "n", "rep"], kind="stable").reset_index(drop=True)


def load_lab(path) -> pd.DataFrame:
    """lab.csv -> one typed row per client run, sorted by (server, n, rep)."""
    path = raw_path(path)
    return check_lab(_read_csv(path), str(path))


def load_sweep(path) -> pd.DataFrame:
    """sweep_<kind>.csv -> one typed row per client run, sorted."""
    path = raw_path(path)
    df = _typed(_read_csv(path), SWEEP_COLUMNS, str(path))
    kinds = sorted(set(df["kind"].dropna()) - set(SWEEP_KINDS))
    if kinds:
        raise LoadError(f"{path}: unknown sweep kind(s) {', '.join(kinds)}")
    order = ["kind", "server", "n", "delay_us", "read_ratio", "threads", "connection", "rep"]
    return df.sort_values(order, kind="stable").reset_index(drop=True)


def load_servers(path) -> pd.DataFrame:
    """<experiment>_servers.csv -> one typed row per server start."""
    path = raw_path(path)
    df = _typed(_read_csv(path), SERVER_COLUMNS, str(path))
    return df.sort_values(["experiment", "server", "n", "delay_us", "value", "rep"],
                          kind="stable").reset_index(drop=True)


def load_trace(path) -> pd.DataFrame:
    """A server's --trace CSV (TRACE_COLUMNS; recv_ns and thread NaN when absent)."""
    path = raw_path(path)
    return _typed(_read_csv(path), TRACE_COLUMNS, str(path))


def load_traces(trace_dir) -> pd.DataFrame:
    """Every traces/<server>_n<n>.csv, concatenated with server and n columns."""
    frames = []
    for path in raw_files(trace_dir, "*_n*.csv"):
        server, _, n = path.stem.rpartition("_n")
        if not is_server_label(server) or not n.isdigit():
            continue
        df = load_trace(path)
        df.insert(0, "n", int(n))
        df.insert(0, "server", server)
        frames.append(df)
    if not frames:
        return pd.DataFrame({"server": pd.Series(dtype="string"), "n": pd.Series(dtype="int64"),
                             **{c: pd.Series(dtype=t) for c, t in TRACE_COLUMNS.items()}})
    return pd.concat(frames, ignore_index=True)


def load_metadata(path) -> dict:
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise LoadError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise LoadError(f"{path}: not valid JSON: {exc}") from None


def load_results(results_dir) -> dict:
    """Everything in a results directory that exists: {'metadata', 'lab', 'lab_servers',
    'traces', 'sweeps': {kind: df}, 'sweep_servers': {kind: df}}. Missing parts are None/empty;
    a directory with neither lab.csv nor any sweep is an error."""
    d = Path(results_dir)
    if not d.is_dir():
        raise LoadError(f"{d}: not a directory")
    out = {"metadata": load_metadata(d / "metadata.json") if (d / "metadata.json").exists() else {},
           "lab": load_lab(d / "lab.csv") if raw_exists(d / "lab.csv") else None,
           "lab_servers": (load_servers(d / "lab_servers.csv")
                           if raw_exists(d / "lab_servers.csv") else None),
           "traces": load_traces(d / "traces"),
           "sweeps": {}, "sweep_servers": {}}
    for kind in SWEEP_KINDS:
        p = d / f"sweep_{kind}.csv"
        if raw_exists(p):
            out["sweeps"][kind] = load_sweep(p)
        ps = d / f"sweep_{kind}_servers.csv"
        if raw_exists(ps):
            out["sweep_servers"][kind] = load_servers(ps)
    # Load agents of a run across machines (runner --client-host): one row per agent and
    # client run, and the merged row (agent "all").
    agents = raw_path(d / "agents.csv")
    out["agents"] = pd.read_csv(agents) if agents.exists() else None
    if out["lab"] is None and not out["sweeps"]:
        raise LoadError(f"{d}: no lab.csv and no sweep_*.csv: nothing to report")
    return out
