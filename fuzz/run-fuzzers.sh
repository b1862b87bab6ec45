#!/usr/bin/env bash
# Bounded libFuzzer runs of every fuzz target. Called by
# `./lockbench test`; also fine by hand.
#
#   fuzz/run-fuzzers.sh                 configure + build the `fuzz` preset,
#                                       then fuzz each target for 60 s, side by side
#   LOCKBENCH_FUZZ_SECONDS=10 fuzz/run-fuzzers.sh     shorter runs
#   LOCKBENCH_FUZZ_BUILD_DIR=build/x fuzz/run-fuzzers.sh   another build folder
#   fuzz/run-fuzzers.sh --build-only    configure and build, fuzz nothing
#   fuzz/run-fuzzers.sh --by-work       bounded by inputs, not time: each target runs the
#                                       inputs of RUNS below (what 60 s gives it on one
#                                       core here), at most 15 min; the gate's way, which
#                                       runs it at idle priority beside the tests
#
# Each target starts from its committed seed corpus fuzz/corpus/<target>/
# (read only) and keeps what it discovers in <build>/fuzz-corpus/<target>/.
# A crash, leak, sanitizer report, timeout or broken invariant stops that
# target, leaves the input in <build>/fuzz-artifacts/, and makes this script
# exit 1 after all targets ran. Turn such an input into a regression test
# (common/*_test.cpp) before fixing the bug.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=${LOCKBENCH_FUZZ_SECONDS:-60}
BUILD_DIR=${LOCKBENCH_FUZZ_BUILD_DIR:-build/fuzz}
TARGETS=(fuzz_parse_request fuzz_request_handler)
BUILD_ONLY=0
BY_WORK=0
# Inputs per target for --by-work: about 60 s of one core of the 2-core CI machine each.
declare -A RUNS=([fuzz_parse_request]=2000000 [fuzz_request_handler]=150000)
case "${1:-}" in
  "") ;;
  --build-only) BUILD_ONLY=1 ;;
  --by-work) BY_WORK=1; SECONDS_EACH=900 ;;
  *) echo "run-fuzzers.sh: unknown option '$1' (--build-only or --by-work)" >&2; exit 2 ;;
esac

log() { printf '\033[1m[fuzz]\033[0m %s\n' "$*" >&2; }

if ! command -v clang++ >/dev/null; then
  log "clang++ not found (Debian: apt-get install clang libclang-rt-NN-dev, NN its major version)"
  exit 1
fi

log "configuring and building the fuzz preset in $BUILD_DIR"
cmake --preset fuzz -B "$BUILD_DIR" >/dev/null
cmake --build "$BUILD_DIR" --target "${TARGETS[@]}"
[ "$BUILD_ONLY" -eq 0 ] || exit 0

fuzz_one() {  # TARGET: one bounded run; its own log, corpus and exit status
  local t=$1 work="$BUILD_DIR/fuzz-corpus/$1" artifacts="$BUILD_DIR/fuzz-artifacts"
  mkdir -p "$work" "$artifacts"
  local bound=()
  if [ "$BY_WORK" -eq 1 ]; then
    bound=(-runs="${RUNS[$t]}")
    log "$t: ${RUNS[$t]} inputs (at most ${SECONDS_EACH} s), -max_len=200"
  else
    log "$t: ${SECONDS_EACH} s, -max_len=200"
  fi
  # New units go to the first (scratch) folder; the seeds are only read.
  if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
       UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
       "$BUILD_DIR/$t" -max_total_time="$SECONDS_EACH" "${bound[@]}" -max_len=200 \
         -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
         -artifact_prefix="$artifacts/$t-" \
         "$work" "fuzz/corpus/$t" 2>"$BUILD_DIR/$t.log"; then
    log "$t: FAILED (see $BUILD_DIR/$t.log and $artifacts/)"
    tail -n 40 "$BUILD_DIR/$t.log" >&2
    return 1
  fi
  log "$t: ok; $(grep -E '^stat::number_of_executed_units' "$BUILD_DIR/$t.log" | awk '{print $2}') inputs run, $(grep -cE '^#[0-9]+.*(NEW|REDUCE)' "$BUILD_DIR/$t.log" || true) new/reduced units"
}

# The targets side by side: each libFuzzer run is one thread, so with one core each the
# bounded time is spent once, not once per target.
pids=()
for t in "${TARGETS[@]}"; do
  fuzz_one "$t" &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
