"""The lab experiment: Tables 1-4 with what they show, then the lab's figures."""

import pandas as pd

from analysis import server_label, server_order
from analysis import traces as TR
from analysis.report import figures as F
from analysis.report import observe as O
from analysis.report import tables as T
from analysis.report.sections.base import Fig, ReportData, Section

# name -> (table function, cell format); captions are the template's caption_<name>.
LAB_TABLES = {
    "table_mean": (T.table_mean, T.fmt_sci),
    "table_median": (T.table_median, T.fmt_sci),
    "table_ci95": (T.table_ci95, T.fmt_pm),
    "table_speedup": (T.table_speedup, T.fmt_speedup),
    "table_runs": (T.table_runs, T.fmt_int),
}


def _lab(data: ReportData) -> tuple:
    """(lab rows, their summary), or (None, None) without lab data."""
    lab = data.results.get("lab")
    if lab is None or lab.empty:
        return None, None
    return lab, T.lab_summary(lab)


def table_files(summary: pd.DataFrame, prose) -> tuple:
    """({name: markdown}, {path: text}) of every non-empty lab table, in md, csv and tex."""
    md, files = {}, {}
    for name, (fn, fmt) in LAB_TABLES.items():
        t = fn(summary)
        if t.empty:
            continue
        caption = prose(f"caption_{name}")
        shown, show_fmt = (T.table_speedup_range(summary), str) if name == "table_speedup" \
            else (t, fmt)
        md[name] = T.format_markdown(shown, show_fmt, caption)
        files[f"tables/{name}.md"] = md[name]
        files[f"tables/{name}.csv"] = T.format_csv(t.astype(float))
        files[f"tables/{name}.tex"] = T.format_latex(shown, show_fmt, caption)
    return md, files


def findings(lab: pd.DataFrame, summary: pd.DataFrame, servers: pd.DataFrame | None) -> list:
    rr = lab["read_ratio"].dropna()
    return (O.observe_winners(summary)
            + O.observe_rwlock(summary, float(rr.median()) if not rr.empty else None)
            + O.observe_n_effect(summary) + O.observe_skew(summary)
            + O.observe_errors(lab)
            + O.observe_delay_slept(servers, float(lab["delay_us"].median())))


def tables_section(data: ReportData) -> Section | None:
    lab, summary = _lab(data)
    if lab is None:
        return None
    md, files = table_files(summary, data.prose)
    sec = Section(files={"tables/lab_summary.csv": T.frame_csv(summary), **files})
    p = data.prose
    sec.add(p("lab_tables"), *(md.get(k) for k in
                                ("table_mean", "table_median", "table_ci95", "table_speedup")))
    runs = T.table_runs(summary)
    if runs.stack().nunique() == 1:
        sec.add(p("runs_uniform", runs=int(runs.iloc[0, 0])))
    else:
        sec.add(md["table_runs"])
    load = lab[["threads", "requests", "read_ratio", "connection"]].drop_duplicates()
    sec.add(p("client_load", load="; ".join(
        f"{r.threads} threads, {r.requests} requests, {r.read_ratio:.0%} reads, "
        f"connection {r.connection}" for r in load.itertuples())))
    sec.add(p("lab_findings"))
    return sec.bullets(findings(lab, summary, data.results.get("lab_servers")))


def figures_section(data: ReportData) -> Section | None:
    lab, summary = _lab(data)
    if lab is None:
        return None
    p = data.prose
    sec = Section().add(p("lab_figures"))

    fig, ax = F.new_figure(figsize=(7, 4.2))
    F.plot_mean_latency(ax, summary)
    sec.add(Fig("plot_mean_latency", p("caption_mean_latency"), fig))

    ns = sorted(lab["n"].unique())
    fig, axes = F.new_figure(1, len(ns), figsize=(3 * len(ns) + 1, 3.8), sharey=True,
                             squeeze=False)
    F.plot_latency_distribution(axes[0], lab)
    sec.add(Fig("plot_latency_distribution", p("caption_latency_distribution"), fig))

    traces = data.results.get("traces")
    wh = T.wait_hold(traces, data.results.get("lab_servers"))
    if not wh.empty:
        sec.files["tables/wait_hold.csv"] = T.frame_csv(wh)
        fig, axes = F.new_figure(1, 2, figsize=(11, 4.2))
        F.plot_wait_hold(axes, wh)
        sources = " and ".join(sorted(set(wh["source"])))
        sec.add(Fig("plot_wait_hold", p("caption_wait_hold", sources=sources), fig))
        sec.bullets(O.observe_wait_hold(wh))

    if "n" not in data.results.get("sweeps", {}) and len(ns) > 1:  # the lab's own n values
        fig, ax = F.new_figure(figsize=(7, 4.2))
        F.plot_latency_vs_n(ax, summary.assign(latency_ms=summary["mean_s"] * 1e3),
                            "mean memory access latency [ms] (log scale)",
                            "Lab metric against array size")
        sec.add(Fig("plot_latency_vs_n", p("caption_latency_vs_n_lab"), fig))

    if traces is not None and not traces.empty:
        tns = sorted(traces["n"].unique())
        fig, axes = F.new_figure(1, len(tns), figsize=(3.4 * len(tns) + 1, 3.6), sharex=True,
                                 sharey=True, squeeze=False)
        F.plot_latency_cdf(axes[0], traces)
        traced = traces.groupby(["server", "n"]).size().min()
        sec.add(Fig("plot_latency_cdf", p("caption_latency_cdf", traced=traced), fig))
        timeline(sec, traces, p)
    return sec


TIMELINE_MS = 3.0   # the window of the timeline figure


def timeline(sec: Section, traces: pd.DataFrame, p) -> None:
    """The lab's point at a glance: at the smallest n, for each server, the busiest
    TIMELINE_MS of its trace, who held which lock when, and per server one sentence from
    the data (the most requests holding a lock at one time, the share of the window in
    which some request waited). Traces that keep no time (older servers) draw nothing,
    said so."""
    n = int(traces["n"].min())
    at_n = traces[traces["n"] == n]
    windows, lines = [], []
    for s in server_order(at_n["server"]):
        t = at_n[at_n["server"] == s]
        if not TR.has_time(t):
            continue
        iv = TR.intervals(t, s)
        lo, hi = TR.busiest_window(iv, TIMELINE_MS * 1e3)
        shown = TR.clip(iv, lo, hi)
        windows.append((s, n, shown, lo, hi))
        lines.append(p("timeline_line", server=server_label(s),
                       most=TR.most_holding(shown, lo, hi),
                       waited=f"{TR.share_waiting(shown, lo, hi):.0%}", requests=len(shown)))
    if not windows:
        sec.add(p("timeline_none"))
        return
    fig, axes = F.new_figure(len(windows), 1, figsize=(9, 1.2 + 1.15 * len(windows) + 0.12 * n),
                             sharex=True, squeeze=False)
    F.plot_timeline(axes[:, 0], windows)
    sec.add(Fig("plot_timeline", p("caption_timeline", ms=f"{TIMELINE_MS:g}", n=n), fig))
    sec.bullets(lines)
