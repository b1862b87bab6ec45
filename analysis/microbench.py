"""Microbenchmark analysis: Google Benchmark JSON from bench/ -> tables, figures, findings.

Input: the JSON that `bench/run-microbench.sh` (kv_bench --benchmark_out=... json) writes,
committed under results/microbench/. Two benchmark families:
  Store/<strategy>/s:<id>/read:<pct>/n:<n>/delay_us:<us>/.../threads:<t>
      counters ops_per_s (all threads, per second of wall time) and ns_per_op (one thread's
      mean wall time per operation);
  WriterStarvation/<strategy>/readers:<r>/delay_us:<us>/...
      counters writer_wait_{mean,p50,p99,max}_us, writes, writes_per_s, reads_per_s.

Pipeline of pure functions (no file I/O except load_benchmarks and render_section):
  load_benchmarks(json) -> DataFrame      one row per run (repetitions reduced to the median)
  table_ranking(df)    -> DataFrame      rank of every strategy in every setting
  table_overhead(df)   -> DataFrame      cost of each lock as a ratio to the unprotected store
  plot_ops_vs_threads(ax, df, ...)       ops/s versus threads, one line per strategy
  plot_writer_wait(ax, df, ...)          writer wait under a read-heavy load
  findings(df)         -> list[str]      sentences computed from the data
  render_section(df, figures_dir) -> str the report section (Markdown); writes its figures
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

BASELINE = "unprotected"
SETTING = ["read_pct", "n", "delay_us", "threads"]
STARVATION_METRICS = ["writer_wait_mean_us", "writer_wait_p50_us", "writer_wait_p99_us",
                      "writer_wait_max_us", "writes", "writes_per_s", "reads_per_s"]
COLUMNS = ["family", "strategy", "read_pct", "n", "delay_us", "threads", "readers",
           "ops_per_s", "ns_per_op", *STARVATION_METRICS]

# Fixed order and style per strategy (the four lab ones first, as in the registry).
ORDER = ["unprotected", "one-mutex", "mutex-per-slot", "one-rwlock", "rwlock-per-slot",
         "striped-mutex", "striped-rwlock", "one-rwlock-wpref", "rwlock-per-slot-wpref",
         "spinlock-per-slot", "seqlock-per-slot", "pointer-swap"]
_PALETTE = ["#000000", "#D55E00", "#0072B2", "#E69F00", "#009E73", "#56B4E9", "#CC79A7",
            "#F0E442", "#999999", "#882255", "#117733", "#332288"]
_MARKERS = ["x", "o", "s", "^", "D", "v", "<", ">", "P", "*", "h", "X"]
STYLE = {s: {"color": c, "marker": m} for s, c, m in zip(ORDER, _PALETTE, _MARKERS)}

RC = {"figure.dpi": 100, "savefig.dpi": 120, "font.size": 9, "axes.titlesize": 10,
      "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 7, "legend.frameon": False,
      "svg.hashsalt": "lockbench-microbench", "svg.fonttype": "path"}


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


def load_benchmarks(json_path) -> pd.DataFrame:
    """Reads kv_bench JSON into one row per (family, strategy, setting), columns COLUMNS.

    Aggregate rows (mean/median/stddev of --benchmark_repetitions) are ignored; repeated
    iteration rows of one setting are reduced to their median. Raises MicrobenchError on
    input that is not kv_bench output."""
    doc = json.loads(Path(json_path).read_text())
    if "benchmarks" not in doc:
        raise MicrobenchError(f"{json_path}: no 'benchmarks' key")
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
        raise MicrobenchError(f"{json_path}: no benchmark runs")
    df = pd.DataFrame(rows, columns=COLUMNS)
    keys = ["family", "strategy", "read_pct", "n", "delay_us", "threads", "readers"]
    df = (df.groupby(keys, dropna=False, sort=False).median(numeric_only=True).reset_index())
    for c in ["read_pct", "n", "delay_us", "threads"]:
        df[c] = df[c].astype("Int64") if df[c].notna().all() else df[c]
    df["order"] = df["strategy"].map({s: i for i, s in enumerate(ORDER)}).fillna(len(ORDER))
    df = df.sort_values(["family", "delay_us", "read_pct", "n", "threads", "readers",
                         "order", "strategy"]).drop(columns="order").reset_index(drop=True)
    return df


def store_runs(df: pd.DataFrame) -> pd.DataFrame:
    """The Store family only, with integer setting columns."""
    s = df[df["family"] == "Store"].copy()
    for c in SETTING:
        s[c] = s[c].astype(int)
    return s


def _ordered(strategies) -> list:
    present = list(dict.fromkeys(strategies))
    return [s for s in ORDER if s in present] + sorted(s for s in present if s not in ORDER)


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


def table_overhead(df: pd.DataFrame, n: int = 1000, delay_us: int = 0) -> pd.DataFrame:
    """Cost of each lock against the unprotected store, as ratios of ns/op (>1 = slower),
    at 1 thread (no contention: the price of lock + unlock) and at 2 threads (as many as
    cores), for every read share measured at (n, delay_us). Index: strategy."""
    s = store_runs(df)
    s = s[(s["n"] == n) & (s["delay_us"] == delay_us) & s["threads"].isin([1, 2])]
    out = {}
    for (read, thr), g in s.groupby(["read_pct", "threads"]):
        g = g.set_index("strategy")["ns_per_op"]
        if BASELINE not in g:
            continue
        out[f"{read}% reads, {thr} thr"] = g / g[BASELINE]
    t = pd.DataFrame(out)
    t = t.drop(index=BASELINE, errors="ignore")
    return t.reindex(_ordered(t.index))


def plot_ops_vs_threads(ax, df: pd.DataFrame, read_pct: int, n: int, delay_us: int,
                        strategies=None, **style):
    """One line per strategy: total ops/s (log) versus threads (log2) at one setting.
    Returns the Line2D artists."""
    s = store_runs(df)
    s = s[(s["read_pct"] == read_pct) & (s["n"] == n) & (s["delay_us"] == delay_us)]
    names = _ordered(s["strategy"]) if strategies is None else strategies
    artists = []
    for name in names:
        g = s[s["strategy"] == name].sort_values("threads")
        if g.empty:
            continue
        st = {**STYLE.get(name, {}), "markersize": 4, "linewidth": 1.2, **style}
        if name == BASELINE:
            st.update(linestyle="--", color="black")
        (line,) = ax.plot(g["threads"], g["ops_per_s"], label=name, **st)
        artists.append(line)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted(s["threads"].unique()), [str(t) for t in sorted(s["threads"].unique())])
    ax.set_xlabel("threads (machine has 2 cores)")
    ax.set_ylabel("ops/s, all threads (log)")
    ax.set_title(f"{read_pct}% reads, n = {n}, delay {delay_us} us")
    return artists


def plot_writer_wait(ax, df: pd.DataFrame, delay_us: int, metric: str = "writer_wait_p99_us"):
    """Grouped bars: writer lock wait (log us) per strategy and number of readers."""
    s = df[(df["family"] == "WriterStarvation") & (df["delay_us"] == delay_us)]
    names = _ordered(s["strategy"])
    readers = sorted(s["readers"].dropna().unique())
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(readers))
    artists = []
    for i, name in enumerate(names):
        g = s[s["strategy"] == name].set_index("readers").reindex(readers)
        vals = np.clip(g[metric].to_numpy(dtype=float), 0.01, None)
        artists.append(ax.bar(x + (i - (len(names) - 1) / 2) * width, vals, width,
                              label=name, color=STYLE.get(name, {}).get("color")))
    ax.set_xticks(x, [f"{int(r)} readers" for r in readers])
    ax.set_yscale("log")
    ax.set_ylabel(metric.replace("_", " ") + " (log)")
    ax.set_title(f"Writer wait under back-to-back readers, delay {delay_us} us")
    return artists


def _fmt_ratio(x: float) -> str:
    return f"{x:.1f}x" if x < 10 else f"{x:.0f}x"


def findings(df: pd.DataFrame) -> list[str]:
    """Observations computed from the data; each one is skipped if its runs are missing."""
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
    ov = table_overhead(df)
    below = sorted({k for c in ov.columns for k, v in ov[c].dropna().items() if v < 0.9})
    if below:
        out.append(
            "Noise warning: " + ", ".join(below) + " measured more than 10% faster than the "
            "unprotected store in some setting of the overhead table, which no correct "
            "strategy can be by more than its timing differences; on this shared 2-core VM, "
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
            r = at(read, n, 0, 2)
            if len(r) < 2:
                continue
            best, worst = r.iloc[0], r.iloc[-1]
            base = best["vs_unprotected"]
            out.append(
                f"{read}% reads, n = {n}, 2 threads (= cores), no delay: {best['strategy']} "
                f"wins with {best['ops_per_s'] / 1e6:.3g} M ops/s"
                + (f" ({base:.2f} of the unprotected store)" if not math.isnan(base) else "")
                + f"; {worst['strategy']} is last at {worst['ops_per_s'] / 1e6:.3g} M ops/s "
                f"({worst['ops_per_s'] / best['ops_per_s']:.2f} of the winner).")
    # Scaling from 1 to 2 threads (= cores): the only parallel step this machine has.
    g = s[(s["read_pct"] == 95) & (s["n"] == 1000) & (s["delay_us"] == 0)]
    p = g.pivot_table(index="strategy", columns="threads", values="ops_per_s")
    if 1 in p.columns and 2 in p.columns:
        gain = (p[2] / p[1]).dropna().sort_values(ascending=False)
        scale = [k for k, v in gain.items() if v >= 1.3 and k != BASELINE]
        flat = [k for k, v in gain.items() if v < 1.1 and k != BASELINE]
        txt = ("From 1 to 2 threads (95% reads, n = 1000, no delay) the unprotected store "
               f"gains {gain.get(BASELINE, float('nan')):.2f}x; ")
        txt += (f"{', '.join(scale)} gain at least 1.3x" if scale
                else "no strategy gains 1.3x")
        txt += (f", while {', '.join(flat)} gain less than 1.1x." if flat else ".")
        out.append(txt)
    # Oversubscription: 32 threads on 2 cores versus 2 threads.
    g = s[(s["read_pct"] == 95) & (s["n"] == 1000) & (s["delay_us"] == 0)]
    p = g.pivot_table(index="strategy", columns="threads", values="ops_per_s")
    if 2 in p.columns and 32 in p.columns:
        ratio = (p[32] / p[2]).drop(index=BASELINE, errors="ignore").dropna().sort_values()
        if len(ratio):
            out.append(
                "Oversubscribed (32 threads on 2 cores vs 2 threads, 95% reads, n = 1000, no "
                f"delay): {ratio.index[0]} keeps {ratio.iloc[0]:.2f} of its 2-thread throughput, "
                f"{ratio.index[-1]} {ratio.iloc[-1]:.2f}.")
    # Hot string: n = 1 vs n = 1000 at 2 threads, 70% reads.
    h = s[(s["read_pct"] == 70) & (s["delay_us"] == 0) & (s["threads"] == 2)]
    hp = h.pivot_table(index="strategy", columns="n", values="ops_per_s")
    if 1 in hp.columns and 1000 in hp.columns:
        hr = (hp[1] / hp[1000]).drop(index=BASELINE, errors="ignore").dropna().sort_values()
        out.append(
            "One hot string (n = 1) against n = 1000 (70% reads, 2 threads): "
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


PREDICTION = (
    "What this predicts for more cores (hedged: measured on 2 cores only, on a shared, noisy "
    "VM): with 2 cores at most two threads run at once, so the thread counts above 2 measure "
    "scheduling and lock hand-off under preemption, not more parallel access. On more cores, strategies that still gained from 1 to 2 "
    "threads and whose readers write no shared cache line (seqlock-per-slot, and per-slot or "
    "striped locks with large n) should keep scaling, while anything with one lock for the "
    "array (one-mutex, one-rwlock: the rwlock's reader count is itself a contended cache line) "
    "should flatten or fall, and spinning (spinlock-per-slot) should do better than here as long "
    "as threads do not outnumber cores. pointer-swap's readers write only their own hazard "
    "record, so like the seqlock they should scale on a hot string, at the price of two full "
    "fences per read. "
    "Confirm on a bigger machine before relying on any of this.")


def _save(fig, figures_dir: Path, name: str) -> None:
    figures_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(figures_dir / f"{name}.png", metadata={"Software": None})
    fig.savefig(figures_dir / f"{name}.svg", metadata={"Date": None, "Creator": None})


def _md_table(t: pd.DataFrame, fmt=str, index_name: str = "strategy") -> str:
    cols = [index_name, *map(str, t.columns)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in t.iterrows():
        cells = ["" if (isinstance(v, float) and math.isnan(v)) or v is None else fmt(v)
                 for v in row]
        lines.append("| " + " | ".join([str(idx), *cells]) + " |")
    return "\n".join(lines)


RANKING_SETTINGS = [
    {"read_pct": r, "n": n, "delay_us": d, "threads": t}
    for (r, n, d, t) in [(50, 1000, 0, 2), (95, 1000, 0, 2), (100, 1000, 0, 2), (95, 1, 0, 2),
                         (95, 1000, 0, 32), (70, 1000, 10, 8), (100, 1000, 10, 8)]]


def render_section(df: pd.DataFrame, figures_dir, figures_link: str = "figures") -> str:
    """The report section for the microbenchmarks, as Markdown. Writes its figures
    (microbench_*.png/.svg) into figures_dir; links them as figures_link/<name>.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures_dir = Path(figures_dir)
    s = store_runs(df)
    md = ["## Microbenchmarks: the locks by themselves", "",
          "In-process Google Benchmark runs of every strategy (`bench/`, no sockets), against "
          "an unprotected store that takes no lock (unsafe, measured only as the floor). Each "
          "thread runs a fixed random mix of reads and writes on uniformly random strings; "
          "ops/s is the total over all threads per second of wall time, ns/op one thread's mean "
          "wall time per operation. One run per setting on a 2-core machine: treat differences "
          "under ~20% as noise. Reproduce with `bench/run-microbench.sh`.", ""]
    with plt.rc_context(RC):
        panels = [(r, n, d) for (r, n, d) in [(50, 1000, 0), (95, 1000, 0), (100, 1000, 0),
                                               (70, 1, 0), (95, 1, 0), (70, 1000, 10),
                                               (100, 1000, 10), (70, 1, 10)]
                  if not s[(s["read_pct"] == r) & (s["n"] == n) & (s["delay_us"] == d)].empty]
        if panels:
            cols = 2
            rows = math.ceil(len(panels) / cols)
            fig, axes = plt.subplots(rows, cols, figsize=(10, 3.2 * rows),
                                     layout="constrained", squeeze=False)
            for ax, (r, n, d) in zip(axes.flat, panels):
                plot_ops_vs_threads(ax, df, r, n, d)
            for ax in list(axes.flat)[len(panels):]:
                ax.set_visible(False)
            handles, labels = axes.flat[0].get_legend_handles_labels()
            fig.legend(handles, labels, loc="outside right upper")
            _save(fig, figures_dir, "microbench_ops_vs_threads")
            plt.close(fig)
            md += [f"![ops/s versus threads]({figures_link}/microbench_ops_vs_threads.png)", "",
                   "*Throughput versus threads, one panel per setting (log-log).* "
                   f"([SVG]({figures_link}/microbench_ops_vs_threads.svg))", ""]
        w = df[df["family"] == "WriterStarvation"]
        if not w.empty:
            delays = sorted(w["delay_us"].dropna().unique())
            fig, axes = plt.subplots(1, len(delays), figsize=(5 * len(delays), 3.4),
                                     layout="constrained", squeeze=False)
            for ax, d in zip(axes.flat, delays):
                plot_writer_wait(ax, df, int(d))
            handles, labels = axes.flat[0].get_legend_handles_labels()
            fig.legend(handles, labels, loc="outside right upper")
            _save(fig, figures_dir, "microbench_writer_wait")
            plt.close(fig)
            md += [f"![writer wait]({figures_link}/microbench_writer_wait.png)", "",
                   "*p99 writer lock wait while readers hammer one string (log scale).* "
                   f"([SVG]({figures_link}/microbench_writer_wait.svg))", ""]
    ov = table_overhead(df)
    if not ov.empty:
        md += ["### Overhead against the unprotected store", "",
               "ns/op of each strategy divided by ns/op of the unprotected store (n = 1000, "
               "no delay): 1 thread = the uncontended price of taking and releasing the lock; "
               "2 threads = as many threads as cores.", "",
               _md_table(ov, lambda v: f"{v:.2f}"), ""]
    rank = table_ranking(df)
    wide = table_ranking_wide(rank, RANKING_SETTINGS)
    if not wide.empty:
        md += ["### Ranking per setting", "",
               "Rank (1 = most ops/s) and, in brackets, millions of ops/s; r = reads, "
               "thr = threads, us = artificial delay per access. The full ranking of every "
               "setting is `table_ranking()`.", "", _md_table(wide), ""]
    obs = findings(df)
    if obs:
        md += ["### Findings", ""] + [f"- {o}" for o in obs] + ["", PREDICTION, ""]
    return "\n".join(md)
