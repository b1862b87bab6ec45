#!/usr/bin/env bash
# Builds kv_bench (release, own build folder) and runs the full microbenchmark
# grid, writing Google Benchmark JSON to results/microbench/.
#
#   bench/run-microbench.sh                 # full grid, ~15 min on 2 cores
#   bench/run-microbench.sh --quick         # a few seconds (CI smoke run)
#   BUILD_DIR=build/x OUT=path.json bench/run-microbench.sh [kv_bench flags]
#
# Extra arguments go to kv_bench (e.g. --benchmark_filter=REGEX).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build/microbench}
quick=0
for a in "$@"; do [[ $a == --quick ]] && quick=1; done
if [[ $quick == 1 ]]; then
  out=${OUT:-$build_dir/microbench-quick.json}
else
  out=${OUT:-results/microbench/microbench.json}
fi
cmake --preset release -B "$build_dir" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target kv_bench
mkdir -p "$(dirname "$out")"
sha=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git diff --quiet HEAD -- common bench 2>/dev/null && echo clean || echo dirty)
echo "kv_bench -> $out (git $sha, $dirty)" >&2
# 3 repetitions in random order (shared/PERF.md: compare only interleaved runs);
# the analysis takes the median of the three.
"$build_dir/kv_bench" --benchmark_repetitions=3 \
  --benchmark_enable_random_interleaving=true "$@" \
  --benchmark_out="$out" --benchmark_out_format=json \
  --benchmark_context=git_sha="$sha" --benchmark_context=tree="$dirty" \
  --benchmark_counters_tabular=true
echo "wrote $out" >&2
