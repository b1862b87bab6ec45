#!/usr/bin/env python3
"""Before/after comparison of two kv_bench binaries, interleaved, in one sitting.

Runs binary A and binary B in turn (A B, then B A, ... so neither always goes
first) with the same --benchmark_filter, reads each run's JSON and prints, per
benchmark, the median ops_per_s of each and the median and range of the
per-round ratios A/B (pairing keeps a ratio meaningful while the machine's
speed drifts). A ratio whose range straddles 1.0 is a tie.

  bench/compare_kv_bench.py --a build/release/kv_bench --b /tmp/old/kv_bench \
      --rounds 7 --filter 'Store/(one-mutex|mutex-per-slot)/.*n:1000/'
  bench/compare_kv_bench.py --a ... --b ... --filter 'Access/' -- --access

This is a benchmark program, not a test: it asserts nothing.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_NS_PER_UNIT = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def throughput(b):
    """ops_per_s if the run has it, else operations per CPU second."""
    if "ops_per_s" in b:
        return b["ops_per_s"]
    return 1e9 / (b["cpu_time"] * _NS_PER_UNIT[b.get("time_unit", "ns")])


def run_once(binary, bench_filter, reps, extra):
    """Runs one kv_bench; returns {benchmark name: median throughput}."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        subprocess.run(
            [binary, *extra, f"--benchmark_filter={bench_filter}",
             f"--benchmark_repetitions={reps}",
             "--benchmark_report_aggregates_only=false",
             f"--benchmark_out={out}", "--benchmark_out_format=json"],
            check=True, stdout=subprocess.DEVNULL)
        with open(out, encoding="utf-8") as f:
            data = json.load(f)
    finally:
        os.unlink(out)
    per_name = {}
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        per_name.setdefault(b["run_name"], []).append(throughput(b))
    return {k: statistics.median(v) for k, v in per_name.items()}


def short(name):
    """'Store/x/s:1/read:70/n:1000/delay_us:0/threads:2/...' -> compact."""
    parts = name.split("/")
    keep = parts[:2] + [p for p in parts[2:] if p.split(":")[0] in
                        ("read", "n", "delay_us", "threads")]
    return " ".join(keep)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True, help="kv_bench binary A (after)")
    p.add_argument("--b", required=True, help="kv_bench binary B (before)")
    p.add_argument("--filter", required=True, help="--benchmark_filter regex")
    p.add_argument("--rounds", type=int, default=5, help="A/B pairs (1..50)")
    p.add_argument("--reps", type=int, default=3,
                   help="repetitions inside each run (median taken)")
    p.add_argument("extra", nargs="*",
                   help="after --: flags for both binaries (e.g. --access)")
    args = p.parse_args(argv)
    if not 1 <= args.rounds <= 50 or not 1 <= args.reps <= 20:
        p.error("--rounds must be in 1..50 and --reps in 1..20")
    for b in (args.a, args.b):
        if not os.access(b, os.X_OK):
            p.error(f"not an executable: {b}")
    a_runs, b_runs = [], []
    for r in range(args.rounds):
        order = [("a", args.a), ("b", args.b)]
        if r % 2:
            order.reverse()
        for which, binary in order:
            print(f"round {r + 1}/{args.rounds}: {which}", file=sys.stderr)
            try:
                result = run_once(binary, args.filter, args.reps, args.extra)
            except (subprocess.CalledProcessError, OSError, ValueError) as e:
                print(f"compare_kv_bench: {binary}: {e}", file=sys.stderr)
                return 1
            (a_runs if which == "a" else b_runs).append(result)
    names = [n for n in a_runs[0] if all(n in run for run in a_runs + b_runs)]
    if not names:
        print("compare_kv_bench: no benchmark ran in both binaries "
              "(check --filter)", file=sys.stderr)
        return 1
    print("| benchmark | A ops/s | B ops/s | A/B median | A/B min..max |")
    # (ops/s: per second of wall time for Store/, of CPU time for Access/)
    print("|---|---:|---:|---:|---|")
    for n in names:
        a_med = statistics.median(run[n] for run in a_runs)
        b_med = statistics.median(run[n] for run in b_runs)
        ratios = [ar[n] / br[n] for ar, br in zip(a_runs, b_runs)]
        print(f"| {short(n)} | {a_med:,.0f} | {b_med:,.0f} | "
              f"{statistics.median(ratios):.2f} | "
              f"{min(ratios):.2f}..{max(ratios):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
