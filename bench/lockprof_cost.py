#!/usr/bin/env python3
"""bench/lockprof_cost.py: what the lock preload (liblockprof.so) costs one thread.

A benchmark program, not a test. It compiles bench/lockprof_cost.c (one thread, uncontended
lock+unlock pairs of a pthread mutex and of a pthread rwlock's read side, timed by the thread's
CPU clock, the median of 21 slices) and runs it plain
and under the preload: loaded but idle, profiling (TSC and CLOCK_MONOTONIC), each swap lock
(`lockserver --list-locks`; a mutex swap also swaps the rwlocks to pflock, the rwlock-only
ones are swapped for the rwlocks alone), and one swap while profiling. In one sitting, R
rounds, each running every configuration once in a shuffled order; it prints each one's
median ns per pair as a Markdown table, the range over the rounds, and the median of its
ratios to plain glibc's pair in the same round (which a loaded machine moves less than the
times). --baseline LIB runs every preloaded configuration under that other liblockprof.so
too, in the same rounds: a before/after table from one sitting. Beside the table, this
machine's cost of each primitive a lock's fast path is made of (bench/primitives.c: a locked
add, xchg, a seq_cst store, a store then a locked op, rdtsc, clock_gettime, ...), measured
before and after the rounds, with the CPU named: docs/strategies.md counts them per lock.

  .venv/bin/python bench/lockprof_cost.py [--rounds 7] [--pairs 5000000]
      [--bin-dir build/release] [--baseline OTHER/liblockprof.so]
"""

import argparse
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from analysis.numbers import int_in

HERE = Path(__file__).resolve().parent


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int_in(1, 100), default=7)
    ap.add_argument("--pairs", type=int_in(1000, 1_000_000_000), default=5_000_000)
    ap.add_argument("--bin-dir", default="build/release",
                    help="where liblockprof.so and lockserver are")
    ap.add_argument("--baseline", type=Path, metavar="LIB",
                    help="another liblockprof.so, run in the same rounds (before/after)")
    return ap.parse_args(argv)


def swap_locks(lockserver: Path) -> list:
    """[(name, 'mutex' | 'rwlock')] of the locks the preload can swap in (pthread left out)."""
    out = subprocess.run([str(lockserver), "--list-locks"], capture_output=True, text=True,
                         check=True, timeout=10).stdout
    rows = [line.split()[:2] for line in out.splitlines() if line.strip()]
    return [(name, "mutex" if kinds.startswith("mutex") else "rwlock")
            for name, kinds, *_ in rows if name != "pthread"]


def swap_label(name: str) -> str:
    return f"swap `{name}`, not profiling"


def configurations(lib: Path, dump: Path, locks: list) -> dict:
    """{label: the environment it adds}: plain, then the preload's modes."""
    pre, prof = {"LD_PRELOAD": str(lib)}, {"LOCKPROF_FILE": str(dump / "p.%p.json")}
    confs = {"plain glibc": {}, "preloaded, neither profiling nor swapping": pre,
             "profiling (TSC)": {**pre, **prof},
             "profiling (`LOCKPROF_CLOCK=monotonic`)": {**pre, **prof,
                                                        "LOCKPROF_CLOCK": "monotonic"}}
    for name, kind in locks:
        var = "LOCKPROF_SWAP" if kind == "mutex" else "LOCKPROF_SWAP_RW"
        confs[swap_label(name)] = {**pre, var: name}
    confs["swap `mcs`, profiling"] = {**pre, **prof, "LOCKPROF_SWAP": "mcs"}
    return confs


def all_configurations(a, lib: Path, dump: Path, locks: list) -> dict:
    """{label: environment}; with a baseline, its preloaded rows too, labelled so."""
    confs = configurations(lib.resolve(), dump, locks)
    if a.baseline is not None:
        base = configurations(a.baseline.resolve(), dump, locks)
        confs.update({f"{label} [baseline]": env for label, env in base.items() if env})
    return confs


def run_once(exe: Path, pairs: int, env: dict) -> tuple:
    p = subprocess.run([str(exe), str(pairs)], capture_output=True, text=True, timeout=600,
                       env={"PATH": "/usr/bin:/bin", **env})
    m = re.fullmatch(r"mutex_ns=([\d.]+) rwlock_ns=([\d.]+)\n", p.stdout)
    if p.returncode != 0 or m is None:
        raise RuntimeError(f"{exe.name} {env}: exit {p.returncode}: {p.stderr.strip()[:200]}")
    return float(m[1]), float(m[2])


