"""The statistics and the outputs of `lockbench compare` (analysis/compare/cli.py): per
configuration the median over the rounds with its 95 % interval, the round-by-round ratios
to `native` and to `pthread` with theirs, a verdict against pthread, the best lock and how
sure; the text table, the JSON document, the Markdown section and the plot.

The interval of a median is the project's one rule for it, analysis/stats.py's median_ci
(distribution-free, from order statistics): it needs MIN_ROUNDS rounds to exist at 95 %.
Ratios are taken round by round (each round ran every configuration once, in a shuffled
order, so a noisy stretch of the machine hits both sides of a ratio alike), then their
median and its interval; a ratio whose interval holds 1 is a tie."""

import math
import shlex

from analysis.stats import median_ci

LEVEL = 0.95
ALPHA = 1 - LEVEL


def _min_rounds() -> int:
    """The fewest values median_ci gives a bounded 95 % interval for."""
    m = 1
    while not math.isfinite(median_ci(list(range(m)), ALPHA)[0]):
        m += 1
    return m


MIN_ROUNDS = _min_rounds()


def interval(xs: list) -> tuple:
    """(median, low, high) of xs; low and high None when there are too few values."""
    if not xs:
        return (None, None, None)
    lo, mid, hi = median_ci(xs, ALPHA)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return (mid, None, None)
    return (mid, lo, hi)


def factors(a: list, b: list, lower_is_better: bool) -> list:
    """Round by round, how many times better a was than b (above 1: a better), over the
    rounds both measured (None where a run failed or was not made)."""
    out = []
    for x, y in zip(a, b):
        if x is None or y is None or x <= 0 or y <= 0:
            continue
        out.append(y / x if lower_is_better else x / y)
    return out


def ratios(a: list, b: list) -> list:
    """Round by round a / b, the metric's own ratio."""
    return [x / y for x, y in zip(a, b) if x is not None and y is not None and y > 0]


def words(metric: dict) -> tuple:
    return ("faster", "slower") if metric["kind"] == "wall" else ("better", "worse")


def verdict(f: tuple, metric: dict, other: str = "pthread") -> str:
    """A factor's (median, low, high) against `other` in words."""
    mid, lo, hi = f
    good, bad = words(metric)
    if mid is None:
        return "-"
    if lo is None:
        said = f"{mid:.2f}x {good}" if mid >= 0.995 else f"{1 / mid:.2f}x {bad}"
        return (f"{said} than {other}, not established: "
                f"{MIN_ROUNDS} rounds give a 95 % interval (--rounds {MIN_ROUNDS})")
    if lo > 1:
        return f"{mid:.2f}x {good} than {other} ({lo:.2f}-{hi:.2f}), clearly"
    if hi < 1:
        return f"{1 / mid:.2f}x {bad} than {other} ({1 / hi:.2f}-{1 / lo:.2f}), clearly"
    return f"a tie with {other}: {mid:.2f}x ({lo:.2f}-{hi:.2f}), the interval holds 1"


def summarise(names: list, values: dict, broken: dict, metric: dict) -> dict:
    """{name: row} for every configuration: its values, median and interval, the ratio to
    native, the factor and verdict against pthread; a broken one says why instead."""
    low = metric["lower_is_better"]
    rows = {}
    for name in names:
        got = [v for v in values[name] if v is not None]
        row = {"name": name, "values": values[name], "runs": len(got),
               "broke": broken.get(name)}
        if not row["broke"]:
            row["median"], row["low"], row["high"] = interval(got)
            row["vs_native"] = interval(ratios(values[name], values["native"]))
            vs = (interval(factors(values[name], values["pthread"], low))
                  if name not in ("native", "pthread") else (None, None, None))
            row["vs_pthread"] = vs
            row["verdict"] = verdict(vs, metric) if vs[0] is not None else "-"
        rows[name] = row
    return rows


def best(rows: dict, values: dict, metric: dict) -> dict | None:
    """The best of pthread and the swap locks that did not break (by the median factor
    against pthread), and against each of the others whether it is clearly better."""
    low = metric["lower_is_better"]
    cands = [n for n, r in rows.items() if n != "native" and not r["broke"]]
    if not cands:
        return None

    def score(n):
        return 1.0 if n == "pthread" else (rows[n]["vs_pthread"][0] or 0.0)
    top = max(cands, key=score)
    against = {n: interval(factors(values[top], values[n], low)) for n in cands if n != top}
    ties = [n for n, f in against.items() if f[1] is None or f[1] <= 1]
    unknown = any(f[1] is None for f in against.values())
    return {"name": top, "ties": ties, "established": not unknown, "against": against}


def best_line(b: dict | None, metric: dict) -> str:
    if b is None:
        return "best: none (every lock broke the program)"
    good, _ = words(metric)
    if not b["against"]:
        return f"best: {b['name']} (the only one that did not break the program)"
    if not b["established"]:
        return (f"best: {b['name']} by its median, not established: {MIN_ROUNDS} rounds give "
                f"a 95 % interval (--rounds {MIN_ROUNDS})")
    if not b["ties"]:
        return f"best: {b['name']}, clearly: {good} than every other beyond its 95 % interval"
    return (f"best: {b['name']} by its median, but a tie with {', '.join(b['ties'])} (the "
            "intervals of their round-by-round ratios hold 1)")


