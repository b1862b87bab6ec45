"""Observations for the report, computed from the summaries: every sentence is built from
numbers in the data and its wording is chosen by those numbers (nothing canned).

Each observe_* function is pure: summaries in, list of Markdown sentences out.
"""


import numpy as np
import pandas as pd

from . import STRATEGIES, server_order
from .tables import ordered_values

SAME = 0.10  # relative changes below this are called "about the same"


def name(server: str) -> str:
    return f"{server} ({STRATEGIES[server]})" if server in STRATEGIES else str(server)


def ms(x: float) -> str:
    return f"{x * 1e3:.3g} ms"


def us(x: float) -> str:
    return f"{x:,.0f} us" if x >= 100 else f"{x:.3g} us"


def plural(k: int, word: str) -> str:
    return f"{k} {word}" if k == 1 else f"{k} {word}s"


def times(r: float) -> str:
    return f"{r:.1f}x" if r >= 1.95 else f"{r:.2f}x"


def _overlap(a, b) -> bool | None:
    """Whether two (lo, hi) intervals overlap; None if either is undefined."""
    if any(not np.isfinite(v) for v in (*a, *b)):
        return None
    return max(a[0], b[0]) <= min(a[1], b[1])


def _ci(row) -> tuple:
    return (row["ci_lo_s"], row["ci_hi_s"])


def compare(fast_row, slow_row) -> str:
    """'X faster; the 95% CIs do not overlap' style clause for two lab summary rows."""
    r = slow_row["mean_s"] / fast_row["mean_s"]
    ov = _overlap(_ci(fast_row), _ci(slow_row))
    if ov is None:
        tail = "too few runs for a confidence interval"
    elif ov:
        tail = "but their 95% confidence intervals overlap, so the gap is not established"
    else:
        tail = "and their 95% confidence intervals do not overlap"
    return f"{times(r)} lower mean latency, {tail}"


def ranking(summary: pd.DataFrame, n: int, col: str = "mean_s") -> list:
    g = summary[(summary["n"] == n) & summary[col].notna()]
    return list(g.sort_values([col, "server"])["server"])


def observe_winners(summary: pd.DataFrame) -> list:
    """Which strategy has the lowest mean latency at each n, by how much, and whether the
    ranking holds across n."""
    out = []
    ranks = {}
    for n in sorted(summary["n"].unique()):
        order = ranking(summary, n)
        if not order:
            continue
        ranks[n] = order
        g = summary[summary["n"] == n].set_index("server")
        best = order[0]
        s = f"At n = {n}, {name(best)} has the lowest mean latency, {ms(g.loc[best, 'mean_s'])}"
        if len(order) > 1:
            s += (f"; against the runner-up {name(order[1])} that is "
                  f"{compare(g.loc[best], g.loc[order[1]])}")
        if best != "main1" and "main1" in g.index:
            s += f"; against the single mutex main1 it is {times(g.loc['main1', 'mean_s'] / g.loc[best, 'mean_s'])} faster"
        out.append(s + ". Order, fastest first: " + " < ".join(order) + ".")
    if len(ranks) > 1:
        orders = {tuple(v) for v in ranks.values()}
        if len(orders) == 1:
            out.append("The order is the same at every n.")
        else:
            out.append("The order changes with n: " + "; ".join(
                f"n = {n}: {' < '.join(v)}" for n, v in ranks.items()) + ".")
    return out


def observe_rwlock(summary: pd.DataFrame, read_ratio: float | None) -> list:
    """Do reader/writer locks pay off? main3 vs main1 and main4 vs main2 at each n."""
    out = []
    mix = f" at {read_ratio:.0%} reads" if read_ratio is not None and np.isfinite(read_ratio) else ""
    for rw, mx in (("main3", "main1"), ("main4", "main2")):
        parts = []
        verdicts = set()
        for n in sorted(summary["n"].unique()):
            g = summary[summary["n"] == n].set_index("server")
            if rw not in g.index or mx not in g.index:
                continue
            a, b = g.loc[rw], g.loc[mx]
            ov = _overlap(_ci(a), _ci(b))
            r = b["mean_s"] / a["mean_s"]
            if ov:
                verdicts.add("unclear")
                parts.append(f"n = {n}: {r:.2f}x, confidence intervals overlap")
            elif r >= 1:
                verdicts.add("pays")
                parts.append(f"n = {n}: {times(r)} faster")
            else:
                verdicts.add("costs")
                parts.append(f"n = {n}: {times(1 / r)} slower")
        if not parts:
            continue
        if verdicts == {"pays"}:
            head = f"The rwlock pays off{mix}: {name(rw)} beats {name(mx)} at every n"
        elif verdicts == {"costs"}:
            head = f"The rwlock does not pay off{mix}: {name(rw)} is slower than {name(mx)} at every n"
        elif verdicts == {"unclear"}:
            head = f"{name(rw)} and {name(mx)} cannot be told apart{mix}"
        elif verdicts == {"pays", "unclear"}:
            head = (f"{name(rw)} beats {name(mx)}{mix} wherever the difference is clear, and "
                    "the two cannot be told apart elsewhere")
        elif verdicts == {"costs", "unclear"}:
            head = (f"{name(rw)} is slower than {name(mx)}{mix} wherever the difference is "
                    "clear, and the two cannot be told apart elsewhere")
        else:
            head = f"{name(rw)} against {name(mx)}{mix} depends on n"
        out.append(head + " (" + "; ".join(parts) + ").")
    return out


