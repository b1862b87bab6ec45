"""Microbenchmark analysis: Google Benchmark JSON from bench/ -> tables, figures, findings.

Input: the JSON that `bench/run-microbench.sh` (kv_bench --benchmark_out=... json) writes,
committed under results/microbench/. Two benchmark families:
  Store/<strategy>/s:<id>/read:<pct>/n:<n>/delay_us:<us>/.../threads:<t>
      counters ops_per_s (all threads, per second of wall time) and ns_per_op (one thread's
      mean wall time per operation);
      and, in runs from kv_bench with per-thread counts, FAIRNESS: fair_jain (Jain's
      index of the threads' operation counts), fair_rsd, fair_max_min, and the sampled
      lock-wait quantiles wait_p50_ns, wait_p99_ns, wait_p999_ns (wait_samples of them);
      absent (NaN) in older JSON;
  WriterStarvation/<strategy>/readers:<r>/delay_us:<us>/...
      counters writer_wait_{mean,p50,p99,max}_us, writes, writes_per_s, reads_per_s;
  StoreTiming/<strategy>/timing:<timed|sampled|untimed>, TimerCost/<timer>, Clock/...
      one thread's ns_per_op (what the store's own timing and the timers cost).

Pure functions (no file I/O, no figures: sections/microbench.py assembles the section,
figures.py draws, report.py writes):
  parse_benchmarks(doc) -> DataFrame    one row per setting: median of the repetitions and
                                        their min and max (the spread)
  table_ranking(df)    -> DataFrame      rank of every strategy in every setting
  table_overhead(df)   -> DataFrame      cost of each lock as a ratio to the unprotected store
  table_fairness(df)   -> DataFrame      fairness and wait tails of every strategy in a setting
  table_timing(df)     -> DataFrame      StoreTiming/TimerCost rows, timed over untimed
  fairness(counts)     -> dict           the fairness math of client/fairness.h
  findings(df, cores)  -> list[str]      sentences computed from the data
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from analysis import server_order
from analysis.load import read_raw_text
from analysis.stats import SINGLE_RUN_BAND, is_tie, rank_of, ratio_range, tiers

# The two stores without a lock (bench/store_floor.h, tests/store_unlocked.h): the floor
# every lock is measured against, and the array with its lock removed, whose writers race.
# Neither is a strategy: neither is ranked or recommended.
BASELINE = "unprotected"
RACY = "unprotected-racy"
NO_LOCK = (BASELINE, RACY)
SETTING = ["read_pct", "n", "delay_us", "threads"]
STARVATION_METRICS = ["writer_wait_mean_us", "writer_wait_p50_us", "writer_wait_p99_us",
                      "writer_wait_max_us", "writes", "writes_per_s", "reads_per_s"]
FAIRNESS = ["fair_jain", "fair_rsd", "fair_max_min", "wait_p50_ns", "wait_p99_ns",
            "wait_p999_ns", "wait_samples"]
COLUMNS = ["family", "strategy", "read_pct", "n", "delay_us", "threads", "readers",
           "ops_per_s", "ns_per_op", *STARVATION_METRICS, *FAIRNESS, "timing"]

# The generic server's registry order (the four lab strategies first): the order of rows.
ORDER = ["unprotected", "unprotected-racy", "one-mutex", "mutex-per-slot", "one-rwlock",
         "rwlock-per-slot", "striped-mutex", "striped-rwlock", "one-rwlock-wpref",
         "rwlock-per-slot-wpref", "spinlock-per-slot", "seqlock-per-slot", "pointer-swap"]
LAB_STRATEGIES = ORDER[2:6]  # main1..main4's locks


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


SPREAD = ["ops_per_s", "ns_per_op", "writer_wait_p99_us"]  # spread (min, max) kept


def parse_benchmarks(doc: dict, where: str = "microbenchmark JSON") -> pd.DataFrame:
    """kv_bench JSON (parsed) -> one row per (family, strategy, setting): columns COLUMNS
    as the median of the repetitions, <metric>_lo / <metric>_hi their min and max for
    SPREAD (for a setting that ran once: +-SINGLE_RUN_BAND around the value), and reps
    their number. Aggregate rows (mean/median/stddev of
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
               "readers": float(kv["readers"]) if "readers" in kv else np.nan,
               "timing": kv.get("timing")}
        for c in ["ops_per_s", "ns_per_op", *STARVATION_METRICS, *FAIRNESS]:
            row[c] = float(b[c]) if c in b else np.nan
        rows.append(row)
    if not rows:
        raise MicrobenchError(f"{where}: no benchmark runs")
    df = pd.DataFrame(rows, columns=COLUMNS)
    keys = ["family", "strategy", "read_pct", "n", "delay_us", "threads", "readers", "timing"]
    g = df.groupby(keys, dropna=False, sort=False)
    df = g.median(numeric_only=True)
    for c in SPREAD:
        df[f"{c}_lo"], df[f"{c}_hi"] = g[c].min(), g[c].max()
    df["reps"] = g.size()
    for c in SPREAD:  # one run: no spread is known; assume the band, never rank inside it
        once = df["reps"] < 2
        df.loc[once, f"{c}_lo"] = df.loc[once, c] * (1 - SINGLE_RUN_BAND)
        df.loc[once, f"{c}_hi"] = df.loc[once, c] * (1 + SINGLE_RUN_BAND)
    df = df.reset_index()
    for c in ["read_pct", "n", "delay_us", "threads"]:
        df[c] = df[c].astype("Int64") if df[c].notna().all() else df[c]
    df["order"] = df["strategy"].map({s: i for i, s in enumerate(ORDER)}).fillna(len(ORDER))
    df = df.sort_values(["family", "delay_us", "read_pct", "n", "threads", "readers",
                         "order", "strategy"]).drop(columns="order").reset_index(drop=True)
    return df