def run_rounds(a, exe: Path, confs: dict) -> dict:
    """{label: [(mutex_ns, rwlock_ns) per round]}, every round in a new shuffled order."""
    got: dict = {label: [] for label in confs}
    order = list(confs)
    for r in range(a.rounds):
        random.shuffle(order)
        for label in order:
            got[label].append(run_once(exe, a.pairs, confs[label]))
        print(f"round {r + 1} of {a.rounds} done", file=sys.stderr, flush=True)
    return got


def cell(values: list, ratios: list) -> str:
    """'median (least-most) ns, median ratio x' of one column."""
    return (f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f}), "
            f"{statistics.median(ratios):.1f}x")


def print_table(a, got: dict, rw_only: set) -> None:
    print(f"One thread, uncontended, {a.pairs} pairs, {a.rounds} rounds; median CPU ns per "
          "pair (least to most over the rounds), and the median over the rounds of its ratio to "
          "plain glibc's in the same round; a mutex swap also swaps the rwlocks to pflock\n")
    print("| | mutex lock+unlock | rwlock rdlock+unlock |\n|---|---|---|")
    plain = got["plain glibc"]
    for label, runs in got.items():
        cells = [cell([x[col] for x in runs], [x[col] / p[col] for x, p in zip(runs, plain)])
                 for col in (0, 1)]
        if label.removesuffix(" [baseline]") in rw_only:  # its mutexes stay pthread's
            cells[0] = "-"
        print(f"| {label} | {cells[0]} | {cells[1]} |")


def main(argv=None) -> int:
    a = parse_args(argv)
    bin_dir = Path(a.bin_dir)
    lib, lockserver = bin_dir / "liblockprof.so", bin_dir / "lockserver"
    for need in (lib, lockserver, a.baseline):
        if need is not None and not need.is_file():
            print(f"lockprof_cost: {need} not found (build the release preset first)",
                  file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="lockprof-cost-") as tmp:
        tmp = Path(tmp)
        exe = tmp / "lockprof_cost"
        subprocess.run(["gcc", "-O2", "-Wall", "-o", str(exe), str(HERE / "lockprof_cost.c"),
                        "-lpthread"], check=True, timeout=120)
        locks = swap_locks(lockserver)
        prims = tmp / "primitives"
        subprocess.run(["gcc", "-O2", "-Wall", "-o", str(prims), str(HERE / "primitives.c")],
                       check=True, timeout=120)
        before = primitives(prims)
        got = run_rounds(a, exe, all_configurations(a, lib, tmp, locks))
        after = primitives(prims)
    print_table(a, got, {swap_label(name) for name, kind in locks if kind == "rwlock"})
    print_primitives(before, after)
    return 0


PRIMITIVES = {"locked_add": "a locked add (`lock xadd`)", "xchg": "`xchg` (locked by itself)",
              "lock_cmpxchg": "`lock cmpxchg`", "seq_cst_store": "a seq_cst store (an `xchg`)",
              "store_then_locked_add": "a plain store, then a locked add",
              "release_store": "a release store (a plain `mov`)", "mfence": "`mfence`",
              "rdtsc": "`rdtsc`", "clock_gettime": "`clock_gettime(CLOCK_MONOTONIC)`"}


def primitives(exe: Path) -> dict:
    """{name: ns per operation} of bench/primitives.c on this machine."""
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                         timeout=300).stdout
    return {name: float(ns) for name, ns in (line.split() for line in out.splitlines())}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU not named by /proc/cpuinfo"


def print_primitives(before: dict, after: dict) -> None:
    """This machine's costs of what a lock's fast path is made of, measured before and
    after the rounds (ns per operation, one thread): why its ratios may differ from another
    CPU's. The lock types' counts of each are in docs/strategies.md."""
    print(f"\nThis machine's primitives ({cpu_name()}), ns per operation, one thread, "
          "before / after the rounds:\n")
    print("| operation | ns |\n|---|---|")
    for name, words in PRIMITIVES.items():
        if name in before:
            print(f"| {words} | {before[name]:.1f} / {after.get(name, float('nan')):.1f} |")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print(f"lockprof_cost: {e}", file=sys.stderr)
        sys.exit(1)
