"""plot_* helpers: each draws on the Axes it is given and returns the artists it made.

The one figure style of the report: RC (fonts, grid, reproducible SVG), new_figure (a
figure not tied to pyplot's global state), and one colour and marker per server label
everywhere, colour-blind safe (Okabe-Ito). No file I/O here (report.py saves figures).
"""

import zlib

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import server_label, server_order
from analysis.report.microbench_tables import NO_LOCK
from analysis.report.tables import ordered_values

CDF_POINTS = 800  # points per CDF curve (ranks evenly spaced; exact at the drawn points)
# Fixed (colour, marker) per label: the lab servers, and the generic server's strategies
# (the one-lock and per-slot lab strategies share the colour of their mainN).
STYLE = {
    "main1": ("#D55E00", "o"), "main2": ("#0072B2", "s"), "main3": ("#E69F00", "^"),
    "main4": ("#009E73", "D"), "unprotected": ("#000000", "x"),
    "unprotected-racy": ("#555555", "+"),
    "one-mutex": ("#D55E00", "o"), "mutex-per-slot": ("#0072B2", "s"),
    "one-rwlock": ("#E69F00", "^"), "rwlock-per-slot": ("#009E73", "D"),
    "striped-mutex": ("#56B4E9", "v"), "striped-rwlock": ("#CC79A7", "<"),
    "one-rwlock-wpref": ("#F0E442", ">"), "rwlock-per-slot-wpref": ("#999999", "P"),
    "spinlock-per-slot": ("#882255", "*"), "seqlock-per-slot": ("#117733", "h"),
    "pointer-swap": ("#332288", "X"),
}
# Any other label (e.g. "striped-mutex:8"): a colour and marker fixed by the label itself
# (CRC-32 into these lists), so a label looks the same in every figure and run.
EXTRA_COLORS = ["#56B4E9", "#CC79A7", "#000000", "#999999", "#882255", "#44AA99", "#117733",
                "#332288", "#AA4499", "#DDCC77", "#F0E442", "#661100"]
EXTRA_MARKERS = ["v", "<", ">", "P", "*", "h", "X", "p", "d", "8"]


def color(server: str) -> str:
    if server in STYLE:
        return STYLE[server][0]
    return EXTRA_COLORS[zlib.crc32(str(server).encode()) % len(EXTRA_COLORS)]


def marker(server: str) -> str:
    if server in STYLE:
        return STYLE[server][1]
    return EXTRA_MARKERS[zlib.crc32(str(server).encode()) % len(EXTRA_MARKERS)]


# Fixed style for every figure (reproducible SVG: fixed hash salt, no dates in report.py).
RC = {
    "figure.dpi": 100, "savefig.dpi": 120, "font.size": 9, "axes.titlesize": 10,
    "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 8, "legend.frameon": False,
    "svg.hashsalt": "lockbench", "svg.fonttype": "path", "path.simplify": False,
}


def new_figure(nrows: int = 1, ncols: int = 1, **kw):
    """(figure, axes) with constrained layout, outside pyplot (nothing global to close);
    axes as plt.subplots returns them. Draw it under matplotlib.rc_context(RC)."""
    sub = {k: kw.pop(k) for k in ("sharex", "sharey", "squeeze") if k in kw}
    fig = Figure(layout="constrained", **kw)
    return fig, fig.subplots(nrows, ncols, **sub)