def observe_n_effect(summary: pd.DataFrame) -> list:
    """How each server's mean latency moves from the smallest to the largest n."""
    ns = sorted(summary["n"].unique())
    if len(ns) < 2:
        return []
    lo, hi = ns[0], ns[-1]
    flat, moved = [], []
    for s in server_order(summary["server"]):
        g = summary[summary["server"] == s].set_index("n")
        if lo not in g.index or hi not in g.index:
            continue
        r = g.loc[hi, "mean_s"] / g.loc[lo, "mean_s"]
        if abs(r - 1) < SAME:
            flat.append(f"{s} ({(r - 1) * 100:+.0f}%)")
        elif r < 1:
            moved.append(f"{name(s)} falls {times(1 / r)}")
        else:
            moved.append(f"{name(s)} rises {times(r)}")
    out = []
    if moved:
        out.append(f"From n = {lo} to n = {hi} the mean latency of " + ", ".join(moved) + ".")
    if flat:
        out.append(f"It changes by less than {SAME:.0%} from n = {lo} to n = {hi} for "
                   + ", ".join(flat) + ".")
    return out


def observe_skew(summary: pd.DataFrame) -> list:
    """Mean against median: are there slow outlier runs?"""
    g = summary[summary["median_s"] > 0].copy()
    if g.empty:
        return []
    g["r"] = g["mean_s"] / g["median_s"]
    skewed = g[g["r"] > 1 + SAME]
    if skewed.empty:
        return [f"Mean and median agree within {SAME:.0%} in all {len(g)} cells "
                f"(largest mean/median ratio {g['r'].max():.2f}), so no cell is dominated by a "
                "few slow runs."]
    cells = ", ".join(f"{r.server} n = {r.n} ({r.r:.2f})" for r in skewed.itertuples())
    return [f"In {len(skewed)} of {len(g)} cells the mean exceeds the median by more than "
            f"{SAME:.0%} (mean/median: {cells}): a few slow runs pull the mean up there; the "
            "median table is the better guide for those cells."]


def observe_errors(lab: pd.DataFrame) -> list:
    runs = len(lab)
    errors = int(lab["errors"].fillna(0).sum())
    missing = int(lab["latency_s"].isna().sum())
    out = []
    if errors == 0:
        out.append(f"The client counted no errors in {runs} runs.")
    else:
        bad = lab[lab["errors"].fillna(0) > 0]
        cells = bad.groupby(["server", "n"])["errors"].sum()
        out.append(f"The client counted {errors} errors in {len(bad)} of {runs} runs ("
                   + ", ".join(f"{s} n = {n}: {int(e)}" for (s, n), e in cells.items()) + ").")
    if missing:
        out.append(f"{missing} runs have no time-file value and are left out of the tables.")
    return out


def observe_wait_hold(wh: pd.DataFrame) -> list:
    """Share of the latency spent waiting for the lock, per n: largest and smallest."""
    out = []
    wh = wh[wh["latency_s"] > 0]
    for n in sorted(wh["n"].unique()):
        g = wh[wh["n"] == n].copy()
        g["share"] = g["wait_s"] / g["latency_s"]
        hi = g.loc[g["share"].idxmax()]
        lo = g.loc[g["share"].idxmin()]
        s = (f"At n = {n}, lock waiting is {hi['share']:.0%} of the mean latency under "
             f"{hi['server']} ({ms(hi['wait_s'])} of {ms(hi['latency_s'])})")
        if lo["server"] != hi["server"]:
            s += (f" and {lo['share']:.0%} under {lo['server']} "
                  f"({ms(lo['wait_s'])} of {ms(lo['latency_s'])})")
        out.append(s + "; mean time holding the lock: " + ", ".join(
            f"{r.server} {us(r.hold_s * 1e6)}" for r in g.itertuples()) + ".")
    return out


