"""Write report/ from a results directory: tables (Markdown, CSV, LaTeX), figures (PNG, SVG)
and REPORT.md. Same raw results in, byte-identical files out.

This module is the only place (with the CLI) that creates figures and writes files; the
numbers come from tables.py, the sentences from observe.py, the drawings from figures.py.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from . import STRATEGIES, describe, server_order  # noqa: E402
from . import figures as F  # noqa: E402
from . import observe as O  # noqa: E402
from . import tables as T  # noqa: E402
from .load import load_results  # noqa: E402

SWEEP_TEXT = {  # kind -> (x label, words for the parameter)
    "threads": ("client threads", "number of client threads"),
    "read-ratio": ("fraction of reads", "read ratio"),
    "n": ("array size n", "n"),
    "delay": ("artificial delay per access [us] (nominal)", "delay (us)"),
    "connection": ("connection mode", "connection mode"),
}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def save_figure(fig, out_dir: Path, name: str) -> list:
    """name.png and name.svg, reproducible (no dates, fixed SVG hash salt)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    fig.savefig(paths[0], metadata={"Software": None})
    fig.savefig(paths[1], metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return paths


def write_lab_tables(summary: pd.DataFrame, out: Path) -> dict:
    """tables/table_{mean,median,ci95,speedup}.{md,csv,tex}; returns {name: markdown}."""
    specs = [
        ("table_mean", T.table_mean, T.fmt_sci,
         "Table 1: Mean memory access latency in ms per run of 1000 client requests"),
        ("table_median", T.table_median, T.fmt_sci,
         "Table 2: Median memory access latency in ms per run of 1000 client requests"),
        ("table_ci95", T.table_ci95, T.fmt_pm,
         "Table 3: Half-width of the 95% confidence interval of the mean, in ms"),
        ("table_speedup", T.table_speedup, T.fmt_speedup,
         "Table 4: Speedup versus main1 (mean latency of main1 / mean latency of the server)"),
        ("table_runs", T.table_runs, T.fmt_int, "Runs behind each cell"),
    ]
    md = {}
    for name, fn, fmt, caption in specs:
        t = fn(summary)
        if t.empty:
            continue
        md[name] = T.format_markdown(t, fmt, caption)
        _write(out / "tables" / f"{name}.md", md[name])
        _write(out / "tables" / f"{name}.csv", T.format_csv(t.astype(float)))
        _write(out / "tables" / f"{name}.tex", T.format_latex(t, fmt, caption))
    return md


def _csv(df: pd.DataFrame) -> str:
    return df.to_csv(index=False, float_format="%.9e", lineterminator="\n")


def _meta_rows(meta: dict) -> list:
    m, b, g = meta.get("machine", {}), meta.get("build", {}), meta.get("git", {})
    sessions = meta.get("sessions", [])
    flags = " ".join(f for f in (b.get("cxx_flags", "").strip(),
                                 b.get("cxx_flags_build_type", "").strip()) if f)
    build = (f"{b['build_type'] or '(no build type)'}, flags `{flags or '(none)'}`"
             if "build_type" in b else "unknown (no CMakeCache.txt next to the binaries)")
    if b.get("sanitize"):
        build += f", sanitizers {b['sanitize']}"
    compiler = " ".join(x for x in (b.get("cxx_compiler_id"), b.get("cxx_compiler_version")) if x)
    rows = [
        ("CPU", f"{m.get('cpu_model', 'unknown')}, {m.get('cores', '?')} logical cores"),
        ("Kernel / OS", f"{m.get('kernel', 'unknown')} / {m.get('os', 'unknown')}"),
        ("Compiler", compiler or "unknown"),
        ("Build", build),
        ("Git commit", f"{g.get('commit', 'unknown')}{' (uncommitted changes)' if g.get('dirty') else ''}"),
        ("Client", meta.get("client_version", "unknown")),
        ("Run started (UTC)", sessions[0]["started_utc"] if sessions else meta.get("created_utc", "unknown")),
        ("Sessions (1 + resumes)", str(len(sessions)) if sessions else "unknown"),
        ("Python packages", ", ".join(f"{k} {v}" for k, v in sorted(m.get("packages", {}).items()))
         or "unknown"),
    ]
    return rows


def _param_text(meta: dict) -> str:
    p = meta.get("parameters", {})
    lab = p.get("lab")
    lines = []
    if lab:
        lines.append(
            f"- Lab experiment: servers {', '.join(lab['servers'])}; n = "
            f"{', '.join(str(n) for n in lab['n'])}; {lab['runs']} client runs per (server, n), "
            f"one after the other against one server start; artificial delay {lab['delay_us']} us; "
            f"the client in kit mode (no options); pause between runs {lab.get('pause_s', 0)} s; "
            f"trace limit {lab.get('trace_limit', 0)} requests per (server, n).")
    sw = p.get("sweeps")
    if sw:
        lines.append(
            f"- Sweeps: servers {', '.join(sw['servers'])}; closed loop, {sw['duration_s']} s "
            f"measured after {sw['warmup_s']} s warm-up, {sw['reps']} repetition(s) per point, a fresh "
            f"server start per point. Base point: n = {sw['n']}, delay {sw['delay_us']} us, "
            f"read ratio {sw['read_ratio']}, {sw['threads']} client threads, connection "
            f"{sw['connection']}. Each sweep varies one of them: " + "; ".join(
                f"{k} = {', '.join(str(v) for v in vals)}" for k, vals in sw.get("values", {}).items()
                if k in sw.get("kinds", [])) + ".")
    return "\n".join(lines)


def _shown_path(results_dir) -> str:
    """The results directory relative to the repository if inside it, else its name."""
    p = Path(results_dir).resolve()
    repo = Path(__file__).resolve().parents[1]
    try:
        return str(p.relative_to(repo))
    except ValueError:
        return p.name


def build_report(results_dir, out_dir, microbench=None) -> list:
    """Reads results_dir, writes out_dir/{REPORT.md, tables/, figures/}. Returns written paths
    (sorted). Raises load.LoadError on bad input. microbench: a Google Benchmark JSON
    (bench/run-microbench.sh) whose section follows the lab sections, or None."""
    mb_path = Path(microbench) if microbench else None
    res = load_results(results_dir)
    out = Path(out_dir)
    meta = res["metadata"]
    written = []
    md = ["# lockbench: ECE 420 Lab 2 report", "",
          f"Generated by `python -m analysis report` from the raw results in "
          f"`{_shown_path(results_dir)}/`. Every number and every sentence "
          "below is computed from those files; regenerate rather than edit.", "",
          "## Setup", "", "| | |", "|---|---|"]
    md += [f"| {k} | {v} |" for k, v in _meta_rows(meta)]
    md += [f"| Microbenchmarks | "
           f"{f'`{_shown_path(mb_path)}`' if mb_path and mb_path.exists() else 'not included'} |"]
    params = meta.get("parameters", {})
    extra = [s for s in server_order([*params.get("lab", {}).get("servers", []),
                                      *params.get("sweeps", {}).get("servers", [])])
             if s not in STRATEGIES]
    md += ["", _param_text(meta), "",
           "Strategies: " + "; ".join(f"`{s}` = {d}" for s, d in STRATEGIES.items())
           + "".join(f"; `{s}` = {describe(s)}" for s in extra) + ".", ""]

    plt.rcParams.update(F.RC)
    fig_no = 0

    def figure(name, caption, fig):
        nonlocal fig_no
        fig_no += 1
        written.extend(save_figure(fig, out / "figures", name))
        md.extend([f"![{caption}](figures/{name}.png)", "",
                   f"*Figure {fig_no}: {caption}* ([SVG](figures/{name}.svg))", ""])

    lab = res["lab"]
    if lab is not None and not lab.empty:
        summary = T.lab_summary(lab)
        _write(out / "tables" / "lab_summary.csv", _csv(summary))
        tables_md = write_lab_tables(summary, out)
        md += ["## The lab tables", "",
               "The lab's metric: for each request, the time from the server having received it "
               "to the server starting to send the reply (lock wait + array access with its "
               "artificial delay); the server appends the mean over each 1000 requests to its "
               "time file, which gives one value per client run. The tables give the mean and "
               "the median of those per-run values, in milliseconds.", ""]
        for name in ("table_mean", "table_median", "table_ci95", "table_speedup"):
            if name in tables_md:
                md += [tables_md[name]]
        runs = T.table_runs(summary)
        if runs.nunique(dropna=True).max() == 1 and runs.stack().nunique() == 1:
            md += [f"Each cell is the statistic over {int(runs.iloc[0, 0])} runs.", ""]
        else:
            md += [tables_md["table_runs"]]
        load = lab[["threads", "requests", "read_ratio", "connection"]].drop_duplicates()
        md += ["Client load per run, as the client reported it: " + "; ".join(
            f"{r.threads} threads, {r.requests} requests, {r.read_ratio:.0%} reads, "
            f"connection {r.connection}" for r in load.itertuples()) + ".", ""]
        rr = lab["read_ratio"].dropna()
        obs = (O.observe_winners(summary)
               + O.observe_rwlock(summary, float(rr.median()) if not rr.empty else None)
               + O.observe_n_effect(summary) + O.observe_skew(summary)
               + O.observe_errors(lab)
               + O.observe_delay_slept(res["lab_servers"],
                                       float(lab["delay_us"].median())))
        md += ["### What the lab data shows", ""] + [f"- {s}" for s in obs] + [""]

        md += ["## Figures of the lab experiment", ""]
        fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
        F.plot_mean_latency(ax, summary)
        figure("plot_mean_latency", "Mean memory access latency per server and n (log scale), "
               "whiskers = 95% confidence interval of the mean.", fig)

        ns = sorted(lab["n"].unique())
        fig, axes = plt.subplots(1, len(ns), figsize=(3 * len(ns) + 1, 3.8), sharey=True,
                                 layout="constrained", squeeze=False)
        F.plot_latency_distribution(axes[0], lab)
        figure("plot_latency_distribution", "Distribution of the per-run latency of each "
               "server (box = quartiles, line = median).", fig)

        wh = T.wait_hold(res["traces"], res["lab_servers"])
        if not wh.empty:
            _write(out / "tables" / "wait_hold.csv", _csv(wh))
            fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
            F.plot_wait_hold(axes, wh)
            src = sorted(set(wh["source"]))
            figure("plot_wait_hold", "Lock wait versus lock hold per request (from the servers' "
                   f"{' and '.join(src)} data); colour = server.", fig)
            md += ["- " + s for s in O.observe_wait_hold(wh)] + [""]

        if "n" not in res["sweeps"] and len(ns) > 1:  # no n sweep: the lab's own n values
            fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
            F.plot_latency_vs_n(ax, summary.assign(latency_ms=summary["mean_s"] * 1e3),
                                "mean memory access latency [ms] (log scale)",
                                "Lab metric against array size")
            figure("plot_latency_vs_n", "Mean lab latency against array size n (log-log).", fig)

        tr = res["traces"]
        if tr is not None and not tr.empty:
            tns = sorted(tr["n"].unique())
            fig, axes = plt.subplots(1, len(tns), figsize=(3.4 * len(tns) + 1, 3.6),
                                     sharex=True, sharey=True, layout="constrained",
                                     squeeze=False)
            F.plot_latency_cdf(axes[0], tr)
            figure("plot_latency_cdf", "Cumulative distribution of the per-request memory "
                   f"access latency (first {tr.groupby(['server', 'n']).size().min()} or more "
                   "requests traced per server and n).", fig)

    sweeps = res["sweeps"]
    if sweeps:
        md += ["## Sweeps", "",
               "Closed-loop runs of the project's client against one server start per point; "
               "throughput and client latency are medians over the repetitions (percentiles are "
               "never averaged). Client latency includes connecting, sending and receiving; "
               "the server latency is the lab metric over all requests of that server start.", ""]
    for kind in ("threads", "n", "read-ratio", "delay", "connection"):
        if kind not in sweeps or sweeps[kind].empty:
            continue
        s = T.sweep_summary(sweeps[kind], res["sweep_servers"].get(kind))
        _write(out / "tables" / f"sweep_{kind}.csv", _csv(s))
        xlabel, what = SWEEP_TEXT[kind]
        param = T.SWEEP_PARAM[kind]
        if kind == "threads":
            md += ["### Saturation: client threads", ""]
            knees = T.saturation_points(s)
            _write(out / "tables" / "saturation.csv", _csv(knees))
            fig, axes = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True, layout="constrained")
            F.plot_saturation(axes, s, knees)
            figure("plot_saturation", "Throughput and p95 client latency against client threads; "
                   "circles mark the knee (fewest threads reaching 90% of peak throughput).", fig)
            md += [f"- {x}" for x in O.observe_saturation(knees)]
        elif kind == "n":
            md += ["### Latency against n", ""]
            col, ylabel = ("summary_mean_latency_s", "server mean memory access latency [ms]")
            if col not in s or s[col].isna().all():
                col, ylabel = "lat_mean_us", "client mean latency [ms]"
            d = pd.DataFrame({"server": s["server"], "n": s["n"],
                              "latency_ms": s[col] * (1e3 if col.endswith("_s") else 1e-3)})
            fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
            F.plot_latency_vs_n(ax, d, ylabel + " (log scale)", "Latency against array size")
            figure("plot_latency_vs_n", "Mean latency against array size n (log-log).", fig)
            md += [f"- {x}" for x in O.observe_sweep_span(s, param, what)]
        else:
            md += [f"### {what[0].upper() + what[1:]}", ""]
            fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), layout="constrained")
            F.plot_sweep(axes, s, param, xlabel)
            figure(f"plot_sweep_{kind.replace('-', '_')}",
                   f"Throughput, p95 client latency and server latency against {what}.", fig)
            md += [f"- {x}" for x in O.observe_sweep_span(s, param, what)]
        md += [f"- {x}" for x in O.observe_sweep_ranking(s, param, what)]
        md += [f"- {x}" for x in O.observe_sweep_errors(sweeps[kind], what)] + [""]

    if mb_path and mb_path.exists():
        from . import microbench as MB
        md.append(MB.render_section(MB.load_benchmarks(mb_path), out / "figures",
                                    figures_link="figures"))
        md.append("")
        written += sorted((out / "figures").glob("microbench_*"))

    md += ["## Method", "",
           "- Confidence intervals: mean ± t(0.975, runs - 1) · s / √runs over the per-run values "
           "(Student's t; the runs of one cell share one server start and are not fully "
           "independent, so read the interval as a guide).",
           "- Speedup: mean latency of main1 divided by the server's mean latency at the same n.",
           "- The figures and tables are rebuilt from the raw files by `python -m analysis report "
           "--results <dir> --out <dir>`; the raw per-run rows are in `lab.csv` and `sweep_*.csv`.",
           ""]
    _write(out / "REPORT.md", "\n".join(md).rstrip("\n") + "\n")
    written.append(out / "REPORT.md")
    written += sorted((out / "tables").glob("*"))
    return sorted(set(written))