# ---- the outputs ---------------------------------------------------------------------------

def fmt_value(v, metric: dict) -> str:
    if v is None:
        return "-"
    if metric["kind"] == "wall":
        return f"{v * 1e3:.3g}ms" if v < 1 else f"{v:.3g}s"
    return f"{v:.0f}" if abs(v) >= 1e4 else f"{v:.4g}"


def fmt_range(lo, hi, fmt) -> str:
    return "-" if lo is None else f"{fmt(lo)}-{fmt(hi)}"


def table_rows(rows: dict, metric: dict) -> tuple:
    head = ["config", "runs", "median", "95% interval", "vs native", "vs pthread"]
    out = []
    for r in rows.values():
        if r["broke"]:
            out.append([r["name"], str(r["runs"]), "broke the program: " + r["broke"]])
            continue
        mid, lo, hi = r["vs_native"]
        native = "-" if r["name"] == "native" or mid is None else (
            f"{mid:.2f}" + (f" ({lo:.2f}-{hi:.2f})" if lo is not None else ""))
        out.append([r["name"], str(r["runs"]), fmt_value(r["median"], metric),
                    fmt_range(r["low"], r["high"], lambda v: fmt_value(v, metric)), native,
                    r["verdict"]])
    return head, out


def text_table(head: list, rows: list) -> str:
    """Columns padded to their widest cell; a short row's last cell runs on."""
    widths = [max(len(r[i]) for r in [head, *rows] if i < len(r) - 1 or r is head)
              for i in range(len(head))]
    lines = []
    for r in [head, *rows]:
        cells = [c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def describe_metric(metric: dict) -> str:
    side = "lower" if metric["lower_is_better"] else "higher"
    if metric["kind"] == "wall":
        return f"wall time of the {metric['of']} ({side} is better)"
    return (f"the number --metric {metric['regex']!r} captures in the {metric['of']}'s output "
            f"({side} is better)")


NOTE = ("95 % intervals: distribution-free, of the median over the rounds (order statistics, "
        f"{MIN_ROUNDS} rounds at least); the ratios are taken round by round, the factor vs "
        "pthread is how many times better")


def render(doc: dict) -> str:
    head, rows = table_rows(doc["rows"], doc["metric"])
    lines = [f"lockbench compare: {shlex.join(doc['command'])}: {len(doc['rows'])} "
             f"configurations x {doc['rounds']} rounds; metric: {describe_metric(doc['metric'])}",
             text_table(head, rows), best_line(doc["best"], doc["metric"]), f"({NOTE})"]
    lines += profile_lines(doc)
    return "\n".join(lines)


def profile_lines(doc: dict) -> list:
    p = doc.get("profile")
    if p is None:
        return []
    if p.get("error"):
        return [f"pthread profile: {p['error']}"]
    lines = ["", f"why: the most contended locks of one profiling run under pthread (not timed; "
             f"{p['summary']})"]
    if p["rows"]:
        lines.append(text_table(p["head"], p["rows"]))
    else:
        lines.append("(no lock object was contended)")
    return lines


def markdown(doc: dict) -> str:
    head, rows = table_rows(doc["rows"], doc["metric"])
    esc = [[c.replace("|", "\\|") for c in r] + [""] * (len(head) - len(r)) for r in rows]
    lines = ["## Lock comparison", "",
             f"`{shlex.join(doc['command'])}`, {doc['rounds']} rounds, each running every "
             f"configuration once in a shuffled order; metric: {describe_metric(doc['metric'])}.",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    lines += ["", best_line(doc["best"], doc["metric"]).capitalize() + ".", "",
              NOTE[0].upper() + NOTE[1:] + "."]
    p = doc.get("profile")
    if p and p.get("rows"):
        lines += ["", "The most contended locks of one profiling run under pthread:", "",
                  "| " + " | ".join(p["head"]) + " |", "|" + "---|" * len(p["head"])]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in p["rows"]]
    return "\n".join(lines) + "\n"


def _clean(v):
    """JSON has no NaN or infinity: None instead; tuples as lists."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def json_doc(doc: dict) -> dict:
    out = dict(doc)
    out["rows"] = list(doc["rows"].values())
    return _clean(out)


def plot(doc: dict, path) -> None:
    """Bars: each configuration's median, whiskers its 95 % interval; broken ones left out."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in doc["rows"].values() if not r["broke"]]
    mids = [r["median"] for r in rows]
    err = [[m - r["low"] if r["low"] is not None else 0 for m, r in zip(mids, rows)],
           [r["high"] - m if r["high"] is not None else 0 for m, r in zip(mids, rows)]]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(rows) + 1.5), 3.6))
    colours = ["#888888" if r["name"] in ("native", "pthread") else "#3b75af" for r in rows]
    ax.bar([r["name"] for r in rows], mids, yerr=err, capsize=4, color=colours)
    unit = " (s)" if doc["metric"]["kind"] == "wall" else ""
    ax.set_ylabel(("wall time" if doc["metric"]["kind"] == "wall" else "metric") + unit)
    ax.set_title(f"{shlex.join(doc['command'])[:60]}: median, 95 % interval", fontsize=9)
    ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
