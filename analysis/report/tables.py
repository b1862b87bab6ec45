"""Summaries and the report's tables: pure functions, DataFrame in, DataFrame or text out.

Latencies are stored in seconds (the servers' time-file unit) and shown in milliseconds in
the lab tables, in the scientific notation of the seed report (1.45E-02).
"""

import math

import numpy as np
import pandas as pd

from analysis import server_label, server_order
from analysis.stats import mean_ci, ratio_range

MS = 1e3

# The column that a sweep kind varies.
SWEEP_PARAM = {"threads": "threads", "read-ratio": "read_ratio", "n": "n",
               "delay": "delay_us", "connection": "connection"}


CONNECTION_ORDER = ("per-request", "keepalive")


def ordered_values(values) -> list:
    """Distinct swept values in display order: numbers ascending, connection modes
    per-request first."""
    vals = list(dict.fromkeys(values))
    if vals and isinstance(vals[0], str):
        return sorted(vals, key=lambda v: (CONNECTION_ORDER.index(v)
                                           if v in CONNECTION_ORDER else len(CONNECTION_ORDER), v))
    return sorted(vals)


def lab_summary(lab: pd.DataFrame) -> pd.DataFrame:
    """Per (server, n): runs, mean, median, sample std, 95% CI of the mean, min, max (seconds)
    of the per-run lab metric `latency_s`, and the client errors summed over the runs.
    Runs without a time-file value (NaN) are left out of the statistics but counted in
    `missing`."""
    rows = []
    for (server, n), g in lab.groupby(["server", "n"], sort=False):
        x = g["latency_s"].astype(float).dropna().to_numpy()
        m, lo, hi = mean_ci(x)
        rows.append({
            "server": server, "n": int(n), "runs": int(len(x)),
            "missing": int(g["latency_s"].isna().sum()),
            "mean_s": m,
            "median_s": float(np.median(x)) if len(x) else math.nan,
            "std_s": float(np.std(x, ddof=1)) if len(x) > 1 else math.nan,
            "ci_lo_s": lo, "ci_hi_s": hi,
            "min_s": float(x.min()) if len(x) else math.nan,
            "max_s": float(x.max()) if len(x) else math.nan,
            "errors": int(g["errors"].fillna(0).sum()),
        })
    out = pd.DataFrame(rows, columns=["server", "n", "runs", "missing", "mean_s", "median_s",
                                      "std_s", "ci_lo_s", "ci_hi_s", "min_s", "max_s", "errors"])
    out["_o"] = out["server"].map({s: i for i, s in enumerate(server_order(lab["server"]))})
    out = out.sort_values(["_o", "n"], kind="stable").drop(columns="_o").reset_index(drop=True)
    return out


def _wide(summary: pd.DataFrame, values: pd.Series) -> pd.DataFrame:
    t = (pd.DataFrame({"server": summary["server"], "n": summary["n"], "v": values})
         .pivot(index="server", columns="n", values="v"))
    t = t.reindex(index=server_order(t.index), columns=sorted(t.columns))
    t.index.name, t.columns.name = "server", "n"
    return t


def table_mean(summary: pd.DataFrame) -> pd.DataFrame:
    """Mean lab latency in ms, rows the servers in --servers order, columns n (Table 1 of
    the seed report)."""
    return _wide(summary, summary["mean_s"] * MS)


def table_median(summary: pd.DataFrame) -> pd.DataFrame:
    """Median lab latency in ms, same layout (Table 2 of the seed report)."""
    return _wide(summary, summary["median_s"] * MS)


def table_ci95(summary: pd.DataFrame) -> pd.DataFrame:
    """Half-width of the 95% t confidence interval of the mean, in ms."""
    return _wide(summary, (summary["ci_hi_s"] - summary["mean_s"]) * MS)


def table_speedup(summary: pd.DataFrame) -> pd.DataFrame:
    """Mean latency of main1 divided by each server's mean latency at the same n
    (> 1: faster than the single mutex). Empty if main1 was not run."""
    base = summary[summary["server"] == "main1"].set_index("n")["mean_s"]
    if base.empty:
        return _wide(summary.iloc[0:0], summary["mean_s"].iloc[0:0])
    return _wide(summary, summary["n"].map(base) / summary["mean_s"])


def table_speedup_range(summary: pd.DataFrame) -> pd.DataFrame:
    """Table 4 as shown: 'speedup (lo-hi)', the range implied by the 95% CIs of the two
    means (main1's hi / server's lo .. main1's lo / server's hi); empty without main1."""
    base = summary[summary["server"] == "main1"].set_index("n")
    if base.empty:
        return _wide(summary.iloc[0:0], summary["mean_s"].iloc[0:0])
    text = []
    for r in summary.itertuples():
        b = base.loc[r.n] if r.n in base.index else None
        if b is None:
            text.append(math.nan)
            continue
        v, lo, hi = ratio_range(b["mean_s"], (b["ci_lo_s"], b["ci_hi_s"]), r.mean_s,
                                (r.ci_lo_s, r.ci_hi_s))
        text.append(fmt_speedup(v) + ("" if not np.isfinite(lo) else f" ({lo:.2f}-{hi:.2f})"))
    return _wide(summary, pd.Series(text, index=summary.index))