def _legend(ax, **kw):
    """Legend outside the plot area, so it never hides data (constrained layout makes room)."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, **kw)


def _servers(df) -> list:
    """The servers of df in the order they first appear (tables.py sorts by --servers)."""
    return server_order(df["server"])


def plot_mean_latency(ax, summary: pd.DataFrame):
    """Grouped bars: mean lab latency (ms, log scale) per n and server, 95% CI whiskers."""
    ns = sorted(summary["n"].unique())
    servers = _servers(summary)
    width = 0.8 / max(len(servers), 1)
    x = np.arange(len(ns))
    artists = []
    for i, s in enumerate(servers):
        g = summary[summary["server"] == s].set_index("n").reindex(ns)
        mean = g["mean_s"].to_numpy() * 1e3
        err = np.vstack([mean - g["ci_lo_s"].to_numpy() * 1e3,
                         g["ci_hi_s"].to_numpy() * 1e3 - mean])
        err = np.where(np.isfinite(err), np.clip(err, 0, None), 0)
        artists.append(ax.bar(x + (i - (len(servers) - 1) / 2) * width, mean, width,
                              yerr=err, capsize=2, color=color(s), label=server_label(s),
                              edgecolor="black", linewidth=0.4,
                              error_kw={"elinewidth": 0.8}))
    ax.set_xticks(x, [f"n = {n}" for n in ns])
    ax.set(yscale="log", ylabel="mean memory access latency [ms] (log scale)",
           xlabel="array size n", title="Mean latency per run, 95% CI of the mean")
    _legend(ax)
    return artists


def plot_latency_distribution(axes, lab: pd.DataFrame):
    """One panel per n: box plot of the per-run lab latency (ms) of each server; the
    whiskers span 1.5 IQR, points beyond are single runs. Log scale, shared y."""
    ns = sorted(lab["n"].unique())
    artists = []
    for ax, n in zip(np.atleast_1d(axes), ns):
        g = lab[(lab["n"] == n) & lab["latency_s"].notna()]
        servers = _servers(g)
        data = [g.loc[g["server"] == s, "latency_s"].to_numpy() * 1e3 for s in servers]
        bp = ax.boxplot(data, tick_labels=servers, patch_artist=True, widths=0.6,
                        flierprops={"markersize": 3})
        for patch, s in zip(bp["boxes"], servers):
            patch.set_facecolor(color(s))
            patch.set_alpha(0.75)
        for med in bp["medians"]:
            med.set_color("black")
        ax.set_yscale("log")
        ax.set_title(f"n = {n}")
        ax.set_xlabel("server")
        artists.append(bp)
    np.atleast_1d(axes)[0].set_ylabel("memory access latency per run [ms] (log scale)")
    return artists


def plot_wait_hold(axes, wh: pd.DataFrame):
    """Left: mean lock wait, lock hold and the rest of the memory-access latency (ms),
    stacked, one bar per server (colour) grouped by n. Right: the same as shares (%)."""
    from matplotlib.patches import Patch

    ax_abs, ax_pct = axes
    ns = sorted(wh["n"].unique())
    wh = wh.assign(_g=wh["n"].map({n: i for i, n in enumerate(ns)}),
                   _o=wh["server"].map({s: i for i, s in enumerate(_servers(wh))}))
    wh = wh.sort_values(["_g", "_o"]).reset_index(drop=True)
    x = (wh["_g"] * (max(len(_servers(wh)), 4) + 1) + wh["_o"]).to_numpy(dtype=float)
    centers = [x[wh["_g"] == i].mean() for i in range(len(ns))]
    parts = [("wait_s", "lock wait", 1.0, None),
             ("hold_s", "lock held (array access + delay)", 0.55, "//"),
             ("other_s", "rest of the measured interval", 0.2, "..")]
    colors = [color(s) for s in wh["server"]]
    total = (wh["wait_s"] + wh["hold_s"] + wh["other_s"]).replace(0, np.nan)
    artists = []
    for ax, pct, ylabel in ((ax_abs, False, "mean time per request [ms]"),
                            (ax_pct, True, "share of the request's latency [%]")):
        bottom = np.zeros(len(wh))
        for col, _, alpha, hatch in parts:
            v = (wh[col] / total * 100).to_numpy() if pct else wh[col].to_numpy() * 1e3
            v = np.nan_to_num(v.astype(float))
            artists.append(ax.bar(x, v, 0.85, bottom=bottom, color=colors, alpha=alpha,
                                  hatch=hatch, edgecolor="black", linewidth=0.4))
            bottom += v
        ax.set_xticks(centers, [f"n = {n}" for n in ns])
        ax.set_xlabel("array size n (one bar per server)")
        ax.set_ylabel(ylabel)
    ax_abs.set_title("Where the latency goes (mean per request)")
    ax_pct.set_title("Share of wait and hold")
    ax_pct.set_ylim(0, 100)
    kinds = [Patch(facecolor="grey", alpha=a, hatch=h, edgecolor="black", label=name)
             for _, name, a, h in parts]
    servers = [Patch(facecolor=color(s), edgecolor="black", label=server_label(s))
               for s in _servers(wh)]
    _legend(ax_pct, handles=kinds + servers)
    return artists


def plot_saturation(axes, thr: pd.DataFrame, knees: pd.DataFrame):
    """Top: throughput (req/s) vs client threads; bottom: p95 client latency (us, log) vs
    client threads. Closed loop. The knee (fewest threads reaching 90% of the peak) is
    circled on both curves."""
    ax_t, ax_p = axes
    artists = []
    for s in _servers(thr):
        g = thr[thr["server"] == s].sort_values("threads")
        artists += ax_t.plot(g["threads"], g["throughput_rps"], marker=marker(s),
                             color=color(s), label=server_label(s))
        ax_t.fill_between(g["threads"], g["throughput_min_rps"], g["throughput_max_rps"],
                          color=color(s), alpha=0.15, linewidth=0)
        artists += ax_p.plot(g["threads"], g["lat_p95_us"], marker=marker(s), color=color(s),
                             label=server_label(s))
        k = knees[knees["server"] == s]
        if not k.empty:
            k = k.iloc[0]
            kp95 = g.loc[g["threads"] == k["knee_threads"], "lat_p95_us"].iloc[0]
            for ax, y in ((ax_t, k["knee_rps"]), (ax_p, kp95)):
                artists.append(ax.scatter([k["knee_threads"]], [y], s=160, facecolors="none",
                                          edgecolors=color(s), linewidths=1.5, zorder=5))
    for ax in axes:
        ax.set_xscale("log", base=2)
        ticks = sorted(thr["threads"].unique())
        ax.set_xticks(ticks, [str(t) for t in ticks])
    ax_t.set_ylabel("throughput [requests/s]")
    ax_t.set_ylim(bottom=0)
    ax_t.set_title("Saturation (closed loop; circle = knee, 90% of peak; band = min-max)")
    ax_p.set(yscale="log", ylabel="p95 client latency [us] (log scale)", xlabel="client threads")
    _legend(ax_t)
    return artists


def plot_latency_cdf(axes, traces: pd.DataFrame):
    """One panel per n: empirical CDF of the per-request memory-access latency (us, log x)
    from the servers' traces."""
    ns = sorted(traces["n"].unique())
    artists = []
    for ax, n in zip(np.atleast_1d(axes), ns):
        g = traces[traces["n"] == n]
        for s in _servers(g):
            v = np.sort(g.loc[g["server"] == s, "latency_ns"].to_numpy() / 1e3)
            v = np.clip(v, 1e-3, None)
            y = np.arange(1, len(v) + 1) / len(v)
            if len(v) > CDF_POINTS:  # keep files small: evenly spaced ranks, ends included
                keep = np.unique(np.linspace(0, len(v) - 1, CDF_POINTS).round().astype(int))
                v, y = v[keep], y[keep]
            artists += ax.step(v, y, where="post", color=color(s), label=server_label(s))
        ax.set_xscale("log")
        ax.set_ylim(0, 1)
        ax.set_title(f"n = {n}")
        ax.set_xlabel("latency per request [us] (log)")
    np.atleast_1d(axes)[0].set_ylabel("fraction of requests (memory access latency)")
    _legend(np.atleast_1d(axes)[-1])
    return artists


