#!/usr/bin/env bash
# Builds kv_bench (release, own build folder) and runs the full microbenchmark
# grid, writing Google Benchmark JSON to results/microbench/microbench.json.gz
# (gzipped: the JSON is some 30 MB; gzip -n -9, so the same JSON gives the same
# bytes; the analysis reads NAME or NAME.gz, analysis/load.py raw_path).
#
#   bench/run-microbench.sh                 # full grid, ~20 min on 2 cores
#   bench/run-microbench.sh --quick         # a few seconds (CI smoke run), plain JSON
#   bench/run-microbench.sh --scaling       # the lock families and the lab's four at 1, 2, 4
#                                           # ... threads up to twice this machine's cores
#                                           # (REPS 3): results/microbench/scaling.json and
#                                           # its figure scaling.png; a minute on 2 cores
#   BUILD_DIR=build/x OUT=path.json REPS=7 bench/run-microbench.sh [kv_bench flags]
#
# OUT ending in .gz is written gzipped, any other name as plain JSON. Extra
# arguments go to kv_bench (e.g. --benchmark_filter=REGEX).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build/microbench}
quick=0
scaling=0
for a in "$@"; do
  [[ $a == --quick ]] && quick=1
  [[ $a == --scaling ]] && scaling=1
done
if [[ $scaling == 1 ]]; then reps=${REPS:-3}; else reps=${REPS:-7}; fi
if ! [[ $reps =~ ^[1-9][0-9]{0,2}$ ]]; then
  echo "run-microbench.sh: REPS must be a whole number from 1 to 999, not '$reps'" >&2
  exit 2
fi
if [[ $scaling == 1 ]]; then
  out=${OUT:-results/microbench/scaling.json}
elif [[ $quick == 1 ]]; then
  out=${OUT:-$build_dir/microbench-quick.json}
else
  out=${OUT:-results/microbench/microbench.json.gz}
fi
json=${out%.gz}  # what kv_bench writes; gzipped into $out when $out ends in .gz
cmake --preset release -B "$build_dir" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target kv_bench
mkdir -p "$(dirname "$out")"
sha=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git diff --quiet HEAD -- common bench 2>/dev/null && echo clean || echo dirty)
echo "kv_bench -> $out (git $sha, $dirty)" >&2
# REPS (default 7) repetitions in random order (a noisy machine: compare only
# interleaved runs); the analysis takes their median and min-max spread. Seven,
# not three: a lock whose cost vanishes beside the 10 us delay ties with the
# floor, and with 3 repetitions 1 tie in 20 lands wholly above it by chance
# (1 in 3432 with 7), across some 400 such ties in the grid.
"$build_dir/kv_bench" --benchmark_repetitions="$reps" \
  --benchmark_enable_random_interleaving=true "$@" \
  --benchmark_out="$json" --benchmark_out_format=json \
  --benchmark_context=git_sha="$sha" --benchmark_context=tree="$dirty" \
  --benchmark_counters_tabular=true
if [[ $out != "$json" ]]; then
  gzip -n -9 -f "$json"  # -> $out, and $json removed: no stale plain copy beside it
fi
echo "wrote $out" >&2
if [[ $scaling == 1 ]]; then
  py=.venv/bin/python
  [[ -x $py ]] || py=python3
  "$py" bench/plot_scaling.py "$json" "${json%.json}.png"
fi
