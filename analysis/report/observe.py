"""Observations for the report, computed from the summaries: every sentence is built from
numbers in the data and its wording is chosen by those numbers (nothing canned).

Each observe_* function is pure: summaries in, list of Markdown sentences out.

Every ranking and ratio states its spread and calls differences inside it ties: the lab
cells' spread is the 95% confidence interval of the mean, a sweep point's the min-max of
its repetitions. A ratio a/b is given with the range a_lo/b_hi .. a_hi/b_lo; when that
range contains 1, or two intervals overlap, the two are a tie (written ≈ in an order).
"""

import math

import numpy as np
import pandas as pd

from analysis import server_label as name  # how sentences name a server
from analysis import server_order
from analysis.report.tables import ordered_values
from analysis.stats import SINGLE_RUN_BAND, format_tiers, is_tie, overlap, ratio_range, tiers

SAME = 0.10  # relative changes below this are called "about the same"


def ms(x: float) -> str:
    return f"{x * 1e3:.3g} ms"


def us(x: float) -> str:
    return f"{x:,.0f} us" if x >= 100 else f"{x:.3g} us"


def plural(k: int, word: str) -> str:
    return f"{k} {word}" if k == 1 else f"{k} {word}s"


def _x(r: float) -> str:
    return f"{r:.1f}" if r >= 9.995 else f"{r:.2f}"


def times(r: float) -> str:
    return f"{_x(r)}x"


def times_range(r: float, lo: float, hi: float) -> str:
    """'1.73x (1.52-1.97x)': a ratio and its spread; no range when the spread is unknown."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return times(r)
    return f"{times(r)} ({_x(lo)}-{_x(hi)}x)"


def inverse(rng: tuple) -> tuple:
    """(1/r, 1/hi, 1/lo) of a ratio with its spread."""
    r, lo, hi = rng
    return (1 / r, 1 / hi if hi else math.nan, 1 / lo if lo else math.nan)


_overlap = overlap


def _ci(row) -> tuple:
    return (row["ci_lo_s"], row["ci_hi_s"])


def lab_ratio(num_row, den_row) -> tuple:
    """(mean ratio num/den, lo, hi) of two lab summary rows, spread from their 95% CIs."""
    return ratio_range(num_row["mean_s"], _ci(num_row), den_row["mean_s"], _ci(den_row))


def compare(fast_row, slow_row) -> str:
    """'X faster; the 95% CIs do not overlap' style clause for two lab summary rows."""
    ov = _overlap(_ci(fast_row), _ci(slow_row))
    if ov is None:
        tail = "too few runs for a confidence interval"
    elif ov:
        tail = "but their 95% confidence intervals overlap, so the gap is not established (a tie)"
    else:
        tail = "and their 95% confidence intervals do not overlap"
    return f"{times_range(*lab_ratio(slow_row, fast_row))} lower mean latency, {tail}"


def lab_tiers(summary: pd.DataFrame, n: int) -> list:
    """The servers at n in tiers, fastest first; a tier = 95% CIs overlapping its leader's."""
    g = summary[(summary["n"] == n) & summary["mean_s"].notna()]
    return tiers([(r.server, r.mean_s, r.ci_lo_s, r.ci_hi_s) for r in g.itertuples()])


def clear_pairs(tiers_: list) -> set:
    """(a, b) for every a in a better tier than b: the orderings beyond the spread."""
    return {(a, b) for i, t in enumerate(tiers_) for u in tiers_[i + 1:] for a in t for b in u}


def order_change(orders: dict) -> str | None:
    """How an order (tiers, by point) varies: 'same', 'ties' (no pair swaps beyond the
    spread, only the ties differ) or 'swaps'; None for fewer than two points."""
    if len(orders) < 2:
        return None
    if len({tuple(map(tuple, o)) for o in orders.values()}) == 1:
        return "same"
    pairs = set().union(*(clear_pairs(o) for o in orders.values()))
    return "swaps" if any((b, a) in pairs for a, b in pairs) else "ties"