def observe_delay_slept(servers: pd.DataFrame | None, nominal_us: float | None) -> list:
    if servers is None or servers.empty:
        return []
    v = servers["summary_mean_delay_slept_us"].dropna()
    if v.empty:
        return []
    s = (f"The servers report sleeping {v.median():.3g} us per artificial delay "
         f"(median over {len(v)} server starts, range {v.min():.3g}-{v.max():.3g} us)")
    if nominal_us is not None and nominal_us > 0:
        s += f" for a nominal {nominal_us:g} us ({v.median() / nominal_us:.1f}x)"
    return [s + "."]


def observe_saturation(knees: pd.DataFrame, fraction: float = 0.9) -> list:
    out = []
    for r in knees.itertuples():
        s = (f"{name(r.server)} peaks at {r.peak_rps:,.0f} requests/s with "
             f"{plural(r.peak_threads, 'client thread')} and reaches {fraction:.0%} of that "
             f"with {plural(r.knee_threads, 'thread')} (p95 {us(r.knee_p95_us)} there")
        if r.max_threads > r.knee_threads:
            s += f"; with {r.max_threads} threads p95 is {us(r.p95_at_max_us)}"
        s += ")"
        if r.peak_threads == r.max_threads:
            s += (f"; its throughput was still highest at the largest count tried "
                  f"({r.max_threads}), so it may not have saturated within the sweep")
        out.append(s + ".")
    if len(knees) > 1:
        best = knees.loc[knees["peak_rps"].idxmax()]
        worst = knees.loc[knees["peak_rps"].idxmin()]
        out.append(f"Highest peak: {best['server']}, {best['peak_rps'] / worst['peak_rps']:.2f}x "
                   f"that of the lowest ({worst['server']}).")
    return out


def _metric(summary: pd.DataFrame):
    """Server-side mean latency when the summaries are there, else client mean latency."""
    if "summary_mean_latency_s" in summary and summary["summary_mean_latency_s"].notna().all():
        return "summary_mean_latency_s", "server mean memory access latency", 1.0
    return "lat_mean_us", "client mean latency", 1e-6


def observe_sweep_ranking(summary: pd.DataFrame, param: str, what: str) -> list:
    """Is the order of the servers (by latency) the same at every value of the parameter?"""
    col, desc, to_s = _metric(summary)
    orders = {}
    for v in ordered_values(summary[param]):
        g = summary[summary[param] == v].sort_values([col, "server"])
        orders[v] = list(g["server"])
    if not orders:
        return []
    fmt = (lambda v: f"{v:g}") if not isinstance(next(iter(orders)), str) else str
    if len({tuple(o) for o in orders.values()}) == 1:
        return [f"By {desc}, the order of the servers is the same at every point of the {what} sweep "
                f"({' < '.join(next(iter(orders.values())))}, fastest first)."]
    return [f"By {desc}, the order of the servers changes with the {what}: " + "; ".join(
        f"{fmt(v)}: {' < '.join(o)}" for v, o in orders.items()) + "."]


def observe_sweep_span(summary: pd.DataFrame, param: str, what: str) -> list:
    """How much each server's latency and throughput move across the swept range."""
    col, desc, to_s = _metric(summary)
    vals = ordered_values(summary[param])
    if len(vals) < 2:
        return []
    a, b = vals[0], vals[-1]
    fmt = (lambda v: f"{v:g}") if not isinstance(a, str) else str
    parts = []
    for s in server_order(summary["server"]):
        g = summary[summary["server"] == s].set_index(param)
        if a not in g.index or b not in g.index:
            continue
        la, lb = g.loc[a, col] * to_s, g.loc[b, col] * to_s
        ta, tb = g.loc[a, "throughput_rps"], g.loc[b, "throughput_rps"]
        parts.append(f"{s} {ms(la)} -> {ms(lb)} ({lb / la:.2f}x), "
                     f"{ta:,.0f} -> {tb:,.0f} req/s ({tb / ta:.2f}x)")
    if not parts:
        return []
    return [f"From {what} {fmt(a)} to {fmt(b)}, {desc} and throughput move as follows: "
            + "; ".join(parts) + "."]


def observe_sweep_errors(sweep: pd.DataFrame, what: str) -> list:
    e = int(sweep["errors"].fillna(0).sum())
    sat = int(sweep["saturated"].fillna(False).sum())
    out = []
    if e:
        out.append(f"The client counted {e} errors over the {len(sweep)} runs of the {what} "
                   "sweep; the affected points are less trustworthy.")
    if sat:
        out.append(f"{sat} runs of the {what} sweep missed their target rate (saturated).")
    return out