def plot_latency_vs_n(ax, df: pd.DataFrame, ylabel: str, title: str):
    """Latency (ms, log) against array size n (log) per server. df: server, n, latency_ms."""
    artists = []
    for s in _servers(df):
        g = df[df["server"] == s].sort_values("n")
        artists += ax.plot(g["n"], g["latency_ms"], marker=marker(s), color=color(s),
                           label=server_label(s))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("array size n (log scale)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _legend(ax)
    return artists


def plot_sweep(axes, summary: pd.DataFrame, param: str, xlabel: str):
    """Three panels against a swept parameter (shown as evenly spaced categories): median
    throughput (req/s), median p95 client latency (us, log), and the server's mean
    memory-access latency (ms, log) when the server summaries are there."""
    ax_t, ax_p, ax_s = axes
    values = ordered_values(summary[param])
    pos = {v: i for i, v in enumerate(values)}
    artists = []
    for s in _servers(summary):
        g = summary[summary["server"] == s].copy()
        g["_x"] = g[param].map(pos)
        g = g.sort_values("_x")
        kw = {"marker": marker(s), "color": color(s), "label": server_label(s)}
        artists += ax_t.plot(g["_x"], g["throughput_rps"], **kw)
        artists += ax_p.plot(g["_x"], g["lat_p95_us"], **kw)
        if "summary_mean_latency_s" in g:
            artists += ax_s.plot(g["_x"], g["summary_mean_latency_s"] * 1e3, **kw)
    fmt = (lambda v: f"{v:g}") if not isinstance(values[0], str) else str
    for ax in axes:
        ax.set_xticks(range(len(values)), [fmt(v) for v in values])
        ax.set_xlabel(xlabel)
    ax_t.set_ylabel("throughput [requests/s]")
    ax_t.set_ylim(bottom=0)
    ax_p.set_ylabel("p95 client latency [us] (log scale)")
    ax_p.set_yscale("log")
    ax_s.set_ylabel("server mean memory access latency [ms] (log scale)")
    ax_s.set_yscale("log")
    _legend(ax_s)
    return artists


def plot_ops_vs_threads(ax, s: pd.DataFrame, title: str, cores):
    """One line per strategy (the two stores without a lock dashed): total ops/s (log)
    versus threads (log2) at one setting; s: microbench Store rows of that setting. The
    band is the min-max of the repetitions when the rows carry it (ops_per_s_lo/_hi).
    Returns the Line2D artists."""
    artists = []
    for name in server_order(s["strategy"]):
        g = s[s["strategy"] == name].sort_values("threads")
        kw = {"color": color(name), "marker": marker(name), "markersize": 4, "linewidth": 1.2}
        if name in NO_LOCK:
            kw["linestyle"] = "--"
        (line,) = ax.plot(g["threads"], g["ops_per_s"], label=name, **kw)
        artists.append(line)
        if "ops_per_s_lo" in g:
            ax.fill_between(g["threads"].to_numpy(dtype=float), g["ops_per_s_lo"],
                            g["ops_per_s_hi"], color=color(name), alpha=0.08, linewidth=0)
    ticks = sorted(s["threads"].unique())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel(f"threads (machine has {cores} cores)")
    ax.set_ylabel("ops/s, all threads (log)")
    ax.set_title(title)
    return artists


def plot_writer_wait(ax, w: pd.DataFrame, title: str, metric: str = "writer_wait_p99_us"):
    """Grouped bars: writer lock wait (us, log) per strategy and number of readers; w:
    microbench WriterStarvation rows of one delay."""
    names = server_order(w["strategy"])
    readers = sorted(w["readers"].dropna().unique())
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(readers))
    artists = []
    for i, name in enumerate(names):
        g = w[w["strategy"] == name].set_index("readers").reindex(readers)
        vals = np.clip(g[metric].to_numpy(dtype=float), 0.01, None)
        artists.append(ax.bar(x + (i - (len(names) - 1) / 2) * width, vals, width,
                              label=name, color=color(name)))
    ax.set_xticks(x, [f"{int(r)} readers" for r in readers])
    ax.set_yscale("log")
    ax.set_ylabel(metric.replace("_", " ") + " (log)")
    ax.set_title(title)
    return artists