def ranking(summary: pd.DataFrame, n: int, col: str = "mean_s") -> list:
    g = summary[(summary["n"] == n) & summary[col].notna()]
    return list(g.sort_values([col, "server"])["server"])


def observe_winners(summary: pd.DataFrame) -> list:
    """Which strategy has the lowest mean latency at each n, by how much (with the spread
    from the 95% CIs), and whether the order, ties included, holds across n."""
    out = []
    orders = {}
    for n in sorted(summary["n"].unique()):
        order = ranking(summary, n)
        if not order:
            continue
        orders[n] = lab_tiers(summary, n)
        g = summary[summary["n"] == n].set_index("server")
        best = order[0]
        s = f"At n = {n}, {name(best)} has the lowest mean latency, {ms(g.loc[best, 'mean_s'])}"
        if len(order) > 1:
            s += (f"; against the runner-up {name(order[1])} that is "
                  f"{compare(g.loc[best], g.loc[order[1]])}")
        if best != "main1" and "main1" in g.index:
            r = lab_ratio(g.loc["main1"], g.loc[best])
            s += f"; against the single mutex main1 it is {times_range(*r)} faster"
        out.append(s + ". Order, fastest first: " + format_tiers(orders[n]) + ".")
    change = order_change(orders)
    if change == "same":
        out.append("The order, ties included, is the same at every n.")
    elif change == "ties":
        out.append("No two servers swap places beyond their confidence intervals from one n "
                   "to another; only which of them tie changes.")
    elif change == "swaps":
        out.append("The order changes with n: " + "; ".join(
            f"n = {n}: {format_tiers(v)}" for n, v in orders.items()) + ".")
    if any(len(t) > 1 for v in orders.values() for t in v):
        out.append("(≈: the two 95% confidence intervals overlap, a tie; < : they do not.)")
    return out


def observe_rwlock(summary: pd.DataFrame, read_ratio: float | None) -> list:
    """Do reader/writer locks pay off? main3 vs main1 and main4 vs main2 at each n."""
    out = []
    known = read_ratio is not None and np.isfinite(read_ratio)
    mix = f" at {read_ratio:.0%} reads" if known else ""
    for rw, mx in (("main3", "main1"), ("main4", "main2")):
        parts = []
        verdicts = set()
        for n in sorted(summary["n"].unique()):
            g = summary[summary["n"] == n].set_index("server")
            if rw not in g.index or mx not in g.index:
                continue
            a, b = g.loc[rw], g.loc[mx]
            ov = _overlap(_ci(a), _ci(b))
            rng = lab_ratio(b, a)
            if ov:
                verdicts.add("unclear")
                parts.append(f"n = {n}: {times_range(*rng)}, confidence intervals overlap")
            elif rng[0] >= 1:
                verdicts.add("pays")
                parts.append(f"n = {n}: {times_range(*rng)} faster")
            else:
                verdicts.add("costs")
                parts.append(f"n = {n}: {times_range(*inverse(rng))} slower")
        if not parts:
            continue
        if verdicts == {"pays"}:
            head = f"The rwlock pays off{mix}: {name(rw)} beats {name(mx)} at every n"
        elif verdicts == {"costs"}:
            head = (f"The rwlock does not pay off{mix}: {name(rw)} is slower than {name(mx)} "
                    "at every n")
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
    """How each server's mean latency moves from the smallest to the largest n, with the
    ratio's spread from the 95% CIs; a range containing 1 is no change."""
    ns = sorted(summary["n"].unique())
    if len(ns) < 2:
        return []
    lo, hi = ns[0], ns[-1]
    flat, moved, tied = [], [], []
    for s in server_order(summary["server"]):
        g = summary[summary["server"] == s].set_index("n")
        if lo not in g.index or hi not in g.index:
            continue
        rng = lab_ratio(g.loc[hi], g.loc[lo])
        r = rng[0]
        if is_tie(rng[1], rng[2]):
            tied.append(f"{s} ({(r - 1) * 100:+.0f}%, {_x(rng[1])}-{_x(rng[2])}x)")
        elif abs(r - 1) < SAME:
            flat.append(f"{s} ({(r - 1) * 100:+.0f}%, {_x(rng[1])}-{_x(rng[2])}x)")
        elif r < 1:
            moved.append(f"{name(s)} falls {times_range(*inverse(rng))}")
        else:
            moved.append(f"{name(s)} rises {times_range(*rng)}")
    out = []
    if moved:
        out.append(f"From n = {lo} to n = {hi} the mean latency of " + ", ".join(moved) + ".")
    if flat:
        out.append(f"It changes by less than {SAME:.0%} from n = {lo} to n = {hi} for "
                   + ", ".join(flat) + ".")
    if tied:
        out.append(f"From n = {lo} to n = {hi} the mean latency does not change beyond the "
                   "confidence intervals (the ratio's range contains 1) for "
                   + ", ".join(tied) + ".")
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
    """Share of the latency spent waiting for the lock, per n: largest and smallest. The
    shares come from one server start per cell (no repetitions, no spread): described,
    not ranked."""
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
        out.append(peak_comparison(knees))
    return out