def load_benchmarks(json_path) -> pd.DataFrame:
    """parse_benchmarks of a JSON file, plain or gzipped (NAME or NAME.gz: load.raw_path;
    for tests and interactive use; the report reads the file in report/__init__.py)."""
    return parse_benchmarks(json.loads(read_raw_text(json_path)), str(json_path))


def store_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The Store family only, with integer setting columns."""
    s = df[df["family"] == "Store"].copy()
    for c in SETTING:
        s[c] = s[c].astype(int)
    return s


def fairness(counts) -> dict:
    """The fairness of per-thread operation counts, as client/fairness.h computes it:
    jain = (sum x)^2 / (n sum x^2) (1 = even, 1/n = one thread did all), rsd = population
    standard deviation / mean, max_min = max / min with a zero min counted as 1."""
    x = np.asarray(list(counts), dtype=float)
    if not len(x):
        return {"jain": 0.0, "rsd": 0.0, "max_min": 0.0}
    sq = float((x * x).sum())
    mean = float(x.mean())
    return {"jain": float(x.sum()) ** 2 / (len(x) * sq) if sq > 0 else 1.0,
            "rsd": float(x.std()) / mean if mean > 0 else 0.0,
            "max_min": float(x.max()) / max(float(x.min()), 1.0)}


def table_fairness(df: pd.DataFrame, read_pct: int = 95, n: int = 1000, delay_us: int = 0,
                   threads: int | None = None) -> pd.DataFrame:
    """Store runs of one setting (every thread count unless `threads`), one row per
    strategy and thread count: ops/s, the FAIRNESS counters (medians of the repetitions).
    Empty when the JSON predates the counters (they are NaN there)."""
    s = store_runs(df)
    s = s[(s["read_pct"] == read_pct) & (s["n"] == n) & (s["delay_us"] == delay_us)]
    if threads is not None:
        s = s[s["threads"] == threads]
    s = s.dropna(subset=["fair_jain"])
    return s[["strategy", "threads", "ops_per_s", *FAIRNESS]].reset_index(drop=True)


def table_timing(df: pd.DataFrame) -> pd.DataFrame:
    """The timing-cost rows: TimerCost/<timer> and StoreTiming/<strategy>/timing:<mode>
    with their ns_per_op, and for StoreTiming each mode's ratio to the untimed store
    (x_untimed). Empty when the JSON has none."""
    t = df[df["family"].isin(["TimerCost", "StoreTiming"])]
    rows = []
    for r in t.itertuples():
        untimed = t[(t["family"] == "StoreTiming") & (t["strategy"] == r.strategy)
                    & (t["timing"] == "untimed")]["ns_per_op"]
        ratio = (r.ns_per_op / untimed.iloc[0]
                 if r.family == "StoreTiming" and len(untimed) else np.nan)
        rows.append({"family": r.family, "what": r.strategy,
                     "timing": r.timing if isinstance(r.timing, str) else "",
                     "ns_per_op": r.ns_per_op, "x_untimed": ratio})
    return pd.DataFrame(rows, columns=["family", "what", "timing", "ns_per_op", "x_untimed"])


def _ordered(strategies) -> list:
    """Strategies in registry order (unknown ones after, by name)."""
    key = {s: i for i, s in enumerate(ORDER)}
    return server_order(sorted(strategies, key=lambda s: (key.get(s, len(ORDER)), s)))


def _vs(s: pd.DataFrame, ref: pd.DataFrame, col: str) -> pd.DataFrame:
    """s with its ops/s as a ratio to `ref`'s in the same setting, with the ratio's spread
    (col, col_lo, col_hi; NaN where `ref` did not run)."""
    ref = ref.set_index(SETTING)[["ops_per_s", "ops_per_s_lo", "ops_per_s_hi"]].add_prefix("r_")
    j = s.join(ref, on=SETTING)
    vs = [ratio_range(r.ops_per_s, (r.ops_per_s_lo, r.ops_per_s_hi), r.r_ops_per_s,
                      (r.r_ops_per_s_lo, r.r_ops_per_s_hi)) for r in j.itertuples()]
    s = s.copy()
    s[col], s[f"{col}_lo"], s[f"{col}_hi"] = ([v[i] for v in vs] for i in range(3))
    return s


def table_ranking(df: pd.DataFrame, include_baseline: bool = False) -> pd.DataFrame:
    """Long table: for every setting (read_pct, n, delay_us, threads), each strategy's
    ops/s with its spread (ops_per_s_lo/_hi), its rank (1 = fastest; strategies whose
    spread overlaps their tier leader's share the rank and are `tied`), its share of the
    best (ops/s / best) and, when they ran in that setting, its ratio to the floor
    (vs_unprotected, _lo, _hi) and to the racing store without a lock (vs_racy, _lo, _hi)
    with the ratio's spread. The two stores without a lock are ranked only if
    include_baseline."""
    s = store_runs(df)
    floor, racy = s[s["strategy"] == BASELINE], s[s["strategy"] == RACY]
    if not include_baseline:
        s = s[~s["strategy"].isin(NO_LOCK)]
    rank, tied = {}, {}
    for key, g in s.groupby(SETTING):
        t = tiers([(r.strategy, r.ops_per_s, r.ops_per_s_lo, r.ops_per_s_hi)
                   for r in g.itertuples()], lower_is_better=False)
        for name, place in rank_of(t).items():
            rank[(*key, name)] = place
        tied.update({(*key, name): len(tier) > 1 for tier in t for name in tier})
    keys = list(zip(*(s[c] for c in SETTING), s["strategy"]))
    s["rank"] = [rank[k] for k in keys]
    s["tied"] = [tied[k] for k in keys]
    s["of_best"] = s["ops_per_s"] / s.groupby(SETTING)["ops_per_s"].transform("max")
    s = _vs(_vs(s, floor, "vs_unprotected"), racy, "vs_racy")
    cols = [*SETTING, "rank", "tied", "strategy", "ops_per_s", "ops_per_s_lo", "ops_per_s_hi",
            "ns_per_op", "of_best", "vs_unprotected", "vs_unprotected_lo", "vs_unprotected_hi",
            "vs_racy", "vs_racy_lo", "vs_racy_hi"]
    return s.sort_values([*SETTING, "rank", "ops_per_s", "strategy"],
                         ascending=[True] * 5 + [False, True])[cols].reset_index(drop=True)


def mops(v: float) -> str:
    return f"{v / 1e6:.3g}"


def table_ranking_wide(ranking: pd.DataFrame, settings: list[dict]) -> pd.DataFrame:
    """Strategies x chosen settings, each cell 'rank (Mops/s; min-max)', the rank marked
    '=' when tied. settings: dicts with keys read_pct, n, delay_us, threads; missing
    settings are skipped."""
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
        cols[label] = {r.strategy: f"{r.rank}{'=' if r.tied else ''} ({mops(r.ops_per_s)}; "
                                   f"{mops(r.ops_per_s_lo)}-{mops(r.ops_per_s_hi)})"
                       for r in sub.itertuples()}
    wide = pd.DataFrame(cols)
    return wide.reindex(_ordered(wide.index))


def overhead_long(df: pd.DataFrame, n: int = 1000, delay_us: int = 0,
                  cores: int = 2) -> pd.DataFrame:
    """Cost of each lock against the unprotected store, as ratios of ns/op (>1 = slower),
    with the ratio's spread (lo, hi) from the repetitions' min-max, at 1 thread (no
    contention: the price of lock + unlock) and at `cores` threads (as many as the machine
    has), for every read share measured at (n, delay_us). Columns: strategy, column
    (the overhead table's column label), ratio, lo, hi."""
    s = store_runs(df)
    s = s[(s["n"] == n) & (s["delay_us"] == delay_us) & s["threads"].isin([1, cores])]
    rows = []
    for (read, thr), g in s.groupby(["read_pct", "threads"]):
        g = g.set_index("strategy")
        if BASELINE not in g.index:
            continue
        b = g.loc[BASELINE]
        for name, r in g.drop(index=BASELINE).iterrows():
            rng = ratio_range(r["ns_per_op"], (r["ns_per_op_lo"], r["ns_per_op_hi"]),
                              b["ns_per_op"], (b["ns_per_op_lo"], b["ns_per_op_hi"]))
            rows.append({"strategy": name, "column": f"{read}% reads, {thr} thr",
                         "ratio": rng[0], "lo": rng[1], "hi": rng[2]})
    return pd.DataFrame(rows, columns=["strategy", "column", "ratio", "lo", "hi"])


def _wide(long: pd.DataFrame, values) -> pd.DataFrame:
    t = pd.DataFrame({"strategy": long["strategy"], "column": long["column"], "v": values})
    t = t.pivot(index="strategy", columns="column", values="v")
    return t.reindex(index=_ordered(t.index), columns=list(dict.fromkeys(long["column"])))


def table_overhead(df: pd.DataFrame, n: int = 1000, delay_us: int = 0,
                   cores: int = 2) -> pd.DataFrame:
    """overhead_long's ratios, strategies x columns."""
    long = overhead_long(df, n, delay_us, cores)
    return _wide(long, long["ratio"])


def table_overhead_text(df: pd.DataFrame, n: int = 1000, delay_us: int = 0,
                        cores: int = 2) -> pd.DataFrame:
    """The overhead table as shown: 'ratio (lo-hi)', '=' before a ratio whose spread
    contains 1 (indistinguishable from no lock)."""
    long = overhead_long(df, n, delay_us, cores)
    text = [f"{'=' if is_tie(r.lo, r.hi) else ''}{r.ratio:.2f} ({r.lo:.2f}-{r.hi:.2f})"
            for r in long.itertuples()]
    return _wide(long, text)


def setting_runs(df: pd.DataFrame, read_pct: int, n: int, delay_us: int) -> pd.DataFrame:
    """The Store rows of one (read share, n, delay), all thread counts, in registry order."""
    s = store_runs(df)
    return s[(s["read_pct"] == read_pct) & (s["n"] == n) & (s["delay_us"] == delay_us)]


def starvation_runs(df: pd.DataFrame, delay_us: int) -> pd.DataFrame:
    """The WriterStarvation rows at one delay, in registry order."""
    return df[(df["family"] == "WriterStarvation") & (df["delay_us"] == delay_us)]


def _x(r: float) -> str:
    return f"{r:.1f}x" if r >= 9.995 else f"{r:.2f}x"


def _rng(r: float, lo: float, hi: float) -> str:
    """'1.95x (0.47-2.10x)': a ratio with its spread."""
    return f"{_x(r)} ({_x(lo)[:-1]}-{_x(hi)})"


def _at(rank: pd.DataFrame, read, n, delay, thr) -> pd.DataFrame:
    return rank[(rank["read_pct"] == read) & (rank["n"] == n) & (rank["delay_us"] == delay)
                & (rank["threads"] == thr)]


def _ratios(s: pd.DataFrame, index: str, num, den) -> pd.DataFrame:
    """Per strategy (not the baseline): ops/s at index == num over index == den, with the
    ratio's spread; columns ratio, lo, hi, sorted by ratio."""
    rows = {}
    for name, g in s.groupby("strategy"):
        g = g.set_index(index)
        if name in NO_LOCK or num not in g.index or den not in g.index:
            continue
        a, b = g.loc[num], g.loc[den]
        rows[name] = ratio_range(a["ops_per_s"], (a["ops_per_s_lo"], a["ops_per_s_hi"]),
                                 b["ops_per_s"], (b["ops_per_s_lo"], b["ops_per_s_hi"]))
    t = pd.DataFrame.from_dict(rows, orient="index", columns=["ratio", "lo", "hi"])
    return t.sort_values(["ratio"], kind="stable")


def _classify(t: pd.DataFrame) -> dict:
    """{'up': [...], 'down': [...], 'tie': [...]}: ratios clearly above 1, clearly below 1,
    and those whose spread contains 1."""
    out = {"up": [], "down": [], "tie": []}
    for name, r in t.iterrows():
        out["tie" if is_tie(r.lo, r.hi) else "up" if r.ratio > 1 else "down"].append(name)
    return out


def spread_summary(s: pd.DataFrame) -> str | None:
    """How far the repetitions of one setting lie apart, and how many strategies measured
    faster than the unprotected store (impossible for a correct lock) within and beyond
    that spread."""
    reps = int(s["reps"].max())
    if reps < 2:
        return (f"Each setting ran once: no spread is known, so a band of +-{SINGLE_RUN_BAND:.0%} "
                "around each value is assumed and nothing inside it is ranked; the rankings "
                "below are from one run.")
    rel = (s["ops_per_s_hi"] / s["ops_per_s_lo"]).replace([np.inf], np.nan).dropna()
    r = table_ranking(s)
    faster = r[r["vs_unprotected"] > 1]
    beyond = faster[faster["vs_unprotected_lo"] > 1]
    txt = (f"Spread: the {reps} repetitions of one setting differ (max/min ops/s) by a median "
           f"factor of {rel.median():.2f} and by up to {rel.max():.1f}x; ")
    measured = len(r[r["vs_unprotected"].notna()])
    if faster.empty:
        return txt + (f"none of {measured} strategy-setting medians measured faster than the "
                      "unprotected store (the floor), as it must be.")
    txt += (f"{len(faster)} of {measured} strategy-setting medians measured faster than the "
            "unprotected store (the floor), which no correct lock can be, and ")
    if beyond.empty:
        return txt + ("all of them lie within the spread (a tie with the unprotected store), "
                      "so the spread is the noise; differences inside it are ties, not ranks.")
    names = ", ".join(sorted(set(beyond["strategy"])))
    return txt + (f"{len(beyond)} lie beyond the spread ({names}"
                  "): in those settings the unprotected store's own repetitions were slowed "
                  "by other load, so even the spread understates the noise.")


def _timing_rows(df: pd.DataFrame) -> list:
    t = table_timing(df)
    t = t[(t["family"] == "StoreTiming") & (t["what"] == BASELINE)].set_index("timing")
    if not {"timed", "untimed"} <= set(t.index):
        return []
    return [f"Timing: the grid samples 1 operation in 64 with the cycle counter. On one thread "
            f"the unprotected store takes {t.loc['timed', 'ns_per_op']:.1f} ns per operation "
            f"timed on every operation (three clock reads) and "
            f"{t.loc['untimed', 'ns_per_op']:.1f} ns with timing compiled out "
            f"({t.loc['timed', 'x_untimed']:.1f}x)."]


def _clock(df: pd.DataFrame, s: pd.DataFrame) -> list:
    if len(df[df["family"] == "StoreTiming"]):
        return _timing_rows(df)
    clock = df[df["family"] == "Clock"]["ns_per_op"].dropna()
    base1 = s[(s["strategy"] == BASELINE) & (s["threads"] == 1) & (s["delay_us"] == 0)
              & (s["n"] == 1000)]["ns_per_op"]
    if not len(clock) or not len(base1):
        return []
    if 3 * clock.iloc[0] >= base1.median():
        return [f"The clock-read benchmark ({clock.iloc[0]:.0f} ns per read) was disturbed by "
                "other load: three reads would exceed a whole unprotected operation "
                f"({base1.median():.0f} ns at 1 thread). Treat this run's 1-thread ratios "
                "with care."]
    return [f"Fixed cost: every store operation reads the monotonic clock three times for its "
            f"wait/hold timing ({clock.iloc[0]:.0f} ns per read here), about "
            f"{3 * clock.iloc[0]:.0f} ns of the unprotected store's {base1.median():.0f} ns per "
            "operation at 1 thread; the ratios below compare whole operations, so they "
            "understate what the lock alone costs."]


def _uncontended(df: pd.DataFrame, cores: int) -> list:
    long = overhead_long(df, cores=cores)
    long = long[long["strategy"] != RACY]
    o = (long[long["column"] == "95% reads, 1 thr"].set_index("strategy")
         [["ratio", "lo", "hi"]].sort_values("ratio", kind="stable"))
    if o.empty:
        return []
    lab = [k for k in LAB_STRATEGIES if k in o.index]
    tie = [k for k, r in o.iterrows() if is_tie(r.lo, r.hi)]
    cheap, dear = o.iloc[0], o.iloc[-1]
    txt = ("Uncontended cost (1 thread, 95% reads, n = 1000, no delay), time per operation "
           f"against the unprotected store: cheapest {o.index[0]} {_rng(*cheap)}, dearest "
           f"{o.index[-1]} {_rng(*dear)}")
    txt += (", but their ranges overlap, so even these two are a tie" if
            max(cheap.lo, dear.lo) <= min(cheap.hi, dear.hi) else "")
    txt += "; the lab's mutexes and rwlocks: " + ", ".join(
        f"{k} {_rng(*o.loc[k])}" for k in lab) + ". "
    return [txt + (f"{len(tie)} of {len(o)} strategies are indistinguishable from taking no "
                   "lock at all (the range contains 1)." if tie else
                   "Every strategy costs more than no lock beyond the spread.")]


def _leaders(rank: pd.DataFrame, read, n, delay, thr, cores: int) -> list:
    r = _at(rank, read, n, delay, thr)
    if len(r) < 2:
        return []
    where = (f"{read}% reads, n = {n}, {thr} threads{' (= cores)' if thr == cores else ''}, "
             + ("no delay" if delay == 0 else f"{delay} us delay"))
    lead = r.iloc[0]
    tied = list(r[r["rank"] == 1]["strategy"])[1:]
    txt = (f"{where}: {lead['strategy']} has the most ops/s, {mops(lead['ops_per_s'])} M "
           f"({mops(lead['ops_per_s_lo'])}-{mops(lead['ops_per_s_hi'])})")
    if len(tied) == len(r) - 1:
        return [txt + f", but all {len(r)} strategies tie (their ranges overlap the leader's)."]
    if tied:
        txt += (f", tied with {len(tied)} other(s) whose ranges overlap it ({', '.join(tied)})")
    if pd.notna(lead["vs_unprotected"]):
        vs = (lead["vs_unprotected"], lead["vs_unprotected_lo"], lead["vs_unprotected_hi"])
        txt += f"; against the unprotected store {_rng(*vs)}"
        txt += (", a tie" if is_tie(vs[1], vs[2]) else
                ", faster beyond the spread: a disturbed measurement" if vs[1] > 1 else "")
    last = r.iloc[-1]
    return [txt + f"; last, outside the leader's range: {last['strategy']} at "
            f"{mops(last['ops_per_s'])} M ({mops(last['ops_per_s_lo'])}-"
            f"{mops(last['ops_per_s_hi'])})."]


def _moves(t: pd.DataFrame, what: str) -> str:
    c = _classify(t)
    def verb(names, one, many):
        return f"{', '.join(names)} {one if len(names) == 1 else many} beyond the spread"

    parts = ([verb(c["up"], "rises", "rise")] if c["up"] else []) + (
        [verb(c["down"], "falls", "fall")] if c["down"] else []) + (
        [f"{len(c['tie'])} of {len(t)} change within the spread (ties)"] if c["tie"] else [])
    ext = (f" (extremes: {t.index[0]} {_rng(*t.iloc[0])}, {t.index[-1]} {_rng(*t.iloc[-1])})"
           if len(t) > 1 else "")
    return f"{what}, in ops/s: " + "; ".join(parts) + ext + "."


def _scaling(s: pd.DataFrame, cores: int) -> list:
    out = []
    g = s[(s["read_pct"] == 95) & (s["n"] == 1000) & (s["delay_us"] == 0)]
    if cores > 1 and {1, cores} <= set(g["threads"]):
        out.append(_moves(_ratios(g, "threads", cores, 1),
                          f"From 1 to {cores} threads (95% reads, n = 1000, no delay)"))
    if cores != 32 and {cores, 32} <= set(g["threads"]):
        out.append(_moves(_ratios(g, "threads", 32, cores),
                          f"Oversubscribed, 32 threads on {cores} cores against {cores} threads "
                          "(95% reads, n = 1000, no delay)"))
    h = s[(s["read_pct"] == 70) & (s["delay_us"] == 0) & (s["threads"] == cores)]
    if {1, 1000} <= set(h["n"]):
        out.append(_moves(_ratios(h, "n", 1, 1000),
                          f"One hot string (n = 1) against n = 1000 (70% reads, {cores} threads)"))
    return out


def _lab_delay(rank: pd.DataFrame, cores: int) -> list:
    out = []
    for read, n, base in ((70, 1000, "one-mutex"), (100, 1000, "one-mutex"),
                          (70, 1, "rwlock-per-slot")):
        r = _at(rank, read, n, 10, 8)
        if len(r) < 2:
            continue
        txt = _leaders(rank, read, n, 10, 8, cores)[0].rstrip(".")
        one = r.set_index("strategy")
        if base in one.index and base != r.iloc[0]["strategy"]:
            a, b = r.iloc[0], one.loc[base]
            rng = ratio_range(a["ops_per_s"], (a["ops_per_s_lo"], a["ops_per_s_hi"]),
                              b["ops_per_s"], (b["ops_per_s_lo"], b["ops_per_s_hi"]))
            txt += f"; the leader against {base}: {_rng(*rng)}"
        out.append(txt + ".")
    return out


def _starvation(df: pd.DataFrame) -> list:
    out = []
    w = df[(df["family"] == "WriterStarvation")]
    for delay in sorted(w["delay_us"].dropna().unique()):
        g = w[w["delay_us"] == delay].set_index(["strategy", "readers"])
        if not {"one-rwlock", "one-rwlock-wpref"} <= set(g.index.get_level_values(0)):
            continue
        rmax = g.index.get_level_values(1).max()
        a, b = g.loc[("one-rwlock", rmax)], g.loc[("one-rwlock-wpref", rmax)]
        apart = a["writer_wait_p99_us_lo"] > b["writer_wait_p99_us_hi"]
        out.append(
            f"Writer starvation ({int(rmax)} readers back to back on one string, delay "
            f"{int(delay)} us, one write per ms): the reader-preferring one-rwlock made the "
            f"writer wait {a['writer_wait_p99_us']:.3g} us at p99 (repetitions "
            f"{a['writer_wait_p99_us_lo']:.3g}-{a['writer_wait_p99_us_hi']:.3g}; max "
            f"{a['writer_wait_max_us']:.3g} us, {int(a['writes'])} write(s) done), the "
            f"writer-preferring one-rwlock-wpref {b['writer_wait_p99_us']:.3g} us "
            f"({b['writer_wait_p99_us_lo']:.3g}-{b['writer_wait_p99_us_hi']:.3g}; max "
            f"{b['writer_wait_max_us']:.3g} us, {int(b['writes'])} write(s))"
            + ("; the ranges do not overlap." if apart else "; the ranges overlap: a tie."))
    return out


def findings(df: pd.DataFrame, cores: int) -> list[str]:
    """Observations computed from the data, each ranking and ratio with its spread (the
    min-max of the repetitions); each one is skipped if its runs are missing.
    cores: logical cores of the machine that ran the benchmarks."""
    s = store_runs(df)
    rank = table_ranking(df)
    out = [x for x in [spread_summary(s)] if x] + _clock(df, s) + _uncontended(df, cores)
    for read in (50, 95, 100):
        for n in (1000, 1):
            out += _leaders(rank, read, n, 0, cores, cores)
    return out + _scaling(s, cores) + _lab_delay(rank, cores) + _starvation(df)


def ranking_settings(cores: int) -> list:
    """The settings of the report's ranking table: as many threads as cores at several read
    shares, oversubscribed, and the lab's 10 us delay."""
    return [{"read_pct": r, "n": n, "delay_us": d, "threads": t}
            for (r, n, d, t) in [(50, 1000, 0, cores), (95, 1000, 0, cores),
                                 (100, 1000, 0, cores), (95, 1, 0, cores), (95, 1000, 0, 32),
                                 (70, 1000, 10, 8), (100, 1000, 10, 8)]]
