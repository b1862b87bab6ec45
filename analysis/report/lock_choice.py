"""Which lock, when: the microbenchmarks' answer for one workload class at a time.

Each class is one measured setting of the Store grid (read share, n, delay, threads). In
it, the best strategies are the first tier of microbench.table_ranking (the leader and
every strategy whose min-max range overlaps the leader's: ties are not broken), and the
ones to avoid are those slower than AVOID_BELOW of the leader beyond the spread (their
fastest repetition below that share of the leader's slowest). Every strategy named gets
its reason: the mechanism its traits (spins? FIFO? readers share? one lock for all?)
explain in that class, and the measured share of the best.

Pure functions over microbench.parse_benchmarks rows; the section draws and writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.report import microbench_tables as M

AVOID_BELOW = 0.5   # of the leader's slowest repetition, at the avoided one's fastest
SHOWN = 4           # strategies named per cell; the rest counted


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    read_pct: int
    n: int
    delay_us: int
    threads: str     # "cores", or a number of threads as text ("1", "32")

    def threads_on(self, cores: int) -> int:
        return max(cores, 1) if self.threads == "cores" else int(self.threads)

    def label(self, cores: int) -> str:
        t = self.threads_on(cores)
        delay = f", {self.delay_us} us inside" if self.delay_us else ""
        return f"{self.read_pct}% reads, n = {self.n}{delay}, {t} thread{'s' * (t != 1)}"


CLASSES = [
    WorkloadClass("uncontended (the price of lock + unlock)", 95, 1000, 0, "1"),
    WorkloadClass("read-mostly", 95, 1000, 0, "cores"),
    WorkloadClass("reads only", 100, 1000, 0, "cores"),
    WorkloadClass("write-heavy", 50, 1000, 0, "cores"),
    WorkloadClass("one hot string (contention through n)", 70, 1, 0, "cores"),
    WorkloadClass("spread over many strings", 70, 100000, 0, "2"),
    WorkloadClass("threads outnumber cores, hot string", 95, 1, 0, "32"),
    WorkloadClass("threads outnumber cores, spread", 70, 1000, 0, "32"),
    WorkloadClass("delay inside the critical section (the lab's)", 70, 1000, 10, "8"),
    WorkloadClass("delay inside, hot string", 70, 1, 10, "8"),
]


@dataclass(frozen=True)
class Traits:
    spins: bool          # waiters burn the CPU instead of sleeping
    fifo: bool           # the lock is handed to the next waiter in arrival order
    shared_reads: bool   # readers may hold it together (or take no lock)
    optimistic: bool     # readers take no lock at all (retry or hazard pointers)
    one_lock: bool       # one lock for the whole array
    combining: bool = False


SPINNING = ("spinlock", "ticketlock", "ttas", "mcs", "clh", "pflock")
FIFO = ("ticketlock", "mcs", "clh", "pflock")
SHARED = ("rwlock", "pflock", "bravo", "seqlock", "pointer-swap")


def traits(strategy: str) -> Traits:
    """What a strategy's name says about how it waits and what it shares."""
    has = lambda words: any(w in strategy for w in words)  # noqa: E731
    return Traits(spins=has(SPINNING), fifo=has(FIFO), shared_reads=has(SHARED),
                  optimistic=has(("seqlock", "pointer-swap")),
                  one_lock=strategy.startswith("one-") or strategy == "flat-combining",
                  combining=strategy == "flat-combining")