def table_runs(summary: pd.DataFrame) -> pd.DataFrame:
    """Number of runs behind each cell."""
    return _wide(summary, summary["runs"]).astype("int64")


# ---- text formats -------------------------------------------------------------------------

def fmt_sci(x: float) -> str:
    """1.45E-02, as in the seed report; '-' for a missing value."""
    return "-" if x is None or not np.isfinite(x) else f"{x:.2E}"


def fmt_pm(x: float) -> str:
    return "-" if x is None or not np.isfinite(x) else f"± {x:.2E}"


def fmt_speedup(x: float) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.2f}x"


def fmt_int(x) -> str:
    return "-" if x is None or pd.isna(x) else str(int(x))


def _cell(fmt, v) -> str:
    """fmt(v), or '-' for a missing value (None or NaN)."""
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return "-"
    return fmt(v)


def pipe_table(head: list, rows, left=()) -> str:
    """The report's one Markdown table writer: a pipe table with header head and rows
    (lists of cell texts); columns whose header is in left are text (left-aligned), the
    others numbers (right-aligned)."""
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if h in left else "---:" for h in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def format_markdown(table: pd.DataFrame, fmt=str, caption: str | None = None,
                    corner: str = "n") -> str:
    """A wide table (rows labelled by server_label, under corner) as a pipe table, with a
    bold caption line above it when given; cells formatted with fmt, '-' where missing."""
    rows = [[server_label(server)] + [_cell(fmt, v) for v in row]
            for server, row in table.iterrows()]
    top = f"**{caption}**\n\n" if caption else ""
    return top + pipe_table([corner] + [str(c) for c in table.columns], rows, left=(corner,))


def frame_csv(df: pd.DataFrame) -> str:
    """A long table (summaries, rankings) as CSV, floats as %.9e (full precision, byte-stable)."""
    return df.to_csv(index=False, float_format="%.9e", lineterminator="\n")


def format_csv(table: pd.DataFrame) -> str:
    """server,<n1>,<n2>,... with values as %.9e (full precision, byte-stable)."""
    lines = ["server," + ",".join(str(c) for c in table.columns)]
    for server, row in table.iterrows():
        lines.append(",".join([str(server)] + ["" if not np.isfinite(v) else f"{v:.9e}"
                                               for v in row.astype(float)]))
    return "\n".join(lines) + "\n"