def peak_comparison(knees: pd.DataFrame) -> str:
    """The servers' peak throughputs in tiers (min-max of the repetitions at the peak), and
    the highest against the lowest with the ratio's spread."""
    k = knees.rename(columns={"peak_reps": "reps"})
    spread = {r["server"]: _spread(r, "peak_rps", "peak_min_rps", "peak_max_rps")
              for _, r in k.iterrows()}
    items = [(r.server, r.peak_rps, *spread[r.server]) for r in knees.itertuples()]
    best = knees.loc[knees["peak_rps"].idxmax()]
    worst = knees.loc[knees["peak_rps"].idxmin()]
    rng = ratio_range(best["peak_rps"], spread[best["server"]],
                      worst["peak_rps"], spread[worst["server"]])
    s = (f"Peak throughput, highest first (≈: the min-max ranges of the repetitions overlap, "
         f"a tie){_once(k)}: {format_tiers(tiers(items, lower_is_better=False), '>')}. "
         "Highest peak: "
         f"{best['server']}, {times_range(*rng)} that of the lowest ({worst['server']})")
    return s + (", a tie within the spread." if is_tie(rng[1], rng[2]) else ".")


def _metric(summary: pd.DataFrame):
    """(median column, min column, max column, description, to seconds): server-side mean
    latency when the summaries are there, else client mean latency."""
    if "summary_mean_latency_s" in summary and summary["summary_mean_latency_s"].notna().all():
        return ("summary_mean_latency_s", "summary_mean_latency_min_s",
                "summary_mean_latency_max_s", "server mean memory access latency", 1.0)
    return "lat_mean_us", "lat_mean_min_us", "lat_mean_max_us", "client mean latency", 1e-6


def _spread(g, col: str, lo: str, hi: str) -> tuple:
    """(lo, hi) of column col of a sweep summary row: the min-max of its repetitions, or
    +-SINGLE_RUN_BAND around the value for a point measured once; (nan, nan) if the summary
    has no spread columns."""
    if g.get("reps", 2) < 2:
        return (g[col] * (1 - SINGLE_RUN_BAND), g[col] * (1 + SINGLE_RUN_BAND))
    return (g.get(lo, math.nan), g.get(hi, math.nan))


def _once(summary: pd.DataFrame) -> str:
    """The note for a sweep with points measured once ('' if every point repeated)."""
    if "reps" not in summary or summary["reps"].min() >= 2:
        return ""
    which = "every point" if summary["reps"].max() < 2 else "some points"
    return (f" ({which} ran once: no spread is known, a ±{SINGLE_RUN_BAND:.0%} band is "
            "assumed around them and nothing inside it is ranked; the order is from one run)")


