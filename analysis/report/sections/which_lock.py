"""The "Which lock, when" section: per workload class the strategies to use and to avoid,
with the fairness and acquire-latency figure of the most contended setting."""

from analysis.report import figures as F
from analysis.report import lock_choice as W
from analysis.report import microbench_tables as M
from analysis.report import tables as T
from analysis.report.sections.base import Fig, ReportData, Section
from analysis.report.sections.microbench import cores_of


def fairness_figure(df, cores: int):
    """(figure, setting text) or None when no run carries the fairness counters."""
    setting = W.fairness_setting(df, cores)
    if setting is None:
        return None
    read, n, delay, threads = setting
    t = M.table_fairness(df, read, n, delay, threads)
    t = t[~t["strategy"].isin(M.NO_LOCK)]
    if t.empty:
        return None
    fig, axes = F.new_figure(1, 2, figsize=(10, 0.22 * len(t) + 1.4), sharey=True)
    text = f"{read}% reads, n = {n}, delay {delay} us, {threads} threads"
    F.plot_fairness(axes, t, f"Fairness at {text}")
    return fig, text


def section(data: ReportData) -> Section | None:
    df = data.microbench
    if df is None or M.store_runs(df).empty:
        return None
    p, cores = data.prose, cores_of(data)
    machine = W.machine_of(data.microbench_context, cores)
    table = W.table(df, cores, machine)
    if table.empty:
        return None
    sec = Section().add(p("which_lock", cores=cores, machine=machine,
                          avoid=f"{W.AVOID_BELOW:g}"))
    shown = table[["class", "setting", "best", "avoid", "measured on"]]
    sec.add(T.format_markdown(shown.set_index("class"), corner="workload class"))
    sec.files["tables/which_lock.csv"] = T.frame_csv(table)
    floor = W.floor_summary(df)
    sec.add(p("which_lock_floor_ok") if floor is None else p("which_lock_floor", **floor))
    racing = W.racing_summary(df)
    if racing is not None:
        sec.add(p("which_lock_racing", **racing))
    if cores <= 2:
        sec.add(p("which_lock_small_machine", cores=cores))
    fair = fairness_figure(df, cores)
    if fair is not None:
        fig, text = fair
        sec.add(Fig("which_lock_fairness", p("caption_which_lock_fairness", setting=text), fig))
    return sec