def why_slow(strategy: str, c: WorkloadClass, cores: int) -> str:
    """The mechanism that makes `strategy` lose in class `c` (the first that applies)."""
    t, threads = traits(strategy), c.threads_on(cores)
    over = threads > cores
    if over and t.spins and t.fifo:
        return ("FIFO hand-over to a waiter that is not running: with more threads than "
                "cores the next in line is often preempted, and everyone waits for it")
    if (over or c.delay_us) and t.spins:
        return "waiters spin on the cores the lock holder needs"
    if t.combining:
        return ("one combiner applies everyone's operations in turn: serial, plus the "
                "hand-off through the publication list")
    if "bravo" in strategy and c.read_pct < 100:
        return ("every write revokes the readers' bias and waits for the reader table to "
                "drain")
    if t.one_lock and threads > 1 and c.n > 1 and not (t.shared_reads and c.read_pct == 100):
        return "one lock serialises accesses to different strings"
    if "wpref" in strategy and c.read_pct >= 70:
        return "writer preference: readers queue behind every waiting writer"
    if c.delay_us and not t.shared_reads:
        return f"readers do not share it, so accesses sleep their {c.delay_us} us in turn"
    if t.optimistic and c.read_pct <= 70 and c.n == 1:
        return "readers retry while writers keep changing the one string"
    if t.shared_reads and c.read_pct <= 50:
        return ("reader/writer bookkeeping costs more than it saves when half the "
                "accesses write")
    if threads == 1:
        return "the most expensive lock + unlock when nobody competes"
    return "no single mechanism: slower here as measured"


def why_fast(strategy: str, c: WorkloadClass, cores: int) -> str:
    """The mechanism that lets `strategy` lead in class `c` (the first that applies)."""
    t, threads = traits(strategy), c.threads_on(cores)
    if strategy in M.NO_LOCK:
        return "takes no lock"
    if threads == 1:
        return "cheap lock + unlock: one atomic each way"
    if t.optimistic and c.read_pct >= 70:
        return "readers take no lock and write no shared line"
    if threads > cores and not t.spins:
        return "waiters sleep, so the holder keeps its core"
    if t.shared_reads and c.read_pct >= 95:
        return "readers share the lock"
    if not t.one_lock and c.n > 1:
        return "accesses to different strings do not contend"
    if c.delay_us and not t.spins:
        return "waiters sleep through the delay instead of spinning"
    if t.spins and threads <= cores:
        return "a spinning waiter takes the lock the moment it is free"
    return "cheapest hand-over measured here"


def _names(rows: pd.DataFrame, why, c: WorkloadClass, cores: int) -> str:
    """'name (reason; x of best)' for the first SHOWN rows, then how many more."""
    shown = [f"{r.strategy} ({why(r.strategy, c, cores)}; {r.of_best:.2f} of the best)"
             for r in rows.head(SHOWN).itertuples()]
    more = len(rows) - SHOWN
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def cell(rank: pd.DataFrame, c: WorkloadClass, cores: int) -> dict | None:
    """One class's best and avoided strategies (None when the setting was not measured)."""
    t = c.threads_on(cores)
    s = rank[(rank["read_pct"] == c.read_pct) & (rank["n"] == c.n)
             & (rank["delay_us"] == c.delay_us) & (rank["threads"] == t)]
    if s.empty:
        return None
    best = s[s["rank"] == 1].sort_values("ops_per_s", ascending=False)
    leader_lo = float(best["ops_per_s_lo"].min())
    avoid = s[s["ops_per_s_hi"] < AVOID_BELOW * leader_lo].sort_values("ops_per_s")
    return {"class": c.name, "setting": c.label(cores), "best": _names(best, why_fast, c, cores),
            "avoid": _names(avoid, why_slow, c, cores) if len(avoid) else "none beyond the spread",
            "leader_mops": float(best["ops_per_s"].max()) / 1e6,
            "n_best": len(best), "n_avoid": len(avoid)}


def table(df: pd.DataFrame, cores: int, machine: str) -> pd.DataFrame:
    """One row per workload class measured: class, setting, best, avoid, measured on."""
    rank = M.table_ranking(df)
    rows = [x for c in CLASSES if (x := cell(rank, c, cores)) is not None]
    for r in rows:
        r["measured on"] = machine
    cols = ["class", "setting", "best", "avoid", "measured on"]
    return pd.DataFrame(rows, columns=[*cols, "leader_mops", "n_best", "n_avoid"])