def observe_sweep_ranking(summary: pd.DataFrame, param: str, what: str) -> list:
    """The order of the servers (by latency) at every value of the parameter, in tiers by
    the min-max ranges of the repetitions; does any pair swap beyond them?"""
    col, lo, hi, desc, _ = _metric(summary)
    orders = {}
    for v in ordered_values(summary[param]):
        g = summary[summary[param] == v]
        orders[v] = tiers([(r["server"], r[col], *_spread(r, col, lo, hi))
                           for _, r in g.iterrows()])
    if not orders:
        return []
    fmt = (lambda v: f"{v:g}") if not isinstance(next(iter(orders)), str) else str
    key = ("(fastest first; ≈: the min-max ranges of the repetitions overlap, a tie)"
           + _once(summary))
    change = order_change(orders)
    if change in ("same", None):
        return [f"By {desc}, the order of the servers is the same at every point of the {what} "
                f"sweep: {format_tiers(next(iter(orders.values())))} {key}."]
    head = (f"By {desc}, the order of the servers changes with the {what}"
            if change == "swaps" else
            f"By {desc}, no two servers swap places beyond the spread of their repetitions "
            f"across the {what} sweep; only the ties change")
    return [head + f" {key}: " + "; ".join(f"{fmt(v)}: {format_tiers(o)}"
                                           for v, o in orders.items()) + "."]


def observe_sweep_span(summary: pd.DataFrame, param: str, what: str) -> list:
    """How much each server's latency and throughput move across the swept range, each
    ratio with its spread (min-max of the repetitions); '=' marks a ratio whose spread
    contains 1 (no change beyond the noise)."""
    col, lo, hi, desc, to_s = _metric(summary)
    vals = ordered_values(summary[param])
    if len(vals) < 2:
        return []
    a, b = vals[0], vals[-1]
    fmt = (lambda v: f"{v:g}") if not isinstance(a, str) else str
    parts = []
    tie = False
    for s in server_order(summary["server"]):
        g = summary[summary["server"] == s].set_index(param)
        if a not in g.index or b not in g.index:
            continue
        ra, rb = g.loc[a], g.loc[b]
        lat = ratio_range(rb[col], _spread(rb, col, lo, hi), ra[col], _spread(ra, col, lo, hi))
        thr = ratio_range(rb["throughput_rps"], _spread(rb, "throughput_rps", "throughput_min_rps",
                                                        "throughput_max_rps"),
                          ra["throughput_rps"], _spread(ra, "throughput_rps", "throughput_min_rps",
                                                        "throughput_max_rps"))
        marks = ["=" if is_tie(x[1], x[2]) else "" for x in (lat, thr)]
        tie = tie or any(marks)
        parts.append(f"{s} {ms(ra[col] * to_s)} -> {ms(rb[col] * to_s)} "
                     f"({marks[0]}{times_range(*lat)}), {ra['throughput_rps']:,.0f} -> "
                     f"{rb['throughput_rps']:,.0f} req/s ({marks[1]}{times_range(*thr)})")
    if not parts:
        return []
    key = ((" (=: the ratio's range, from the min-max of the repetitions, contains 1: no "
            "change beyond the noise)") if tie else "") + _once(summary)
    return [f"From {what} {fmt(a)} to {fmt(b)}, {desc} and throughput move as follows{key}: "
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


def observe_sweep_fairness(s: pd.DataFrame, param: str, what: str) -> list:
    """The least even sweep point across the client threads (Jain's index of their
    completed requests), from sweep_summary's fair_jain_min; nothing without it."""
    if "fair_jain_min" not in s or s["fair_jain_min"].isna().all():
        return []
    worst = s.loc[s["fair_jain_min"].idxmin()]
    return [f"Fairness across the client threads (Jain's index of the requests each "
            f"completed; 1 = all the same): lowest {worst['fair_jain_min']:.3f}, for "
            f"{name(worst['server'])} at {what} {worst[param]}; the median point "
            f"{s['fair_jain_min'].median():.3f}."]