def format_latex(table: pd.DataFrame, fmt, caption: str) -> str:
    """The report's one LaTeX table writer: a booktabs tabular (needs
    \\usepackage{booktabs}); cells formatted with fmt, '-' where missing."""
    cols = "l" + "r" * len(table.columns)
    esc = lambda s: s.replace("_", r"\_").replace("±", r"$\pm$")  # noqa: E731
    lines = [r"\begin{table}[h]", r"\centering", rf"\caption{{{esc(caption)}}}",
             rf"\begin{{tabular}}{{{cols}}}", r"\toprule",
             "$n$ & " + " & ".join(str(c) for c in table.columns) + r" \\", r"\midrule"]
    for server, row in table.iterrows():
        lines.append(" & ".join([esc(server_label(server))] + [esc(_cell(fmt, v)) for v in row])
                     + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


# ---- sweeps ---------------------------------------------------------------------------------

def sweep_summary(sweep: pd.DataFrame, servers: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (server, swept value): medians over the repetitions of throughput and client
    latency percentiles (never averaging percentiles across runs), min/max over the
    repetitions (the spread) of throughput and mean client latency, errors summed, and, if
    the server summaries are given, the medians of the server-side means (latency, wait,
    hold, delay slept) of the server starts, with the min/max of the latency."""
    if sweep.empty:
        return pd.DataFrame()
    kind = sweep["kind"].iloc[0]
    param = SWEEP_PARAM[kind]
    rows = []
    for (server, value), g in sweep.groupby(["server", "value"], sort=False):
        rows.append({
            "kind": kind, "server": server, "value": value, param: g[param].iloc[0],
            "reps": len(g),
            "throughput_rps": float(g["throughput_rps"].median()),
            "throughput_min_rps": float(g["throughput_rps"].min()),
            "throughput_max_rps": float(g["throughput_rps"].max()),
            "lat_mean_us": float(g["lat_mean_us"].median()),
            "lat_mean_min_us": float(g["lat_mean_us"].min()),
            "lat_mean_max_us": float(g["lat_mean_us"].max()),
            "lat_p50_us": float(g["lat_p50_us"].median()),
            "lat_p95_us": float(g["lat_p95_us"].median()),
            "lat_p99_us": float(g["lat_p99_us"].median()),
            "errors": int(g["errors"].fillna(0).sum()),
            "saturated": bool(g["saturated"].fillna(False).any()),
            # the least even repetition: how evenly the client threads were served
            "fair_jain_min": float(g["fair_jain"].min()) if "fair_jain" in g else float("nan"),
        })
    out = pd.DataFrame(rows)
    if servers is not None and not servers.empty:
        keep = ["server", "value", "summary_mean_latency_s", "summary_mean_wait_s",
                "summary_mean_hold_s", "summary_mean_delay_slept_us"]
        g = servers[keep].groupby(["server", "value"], sort=False)
        s = g.median()
        s["summary_mean_latency_min_s"] = g["summary_mean_latency_s"].min()
        s["summary_mean_latency_max_s"] = g["summary_mean_latency_s"].max()
        out = out.merge(s.reset_index(), on=["server", "value"], how="left")
    out["_o"] = out["server"].map({s: i for i, s in enumerate(server_order(sweep["server"]))})
    out["_v"] = out[param].map({v: i for i, v in enumerate(ordered_values(out[param]))})
    out = out.sort_values(["_o", "_v"], kind="stable").drop(columns=["_o", "_v"])
    return out.reset_index(drop=True)


def saturation_points(thr: pd.DataFrame, fraction: float = 0.9) -> pd.DataFrame:
    """From the threads sweep summary: per server the peak throughput and where it is
    reached, and the knee = the fewest client threads reaching `fraction` of the peak
    (past it, more threads add latency, not throughput), with the p95 latency there, and
    the min/max of the repetitions at the peak."""
    rows = []
    for server, g in thr.groupby("server", sort=False):
        g = g.sort_values("threads")
        peak = g.loc[g["throughput_rps"].idxmax()]
        knee = g[g["throughput_rps"] >= fraction * peak["throughput_rps"]].iloc[0]
        rows.append({"server": server, "peak_rps": float(peak["throughput_rps"]),
                     "peak_min_rps": float(peak.get("throughput_min_rps", math.nan)),
                     "peak_max_rps": float(peak.get("throughput_max_rps", math.nan)),
                     "peak_reps": int(peak.get("reps", 0)),
                     "peak_threads": int(peak["threads"]),
                     "knee_threads": int(knee["threads"]),
                     "knee_rps": float(knee["throughput_rps"]),
                     "knee_p95_us": float(knee["lat_p95_us"]),
                     "max_threads": int(g["threads"].max()),
                     "p95_at_max_us": float(g["lat_p95_us"].iloc[-1])})
    return pd.DataFrame(rows, columns=["server", "peak_rps", "peak_min_rps", "peak_max_rps",
                                       "peak_reps", "peak_threads", "knee_threads",
                                       "knee_rps", "knee_p95_us", "max_threads",
                                       "p95_at_max_us"])


def wait_hold(traces: pd.DataFrame, servers: pd.DataFrame | None) -> pd.DataFrame:
    """Per (server, n): mean lock wait, hold, and total memory-access latency in seconds,
    from the per-request trace when there is one, else from the server's summary line.
    `source` says which; `other_s` is latency not covered by wait + hold."""
    rows = []
    seen = set()
    if traces is not None and not traces.empty:
        for (server, n), g in traces.groupby(["server", "n"], sort=False):
            seen.add((server, int(n)))
            rows.append({"server": server, "n": int(n), "source": "trace",
                         "requests": len(g),
                         "wait_s": g["wait_ns"].mean() / 1e9, "hold_s": g["hold_ns"].mean() / 1e9,
                         "latency_s": g["latency_ns"].mean() / 1e9})
    if servers is not None and not servers.empty:
        # A resumed (server, n) has several server starts: weight them by their requests.
        for (server, n), g in servers.groupby(["server", "n"], sort=False):
            g = g.dropna(subset=["summary_mean_wait_s", "summary_requests"])
            w = g["summary_requests"]
            if (server, int(n)) in seen or g.empty or w.sum() <= 0:
                continue
            rows.append({"server": server, "n": int(n), "source": "summary",
                         "requests": int(w.sum()),
                         **{k: float((g[f"summary_mean_{k[:-2]}_s"] * w).sum() / w.sum())
                            for k in ("wait_s", "hold_s", "latency_s")}})
    out = pd.DataFrame(rows, columns=["server", "n", "source", "requests", "wait_s", "hold_s",
                                      "latency_s"])
    out["other_s"] = (out["latency_s"] - out["wait_s"] - out["hold_s"]).clip(lower=0)
    order = server_order(pd.concat([out["server"]] + [d["server"] for d in (traces, servers)
                                                        if d is not None and not d.empty]))
    out["_o"] = out["server"].map({s: i for i, s in enumerate(order)})
    return out.sort_values(["_o", "n"], kind="stable").drop(columns="_o").reset_index(drop=True)
