"""Microbenchmark analysis: Google Benchmark JSON from bench/ -> tables, figures, findings.

Input: the JSON that `bench/run-microbench.sh` (kv_bench --benchmark_out=... json) writes,
committed under results/microbench/. Two benchmark families:
  Store/<strategy>/s:<id>/read:<pct>/n:<n>/delay_us:<us>/.../threads:<t>
      counters ops_per_s (all threads, per second of wall time) and ns_per_op (one thread's
      mean wall time per operation);
  WriterStarvation/<strategy>/readers:<r>/delay_us:<us>/...
      counters writer_wait_{mean,p50,p99,max}_us, writes, writes_per_s, reads_per_s.

Pure functions (no file I/O, no figures: sections/microbench.py assembles the section,
figures.py draws, report.py writes):
  parse_benchmarks(doc) -> DataFrame    one row per setting: median of the repetitions and
                                        their min and max (the spread)
  table_ranking(df)    -> DataFrame      rank of every strategy in every setting
  table_overhead(df)   -> DataFrame      cost of each lock as a ratio to the unprotected store
  findings(df, cores)  -> list[str]      sentences computed from the data
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import server_order

BASELINE = "unprotected"
SETTING = ["read_pct", "n", "delay_us", "threads"]
STARVATION_METRICS = ["writer_wait_mean_us", "writer_wait_p50_us", "writer_wait_p99_us",
                      "writer_wait_max_us", "writes", "writes_per_s", "reads_per_s"]
COLUMNS = ["family", "strategy", "read_pct", "n", "delay_us", "threads", "readers",
           "ops_per_s", "ns_per_op", *STARVATION_METRICS]

# The generic server's registry order (the four lab strategies first): the order of rows.
ORDER = ["unprotected", "one-mutex", "mutex-per-slot", "one-rwlock", "rwlock-per-slot",
         "striped-mutex", "striped-rwlock", "one-rwlock-wpref", "rwlock-per-slot-wpref",
         "spinlock-per-slot", "seqlock-per-slot", "pointer-swap"]


class MicrobenchError(ValueError):
    """The JSON is not kv_bench output (missing keys, no Store runs)."""


def _fields(run_name: str) -> tuple[str, str, dict]:
    parts = run_name.split("/")
    if len(parts) < 2:
        raise MicrobenchError(f"unexpected benchmark name {run_name!r}")
    kv = {}
    for p in parts[2:]:
        if ":" in p:
            k, v = p.split(":", 1)
            kv[k] = v
    return parts[0], parts[1], kv


SPREAD = ["ops_per_s", "ns_per_op"]  # metrics whose spread (min, max) is kept


def parse_benchmarks(doc: dict, where: str = "microbenchmark JSON") -> pd.DataFrame:
    """kv_bench JSON (parsed) -> one row per (family, strategy, setting): columns COLUMNS
    as the median of the repetitions, <metric>_lo / <metric>_hi their min and max for
    SPREAD, and reps their number. Aggregate rows (mean/median/stddev of
    --benchmark_repetitions) are ignored. Raises MicrobenchError on input that is not
    kv_bench output."""
    if not isinstance(doc, dict) or "benchmarks" not in doc:
        raise MicrobenchError(f"{where}: no 'benchmarks' key")
    rows = []
    for b in doc["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        family, strategy, kv = _fields(b.get("run_name", b["name"]))
        row = {"family": family, "strategy": strategy,
               "read_pct": float(kv["read"]) if "read" in kv else np.nan,
               "n": float(kv["n"]) if "n" in kv else np.nan,
               "delay_us": float(kv.get("delay_us", "nan")),
               # Store runs carry their thread count in the name (GB's own
               # "threads" is 1: the benchmark starts its threads itself).
               "threads": float(kv["threads"]) if "threads" in kv
               else float(b.get("threads", 1)),
               "readers": float(kv["readers"]) if "readers" in kv else np.nan}
        for c in ["ops_per_s", "ns_per_op", *STARVATION_METRICS]:
            row[c] = float(b[c]) if c in b else np.nan
        rows.append(row)
    if not rows:
        raise MicrobenchError(f"{where}: no benchmark runs")
    df = pd.DataFrame(rows, columns=COLUMNS)
    keys = ["family", "strategy", "read_pct", "n", "delay_us", "threads", "readers"]
    g = df.groupby(keys, dropna=False, sort=False)
    df = g.median(numeric_only=True)
    for c in SPREAD:
        df[f"{c}_lo"], df[f"{c}_hi"] = g[c].min(), g[c].max()
    df["reps"] = g.size()
    df = df.reset_index()
    for c in ["read_pct", "n", "delay_us", "threads"]:
        df[c] = df[c].astype("Int64") if df[c].notna().all() else df[c]
    df["order"] = df["strategy"].map({s: i for i, s in enumerate(ORDER)}).fillna(len(ORDER))
    df = df.sort_values(["family", "delay_us", "read_pct", "n", "threads", "readers",
                         "order", "strategy"]).drop(columns="order").reset_index(drop=True)
    return df


def load_benchmarks(json_path) -> pd.DataFrame:
    """parse_benchmarks of a JSON file (for tests and interactive use; the report reads
    the file in report.py)."""
    return parse_benchmarks(json.loads(Path(json_path).read_text()), str(json_path))


def store_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The Store family only, with integer setting columns."""
    s = df[df["family"] == "Store"].copy()
    for c in SETTING:
        s[c] = s[c].astype(int)
    return s