def plot_fairness(axes, t: pd.DataFrame, title: str):
    """Two panels of horizontal bars, one bar per strategy (slowest first): Jain's index of
    the threads' operation counts (1 = even) and the p50/p99 of the sampled lock waits
    (log); t: microbench.table_fairness rows of one setting and thread count."""
    t = t.sort_values("ops_per_s")
    y = np.arange(len(t))
    colors = [color(s) for s in t["strategy"]]
    ax = axes[0]
    ax.barh(y, t["fair_jain"], color=colors)
    ax.set_yticks(y, t["strategy"])
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("Jain's index of per-thread operations (1 = even)")
    ax.set_title(title)
    ax = axes[1]
    p99 = np.clip(t["wait_p99_ns"].to_numpy(dtype=float), 1, None)
    p50 = np.clip(t["wait_p50_ns"].to_numpy(dtype=float), 1, None)
    ax.barh(y, p99, color=colors, alpha=0.45, label="p99")
    ax.barh(y, p50, color=colors, label="p50")
    ax.tick_params(labelleft=False)  # the y axis is shared: the names are on the left
    ax.set_xscale("log")
    ax.set_xlabel("lock wait, ns (log; dark p50, light p99)")
    ax.set_title("Acquire latency of sampled accesses")


def plot_timing_cost(ax, t: pd.DataFrame):
    """Grouped bars: one thread's ns per operation of each store (unprotected, one-mutex)
    under each timing mode; t: microbench.table_timing's StoreTiming rows."""
    modes = [m for m in ("timed", "sampled", "untimed") if m in set(t["timing"])]
    stores = list(dict.fromkeys(t["what"]))
    width = 0.8 / max(len(modes), 1)
    x = np.arange(len(stores))
    shades = {"timed": "#D55E00", "sampled": "#E69F00", "untimed": "#0072B2"}
    for i, mode in enumerate(modes):
        g = t[t["timing"] == mode].set_index("what").reindex(stores)
        bars = ax.bar(x + (i - (len(modes) - 1) / 2) * width, g["ns_per_op"], width,
                      label=mode, color=shades[mode])
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(x, stores)
    ax.set_ylabel("ns per operation, one thread")
    ax.set_title("What timing every access costs the store")
    _legend(ax)


