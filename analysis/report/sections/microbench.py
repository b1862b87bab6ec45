"""The microbenchmark section: the locks by themselves (bench/, Google Benchmark JSON)."""

import math

from analysis.report import figures as F
from analysis.report import microbench_tables as M
from analysis.report import tables as T
from analysis.report.sections.base import Fig, ReportData, Section

PANELS = [(50, 1000, 0), (95, 1000, 0), (100, 1000, 0), (70, 1, 0), (95, 1, 0), (70, 1000, 10),
          (100, 1000, 10), (70, 1, 10)]  # (read %, n, delay us) of the throughput figure


def cores_of(data: ReportData) -> int:
    """Logical cores of the machine that ran the benchmarks: the JSON's own context, else
    the lab run's metadata."""
    c = data.microbench_context.get("num_cpus") or data.meta.get("machine", {}).get("cores")
    return int(c) if c else 0


def ops_figure(df, cores: int):
    panels = [(r, n, d) for (r, n, d) in PANELS if not M.setting_runs(df, r, n, d).empty]
    if not panels:
        return None
    rows = math.ceil(len(panels) / 2)
    fig, axes = F.new_figure(rows, 2, figsize=(10, 3.2 * rows), squeeze=False)
    for ax, (r, n, d) in zip(axes.flat, panels):
        F.plot_ops_vs_threads(ax, M.setting_runs(df, r, n, d),
                              f"{r}% reads, n = {n}, delay {d} us", cores)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper")
    return fig


def writer_wait_figure(df):
    w = df[df["family"] == "WriterStarvation"]
    if w.empty:
        return None
    delays = sorted(w["delay_us"].dropna().unique())
    fig, axes = F.new_figure(1, len(delays), figsize=(5 * len(delays), 3.4), squeeze=False)
    for ax, d in zip(axes.flat, delays):
        F.plot_writer_wait(ax, M.starvation_runs(df, int(d)),
                           f"Writer wait under back-to-back readers, delay {int(d)} us")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper")
    return fig


def timing_figure(df):
    """(figure, timed/untimed ratio of the unprotected store) or None without StoreTiming."""
    t = M.table_timing(df)
    t = t[t["family"] == "StoreTiming"]
    if t.empty:
        return None
    fig, ax = F.new_figure(1, 1, figsize=(6.5, 3.2))
    F.plot_timing_cost(ax, t)
    base = t[(t["what"] == M.BASELINE) & (t["timing"] == "timed")]["x_untimed"]
    return fig, (float(base.iloc[0]) if len(base) else math.nan)


def section(data: ReportData) -> Section | None:
    df = data.microbench
    if df is None:
        return None
    p, cores = data.prose, cores_of(data)
    reps = int(df["reps"].max())
    runs = (f"{reps} times (the repetitions interleaved in random order; tables and figures "
            "show their median, and every ranking and ratio states their min-max spread)"
            if reps > 1 else "once (no repetitions: no spread is known, so nothing is ranked)")
    load = data.microbench_context.get("load_avg")
    load = f" (load average {load[0]:.1f} when the run started)" if load else ""
    sec = Section().add(p("microbench", runs=runs, cores=cores, load=load))
    timing = timing_figure(df)
    if timing is not None:
        sec.add(Fig("microbench_timing_cost",
                    p("caption_microbench_timing_cost", ratio=f"{timing[1]:.1f}"), timing[0]))
    fig = ops_figure(df, cores)
    if fig is not None:
        sec.add(Fig("microbench_ops_vs_threads", p("caption_microbench_ops_vs_threads"), fig))
    fig = writer_wait_figure(df)
    if fig is not None:
        sec.add(Fig("microbench_writer_wait", p("caption_microbench_writer_wait"), fig))
    ov = M.table_overhead(df, cores=cores)
    if not ov.empty:
        sec.add(p("microbench_overhead", cores=cores),
                T.format_markdown(M.table_overhead_text(df, cores=cores), corner="strategy"))
    rank = M.table_ranking(df)
    sec.files["tables/microbench_ranking.csv"] = T.frame_csv(rank)
    wide = M.table_ranking_wide(rank, M.ranking_settings(cores))
    if not wide.empty:
        sec.add(p("microbench_ranking"), T.format_markdown(wide, corner="strategy"))
    obs = M.findings(df, cores)
    if obs:
        sec.add(p("microbench_findings")).bullets(obs).add(p("microbench_prediction", cores=cores))
    return sec
