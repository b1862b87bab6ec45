#!/usr/bin/env python3
"""bench/plot_scaling.py: the figure of `bench/run-microbench.sh --scaling`.

Reads kv_bench's Google Benchmark JSON of the scaling sweep and draws, for 70 % reads, the
throughput (operations per second, the median over the repetitions) and the fairness
(Jain's index of the threads' operation counts: 1 every thread got as much, 1/k one of k got
everything) of each strategy against the threads, one hot string and 1000 strings side by
side. Where a line stops rising, the lock stops scaling; where fairness falls, some threads
starve while others take the lock again and again.

  .venv/bin/python bench/plot_scaling.py results/microbench/scaling.json scaling.png
"""

import json
import sys
from pathlib import Path

import matplotlib

from analysis.load import read_raw_text
from analysis.report.microbench_tables import MicrobenchError, load_benchmarks, store_runs

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402


def points(path: Path, read: int = 70) -> dict:
    """{(n, strategy): {threads: (ops_per_s, fair_jain)}}, medians over the repetitions
    (the report's reading of kv_bench JSON)."""
    runs = store_runs(load_benchmarks(path))
    runs = runs[runs["read_pct"] == read].sort_values("threads")
    return {(int(n), name): {int(t): (o, j) for t, o, j in
                             zip(g["threads"], g["ops_per_s"], g["fair_jain"])}
            for (n, name), g in runs.groupby(["n", "strategy"])}


def draw(pts: dict, cpu: str, out: Path) -> None:
    fig = Figure(figsize=(11, 7), layout="constrained")
    axes = fig.subplots(2, 2, sharex=True)
    names = sorted({name for _, name in pts})
    colors = matplotlib.colormaps["tab20"].colors
    style = {name: (colors[(2 * i) % 20 + (2 * i) // 20], "osD^v<>ph*X"[i % 11])
             for i, name in enumerate(names)}   # a colour and marker each, 11 and more
    for col, n in enumerate((1000, 1)):
        for (pn, name), per in sorted(pts.items()):
            if pn != n:
                continue
            ts = list(per)
            c, m = style[name]
            axes[0][col].plot(ts, [per[t][0] for t in ts], marker=m, color=c, label=name)
            axes[1][col].plot(ts, [per[t][1] for t in ts], marker=m, color=c, label=name)
        axes[0][col].set_title(f"n = {n}" + (" (one hot string)" if n == 1 else ""))
        axes[0][col].set_yscale("log")
        axes[1][col].set_ylim(0, 1.05)
        axes[1][col].set_xlabel("threads (log 2)")
        axes[1][col].set_xscale("log", base=2)
    axes[0][0].set_ylabel("operations per second (log)")
    axes[1][0].set_ylabel("fairness (Jain's index)")
    axes[0][1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.suptitle(f"Scaling, 70 % reads, no delay ({cpu})", fontsize=10)
    fig.savefig(out, dpi=110)


def main(argv) -> int:
    if len(argv) != 3:
        print("usage: plot_scaling.py SCALING.json OUT.png", file=sys.stderr)
        return 2
    try:
        pts = points(Path(argv[1]))
        ctx = json.loads(read_raw_text(argv[1])).get("context", {})
    except (OSError, ValueError, MicrobenchError) as e:
        print(f"plot_scaling: {argv[1]}: {e}", file=sys.stderr)
        return 1
    if not pts:
        print(f"plot_scaling: {argv[1]}: no scaling run in it (kv_bench --scaling)",
              file=sys.stderr)
        return 1
    cpu = f"{ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz"
    draw(pts, cpu, Path(argv[2]))
    print(f"wrote {argv[2]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
