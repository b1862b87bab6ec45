"""Performance: lockbench against the physical limit (bench/perf.py).

The numbers come from the newest bench/perf.py run under results/perf/ (report.py loads it;
limit_ratios.py computes the targets, the ratio table and the split of the lab metric);
every sentence, heading and caption is a perf_ block of report/templates/report.md."""

import pandas as pd

from analysis.report import figures as F
from analysis.report import limit_ratios as P
from analysis.report.sections.base import Fig, Prose, ReportData, Section
from analysis.report.tables import frame_csv, pipe_table

TEXT_COLUMNS = ("mode", "server", "delay mode", "workload")
TARGET_COLUMNS = ["target", "wanted", "measured (median, min-max over rounds)", "met"]


def section(data: ReportData) -> Section | None:
    if data.perf is None:
        return None
    runs, meta = data.perf
    return perf_section(runs, meta, data.perf_shown, data.prose)


def _cell(v) -> str:
    if isinstance(v, P.Ratio):
        return v.text()
    if isinstance(v, float):
        if v != v:  # NaN
            return ""
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}"
    return str(v)


def markdown_table(df: pd.DataFrame, prose: Prose) -> str:
    if df.empty:
        return prose("perf_table_empty")
    cols = list(df.columns)
    return pipe_table(cols, ([_cell(r[c]) for c in cols] for _, r in df.iterrows()),
                      left=TEXT_COLUMNS).rstrip("\n")


def target_name(t: P.Target, prose: Prose) -> str:
    return prose(f"perf_target_{t.key}", **t.fields)


def target_detail(t: P.Target, prose: Prose) -> str:
    """The target's notes, one template block each, joined by semicolons ('' if none)."""
    return "; ".join(prose(f"perf_note_{n.block}", **n.fields) for n in t.notes)


def targets_markdown(ts: list, prose: Prose) -> str:
    rows = []
    for t in ts:
        met = "not measured" if t.met is None else ("**met**" if t.met else "**not met**")
        detail = target_detail(t, prose)
        extra = f" ({detail})" if detail else ""
        rows.append([f"{target_name(t, prose)}{extra}", t.threshold, t.ratio.text(), met])
    return pipe_table(TARGET_COLUMNS, rows, left=TARGET_COLUMNS).rstrip("\n")


def intro(runs: pd.DataFrame, meta: dict, prose: Prose) -> str:
    """The section's heading and where, when and how the runs were measured (meta.json)."""
    return prose("perf", started=meta.get("started_utc", "?"),
                 rounds=int(runs["round"].max()) + 1 if len(runs) else 0,
                 duration_s=meta.get("duration_s", "?"),
                 connections=meta.get("connections", 100), cpu=meta.get("cpu", "?"),
                 cores=meta.get("cores", "?"), kernel=meta.get("kernel", "?"),
                 loadavg=meta.get("loadavg_start", "?"))


def perf_section(runs, meta: dict, shown: str, prose: Prose) -> Section:
    """The section from one bench/perf.py run (runs, meta) kept in the folder `shown`."""
    ratios, split = P.ratio_table(runs), P.split_table(runs)
    sec = Section(files={"tables/perf_ratios.csv": frame_csv(ratios),
                         "tables/perf_split.csv": frame_csv(split)})
    sec.add(intro(runs, meta, prose),
            prose("perf_targets", table=targets_markdown(P.targets(runs), prose)),
            prose("perf_ratios", table=markdown_table(ratios, prose)),
            prose("perf_split", table=markdown_table(split, prose)),
            prose("perf_raw", folder=shown))
    tp = runs[runs["kind"] == "throughput"]
    if len(tp):
        ndelay = max(1, tp["delay_us"].nunique())
        fig, axes = F.new_figure(2, ndelay, figsize=(6 * ndelay, 9), squeeze=False)
        P.plot_throughput(axes, runs)
        sec.add(Fig("perf_throughput", prose("perf_caption_throughput"), fig))
    return sec