TIMELINE_LANES = 16   # holders drawn side by side in one lock's row, at most


def plot_timeline(axes, windows: list):
    """One panel per server: who held which lock when, in a window of a few milliseconds
    (traces.intervals, clipped). windows: [(server, n, requests, lo_us, hi_us)]. A row
    per lock (the array's for a one-lock server, else each string seen): a light band
    where some request waited for it, and each hold a solid bar in a lane of its own
    while others hold the lock too (readers side by side: as many lanes as held it at
    once, up to TIMELINE_LANES); time from the window's start, in milliseconds."""
    artists = []
    for ax, (s, n, iv, lo, hi) in zip(np.atleast_1d(axes), windows):
        locks = sorted(set(iv["lock"]), key=_lock_order)
        for y, lk in enumerate(locks):
            g = iv[iv["lock"] == lk].sort_values("hold_start", kind="stable")
            waits = [((w - lo) / 1e3, (h - w) / 1e3) for w, h in zip(g["wait_start"],
                                                                     g["hold_start"]) if h > w]
            artists.append(ax.broken_barh(waits, (y - 0.4, 0.8), color=color(s), alpha=0.15,
                                          linewidth=0))
            lanes = _lanes(g["hold_start"].tolist(), g["end"].tolist())
            k = max(lanes, default=0) + 1
            for lane in range(k):
                holds = [((h - lo) / 1e3, (e - h) / 1e3) for h, e, ln in
                         zip(g["hold_start"], g["end"], lanes) if ln == lane]
                artists.append(ax.broken_barh(holds, (y - 0.4 + 0.8 * lane / k, 0.8 / k),
                                              color=color(s), alpha=0.85, edgecolor="white",
                                              linewidth=0.3))
        ax.set_xlim(0, (hi - lo) / 1e3)
        ax.set_ylim(-0.6, len(locks) - 0.4)
        ax.set_yticks(range(len(locks)), [lk.replace("string ", "s") for lk in locks])
        ax.set_title(f"{server_label(s)}, n = {n}", loc="left")
        ax.grid(axis="y", alpha=0)
    np.atleast_1d(axes)[-1].set_xlabel("time from the window's start [ms] (solid: a request "
                                       "holding the lock, side by side when several did; "
                                       "light: some request waiting for it)")
    return artists


def _lanes(starts: list, ends: list) -> list:
    """A lane per hold (in order of start): the first lane free at its start, so holds at
    the same time sit side by side (at most TIMELINE_LANES lanes, reused in turn)."""
    free_at, out = [], []
    for a, b in zip(starts, ends):
        lane = next((i for i, t in enumerate(free_at) if t <= a), None)
        if lane is None:
            lane = len(free_at) if len(free_at) < TIMELINE_LANES else len(out) % TIMELINE_LANES
            free_at += [0.0] * (lane + 1 - len(free_at))
        free_at[lane] = b
        out.append(lane)
    return out


def _lock_order(lock: str):
    """The array first, then the strings by number."""
    head, _, num = lock.rpartition(" ")
    return (head, int(num)) if num.isdigit() else (lock, -1)