def _ordered(strategies) -> list:
    """Strategies in registry order (unknown ones after, by name)."""
    key = {s: i for i, s in enumerate(ORDER)}
    return server_order(sorted(strategies, key=lambda s: (key.get(s, len(ORDER)), s)))


def table_ranking(df: pd.DataFrame, include_baseline: bool = False) -> pd.DataFrame:
    """Long table: for every setting (read_pct, n, delay_us, threads), each strategy's
    ops/s, its rank (1 = fastest), its share of the best (ops/s / best) and, when the
    unprotected baseline ran in that setting, its ratio to the baseline. The baseline itself
    is ranked only if include_baseline."""
    s = store_runs(df)
    base = (s[s["strategy"] == BASELINE].set_index(SETTING)["ops_per_s"]
            .rename("baseline_ops_per_s"))
    if not include_baseline:
        s = s[s["strategy"] != BASELINE]
    s = s.join(base, on=SETTING)
    s["rank"] = (s.groupby(SETTING)["ops_per_s"].rank(ascending=False, method="min")
                 .astype(int))
    s["of_best"] = s["ops_per_s"] / s.groupby(SETTING)["ops_per_s"].transform("max")
    s["vs_unprotected"] = s["ops_per_s"] / s["baseline_ops_per_s"]
    cols = [*SETTING, "rank", "strategy", "ops_per_s", "ns_per_op", "of_best",
            "vs_unprotected"]
    return s.sort_values([*SETTING, "rank", "strategy"])[cols].reset_index(drop=True)


def table_ranking_wide(ranking: pd.DataFrame, settings: list[dict]) -> pd.DataFrame:
    """Strategies x chosen settings, each cell 'rank (Mops/s)'. settings: dicts with keys
    read_pct, n, delay_us, threads; missing settings are skipped."""
    cols = {}
    for st in settings:
        m = np.ones(len(ranking), dtype=bool)
        for k, v in st.items():
            m &= ranking[k].to_numpy() == v
        sub = ranking[m]
        if sub.empty:
            continue
        label = (f"{st['read_pct']}% r, n={st['n']}, {st['delay_us']} us, "
                 f"{st['threads']} thr")
        cols[label] = {r.strategy: f"{r.rank} ({r.ops_per_s / 1e6:.3g})"
                       for r in sub.itertuples()}
    wide = pd.DataFrame(cols)
    return wide.reindex(_ordered(wide.index))


def table_overhead(df: pd.DataFrame, n: int = 1000, delay_us: int = 0,
                   cores: int = 2) -> pd.DataFrame:
    """Cost of each lock against the unprotected store, as ratios of ns/op (>1 = slower),
    at 1 thread (no contention: the price of lock + unlock) and at `cores` threads (as
    many as the machine has), for every read share measured at (n, delay_us). Index: strategy."""
    s = store_runs(df)
    s = s[(s["n"] == n) & (s["delay_us"] == delay_us) & s["threads"].isin([1, cores])]
    out = {}
    for (read, thr), g in s.groupby(["read_pct", "threads"]):
        g = g.set_index("strategy")["ns_per_op"]
        if BASELINE not in g:
            continue
        out[f"{read}% reads, {thr} thr"] = g / g[BASELINE]
    t = pd.DataFrame(out)
    t = t.drop(index=BASELINE, errors="ignore")
    return t.reindex(_ordered(t.index))


def setting_runs(df: pd.DataFrame, read_pct: int, n: int, delay_us: int) -> pd.DataFrame:
    """The Store rows of one (read share, n, delay), all thread counts, in registry order."""
    s = store_runs(df)
    return s[(s["read_pct"] == read_pct) & (s["n"] == n) & (s["delay_us"] == delay_us)]


def starvation_runs(df: pd.DataFrame, delay_us: int) -> pd.DataFrame:
    """The WriterStarvation rows at one delay, in registry order."""
    return df[(df["family"] == "WriterStarvation") & (df["delay_us"] == delay_us)]


