"""The sweeps: saturation (threads), latency against n, and the one-parameter sweeps."""

import pandas as pd

from analysis.report import figures as F
from analysis.report import observe as O
from analysis.report import tables as T
from analysis.report.sections.base import Fig, ReportData, Section

ORDER = ("threads", "n", "read-ratio", "delay", "connection")
TEXT = {  # kind -> (x label, words for the parameter)
    "threads": ("client threads", "number of client threads"),
    "read-ratio": ("fraction of reads", "read ratio"),
    "n": ("array size n", "n"),
    "delay": ("artificial delay per access [us] (nominal)", "delay (us)"),
    "connection": ("connection mode", "connection mode"),
}


def _threads(s: pd.DataFrame, sec: Section, p) -> list:
    knees = T.saturation_points(s)
    sec.files["tables/saturation.csv"] = T.frame_csv(knees)
    fig, axes = F.new_figure(2, 1, figsize=(7, 6.5), sharex=True)
    F.plot_saturation(axes, s, knees)
    sec.add(p("sweep_threads"), Fig("plot_saturation", p("caption_saturation"), fig))
    return O.observe_saturation(knees)


def _n(s: pd.DataFrame, sec: Section, p) -> list:
    col, ylabel = ("summary_mean_latency_s", "server mean memory access latency [ms]")
    if col not in s or s[col].isna().all():
        col, ylabel = "lat_mean_us", "client mean latency [ms]"
    d = pd.DataFrame({"server": s["server"], "n": s["n"],
                      "latency_ms": s[col] * (1e3 if col.endswith("_s") else 1e-3)})
    fig, ax = F.new_figure(figsize=(7, 4.2))
    F.plot_latency_vs_n(ax, d, ylabel + " (log scale)", "Latency against array size")
    sec.add(p("sweep_n"), Fig("plot_latency_vs_n", p("caption_latency_vs_n"), fig))
    return O.observe_sweep_span(s, "n", TEXT["n"][1])


def _other(kind: str, s: pd.DataFrame, sec: Section, p) -> list:
    xlabel, what = TEXT[kind]
    param = T.SWEEP_PARAM[kind]
    fig, axes = F.new_figure(1, 3, figsize=(12, 3.8))
    F.plot_sweep(axes, s, param, xlabel)
    sec.add(p("sweep_other", What=what[0].upper() + what[1:]),
            Fig(f"plot_sweep_{kind.replace('-', '_')}", p("caption_sweep", what=what), fig))
    return O.observe_sweep_span(s, param, what)


def sweep_part(kind: str, sweep: pd.DataFrame, servers, prose) -> Section:
    """The subsection of one sweep kind."""
    s = T.sweep_summary(sweep, servers)
    sec = Section(files={f"tables/sweep_{kind}.csv": T.frame_csv(s)})
    if kind in ("threads", "n"):
        found = {"threads": _threads, "n": _n}[kind](s, sec, prose)
    else:
        found = _other(kind, s, sec, prose)
    what = TEXT[kind][1]
    sec.bullets(found + O.observe_sweep_ranking(s, T.SWEEP_PARAM[kind], what)
                + O.observe_sweep_fairness(s, T.SWEEP_PARAM[kind], what)
                + O.observe_sweep_errors(sweep, what))
    return sec


def section(data: ReportData) -> Section | None:
    sweeps = data.results.get("sweeps") or {}
    if not sweeps:
        return None
    sec = Section().add(data.prose("sweeps"))
    for kind in (k for k in ORDER if k in sweeps and not sweeps[k].empty):
        part = sweep_part(kind, sweeps[kind], data.results["sweep_servers"].get(kind),
                          data.prose)
        sec.add(*part.blocks)
        sec.files.update(part.files)
    return sec