def machine_of(context: dict, cores: int) -> str:
    """The benchmark machine as the JSON's context names it: host, cores, clock."""
    host = context.get("host_name") or "unnamed host"
    mhz = context.get("mhz_per_cpu")
    return f"{host}, {cores} cores" + (f", {mhz} MHz" if mhz else "")


def beyond_floor(df: pd.DataFrame) -> pd.DataFrame:
    """Settings where a strategy is faster than the floor (the unprotected store) beyond
    the spread: its slowest repetition faster than the floor's fastest. A lock does the
    floor's work and more, so every such row is a disturbed measurement."""
    r = M.table_ranking(df)
    r = r[r["vs_unprotected_lo"] > 1]
    return r[[*M.SETTING, "strategy", "ops_per_s", "vs_unprotected", "vs_unprotected_lo"]]


def _where(rows: pd.DataFrame, shown: int = 8) -> str:
    """'strategy at setting; ...' for the first `shown` rows, then how many more."""
    named = [f"{r.strategy} at {r.read_pct}% r, n={r.n}, {r.delay_us} us, {r.threads} thr"
             for r in rows.head(shown).itertuples()]
    more = len(rows) - shown
    return "; ".join(named) + (f"; and {more} more" if more > 0 else "") or "none"


def floor_summary(df: pd.DataFrame) -> dict | None:
    """What beyond_floor found, for the report's prose (None: nothing beyond the floor)."""
    f = beyond_floor(df)
    if f.empty:
        return None
    return {"rows": len(f), "most": f"{(f['vs_unprotected'].max() - 1) * 100:.1f} %",
            "where": _where(f)}


def racing_summary(df: pd.DataFrame) -> dict | None:
    """Strategies faster beyond the spread than the store whose writers race without a
    lock (unprotected-racy), for the report's prose; None when there are none. On one
    string with writes that is physics: unsynchronised writers move the string's cache
    lines between cores on every write, while a lock serialises them, and one whose waiters
    back off or sleep lets its holder run a streak of operations on lines it already has.
    less_fair: how many of those rows have a lower Jain's index than the racing store."""
    r = M.table_ranking(df)
    r = r[r["vs_racy_lo"] > 1]
    if r.empty:
        return None
    fair = M.store_runs(df).set_index([*M.SETTING, "strategy"])["fair_jain"]

    def jain(row, name) -> float:
        return fair.get((row.read_pct, row.n, row.delay_us, row.threads, name), np.nan)

    def shown(v: float) -> str:
        return "-" if pd.isna(v) else f"{v:.2f}"

    hot = (r["n"] == 1) & (r["read_pct"] < 100)
    top = r.sort_values("vs_racy").iloc[-1]
    less_fair = sum(jain(x, x.strategy) < jain(x, M.RACY) for x in r.itertuples())
    return {"rows": len(r), "settings": len(r.groupby(M.SETTING)), "hot": int(hot.sum()),
            "less_fair": int(less_fair),
            "example": (f"{top.strategy} at {top.read_pct}% reads, n = {top.n}, "
                        f"{top.threads} threads: {top.vs_racy:.2f}x, Jain's index "
                        f"{shown(jain(top, top.strategy))} against {shown(jain(top, M.RACY))}"),
            "elsewhere": _where(r[~hot])}


def fairness_setting(df: pd.DataFrame, cores: int) -> tuple[int, int, int, int] | None:
    """The most contended measured setting with fairness counters, more threads than cores
    on one hot string preferred: (read %, n, delay us, threads), or None."""
    s = M.store_runs(df).dropna(subset=["fair_jain"])
    s = s[~s["strategy"].isin(M.NO_LOCK)]
    if s.empty:
        return None
    for want in [(70, 1, 0, 8), (50, 1, 0, 8), (95, 1, 0, 8), (70, 1, 0, 4 * cores)]:
        if (s[M.SETTING].to_numpy() == want).all(axis=1).any():
            return want
    s = s.assign(minus_threads=-s["threads"]).sort_values(
        ["n", "delay_us", "minus_threads", "read_pct"])
    return tuple(int(s.iloc[0][c]) for c in M.SETTING)