def _fmt_ratio(x: float) -> str:
    return f"{x:.1f}x" if x < 10 else f"{x:.0f}x"


def findings(df: pd.DataFrame, cores: int) -> list[str]:
    """Observations computed from the data; each one is skipped if its runs are missing.
    cores: logical cores of the machine that ran the benchmarks."""
    out = []
    s = store_runs(df)
    rank = table_ranking(df)

    def at(read, n, delay, thr):
        return rank[(rank["read_pct"] == read) & (rank["n"] == n) & (rank["delay_us"] == delay)
                    & (rank["threads"] == thr)]

    clock = df[df["family"] == "Clock"]["ns_per_op"].dropna()
    base1 = s[(s["strategy"] == BASELINE) & (s["threads"] == 1) & (s["delay_us"] == 0)
              & (s["n"] == 1000)]["ns_per_op"]
    if len(clock) and len(base1) and 3 * clock.iloc[0] >= base1.median():
        out.append(
            f"The clock-read benchmark ({clock.iloc[0]:.0f} ns per read) was disturbed by "
            "other load: three reads would exceed a whole unprotected operation "
            f"({base1.median():.0f} ns at 1 thread). Treat this run's 1-thread ratios with care.")
    elif len(clock) and len(base1):
        out.append(
            f"Fixed cost: every store operation reads the monotonic clock three times for its "
            f"wait/hold timing ({clock.iloc[0]:.0f} ns per read here), about "
            f"{3 * clock.iloc[0]:.0f} ns of the unprotected store's {base1.median():.0f} ns per "
            "operation at 1 thread; the ratios below compare whole operations, so they "
            "understate what the lock alone costs.")
    ov = table_overhead(df, cores=cores)
    below = sorted({k for c in ov.columns for k, v in ov[c].dropna().items() if v < 0.9})
    if below:
        out.append(
            "Noise warning: " + ", ".join(below) + " measured more than 10% faster than the "
            "unprotected store in some setting of the overhead table, which no correct "
            "strategy can be by more than its timing differences; on this shared "
            f"{cores}-core machine, "
            "read differences under about 20-30% as noise.")
    col = next((c for c in ov.columns if c.startswith("95% reads, 1 thr")), None)
    if col is not None:
        o = ov[col].dropna().sort_values()
        out.append(
            f"Uncontended cost (1 thread, 95% reads, n = 1000, no delay): the cheapest "
            f"strategy, {o.index[0]}, takes {_fmt_ratio(o.iloc[0])} the time per operation of "
            f"the unprotected store and the dearest, {o.index[-1]}, {_fmt_ratio(o.iloc[-1])}; "
            "the lab's mutexes and rwlocks cost " + ", ".join(
                f"{k} {_fmt_ratio(o[k])}" for k in ["one-mutex", "mutex-per-slot", "one-rwlock",
                                                   "rwlock-per-slot"] if k in o) + ".")
    for read in (50, 95, 100):
        for n in (1000, 1):
            r = at(read, n, 0, cores)
            if len(r) < 2:
                continue
            best, worst = r.iloc[0], r.iloc[-1]
            base = best["vs_unprotected"]
            out.append(
                f"{read}% reads, n = {n}, {cores} threads (= cores), no delay: {best['strategy']} "
                f"wins with {best['ops_per_s'] / 1e6:.3g} M ops/s"
                + (f" ({base:.2f} of the unprotected store)" if not math.isnan(base) else "")
                + f"; {worst['strategy']} is last at {worst['ops_per_s'] / 1e6:.3g} M ops/s "
                f"({worst['ops_per_s'] / best['ops_per_s']:.2f} of the winner).")
    # Scaling from 1 thread to as many as cores.
    g = s[(s["read_pct"] == 95) & (s["n"] == 1000) & (s["delay_us"] == 0)]
    p = g.pivot_table(index="strategy", columns="threads", values="ops_per_s")
    if 1 in p.columns and cores in p.columns:
        gain = (p[cores] / p[1]).dropna().sort_values(ascending=False)
        scale = [k for k, v in gain.items() if v >= 1.3 and k != BASELINE]
        flat = [k for k, v in gain.items() if v < 1.1 and k != BASELINE]
        txt = (f"From 1 to {cores} threads (95% reads, n = 1000, no delay) the unprotected store "
               f"gains {gain.get(BASELINE, float('nan')):.2f}x; ")
        txt += (f"{', '.join(scale)} gain at least 1.3x" if scale
                else "no strategy gains 1.3x")
        txt += (f", while {', '.join(flat)} gain less than 1.1x." if flat else ".")
        out.append(txt)
    # Oversubscription: 32 threads versus as many as cores.
    g = s[(s["read_pct"] == 95) & (s["n"] == 1000) & (s["delay_us"] == 0)]
    p = g.pivot_table(index="strategy", columns="threads", values="ops_per_s")
    if cores in p.columns and 32 in p.columns and cores != 32:
        ratio = (p[32] / p[cores]).drop(index=BASELINE, errors="ignore").dropna().sort_values()
        if len(ratio):
            out.append(
                f"Oversubscribed (32 threads on {cores} cores vs {cores} threads, 95% reads, n = 1000, no "
                f"delay): {ratio.index[0]} keeps {ratio.iloc[0]:.2f} of its {cores}-thread "
                f"throughput, "
                f"{ratio.index[-1]} {ratio.iloc[-1]:.2f}.")
    # Hot string: n = 1 vs n = 1000 at as many threads as cores, 70% reads.
    h = s[(s["read_pct"] == 70) & (s["delay_us"] == 0) & (s["threads"] == cores)]
    hp = h.pivot_table(index="strategy", columns="n", values="ops_per_s")
    if 1 in hp.columns and 1000 in hp.columns:
        hr = (hp[1] / hp[1000]).drop(index=BASELINE, errors="ignore").dropna().sort_values()
        out.append(
            f"One hot string (n = 1) against n = 1000 (70% reads, {cores} threads): "
            f"{hr.index[0]} suffers most ({hr.iloc[0]:.2f} of its n = 1000 throughput), "
            f"{hr.index[-1]} least ({hr.iloc[-1]:.2f}).")
    # The lab's setting: 10 us delay.
    for read in (70, 100):
        r = at(read, 1000, 10, 8)
        if len(r) >= 2:
            one = r.set_index("strategy")["ops_per_s"]
            txt = (f"With the lab's 10 us delay ({read}% reads, n = 1000, 8 threads) the sleep "
                   f"dominates: {r.iloc[0]['strategy']} leads with "
                   f"{r.iloc[0]['ops_per_s'] / 1e3:.3g} k ops/s")
            if "one-mutex" in one:
                txt += (f", {r.iloc[0]['ops_per_s'] / one['one-mutex']:.1f}x one-mutex "
                        f"({one['one-mutex'] / 1e3:.3g} k ops/s)")
            out.append(txt + ".")
    # The lab's delay on one hot string: do readers wait out the writer's sleep?
    r = at(70, 1, 10, 8)
    if len(r) >= 2:
        one = r.set_index("strategy")["ops_per_s"]
        txt = (f"One hot string with the 10 us delay (70% reads, n = 1, 8 threads): "
               f"{r.iloc[0]['strategy']} leads with {r.iloc[0]['ops_per_s'] / 1e3:.3g} k ops/s")
        if "rwlock-per-slot" in one:
            txt += (f", {r.iloc[0]['ops_per_s'] / one['rwlock-per-slot']:.1f}x the lab's "
                    "rwlock-per-slot (readers that never wait out a writer's sleeping "
                    "critical section versus readers that do)")
        out.append(txt + ".")
    # Writer starvation.
    w = df[(df["family"] == "WriterStarvation")]
    for delay in sorted(w["delay_us"].dropna().unique()):
        g = w[w["delay_us"] == delay].set_index(["strategy", "readers"])
        if {"one-rwlock", "one-rwlock-wpref"} <= set(g.index.get_level_values(0)):
            rmax = g.index.get_level_values(1).max()
            a, b = g.loc[("one-rwlock", rmax)], g.loc[("one-rwlock-wpref", rmax)]
            out.append(
                f"Writer starvation ({int(rmax)} readers back to back on one string, delay "
                f"{int(delay)} us, one write per ms): the reader-preferring one-rwlock made the "
                f"writer wait {a['writer_wait_p99_us']:.3g} us at p99 (max "
                f"{a['writer_wait_max_us']:.3g} us, {int(a['writes'])} write(s) done), the "
                f"writer-preferring one-rwlock-wpref {b['writer_wait_p99_us']:.3g} us (max "
                f"{b['writer_wait_max_us']:.3g} us, {int(b['writes'])} write(s)).")
    return out


def ranking_settings(cores: int) -> list:
    """The settings of the report's ranking table: as many threads as cores at several read
    shares, oversubscribed, and the lab's 10 us delay."""
    return [{"read_pct": r, "n": n, "delay_us": d, "threads": t}
            for (r, n, d, t) in [(50, 1000, 0, cores), (95, 1000, 0, cores),
                                 (100, 1000, 0, cores), (95, 1, 0, cores), (95, 1000, 0, 32),
                                 (70, 1000, 10, 8), (100, 1000, 10, 8)]]
