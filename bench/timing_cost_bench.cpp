// timing_cost_bench: what the server's own measuring costs per request, and
// what the two delay modes really sleep (docs/performance.md quotes it).
//
//   build/release/timing_cost_bench [--benchmark_repetitions=3
//       --benchmark_enable_random_interleaving=true ...]
//
// - clock_gettime(CLOCK_MONOTONIC), the unit every other cost is compared to;
// - reading the thread's schedstat (run_delay) through a kept-open descriptor
//   (pread, what the server does) and with open+read+close each time;
// - the per-request cost of CPU-wait sampling as the server does it (the hash
//   decision for every request, two reads for 1 in kCpuWaitSampleEvery);
// - LatencyLog::Record (one uncontended mutex round, the batch bookkeeping);
// - ArtificialDelay::Pause in each mode at 10 us: the counter slept_us is the
//   mean real pause, cpu_us the CPU the pause burnt (the precise mode's spin).
// Single-threaded: the contended cost belongs to the end-to-end runs
// (bench/perf.py), not here.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "common/artificial_delay.h"
#include "common/clock.h"
#include "common/latency_log.h"
#include "common/schedstat.h"

namespace kv {
namespace {

void BM_ClockMonotonic(benchmark::State& state) {
  for ([[maybe_unused]] auto _ : state) benchmark::DoNotOptimize(MonotonicNanos());
}
BENCHMARK(BM_ClockMonotonic);

void BM_SchedStatKeptOpen(benchmark::State& state) {
  SchedStat s;
  if (!ReadThreadSchedStat(&s)) {
    state.SkipWithError("no /proc/thread-self/schedstat");
    return;
  }
  for ([[maybe_unused]] auto _ : state) {
    ReadThreadSchedStat(&s);
    benchmark::DoNotOptimize(s.run_delay_ns);
  }
}
BENCHMARK(BM_SchedStatKeptOpen);

void BM_SchedStatOpenReadClose(benchmark::State& state) {
  SchedStat s;
  for ([[maybe_unused]] auto _ : state) {
    if (!ReadThreadSchedStatFresh(&s)) {
      state.SkipWithError("no /proc/thread-self/schedstat");
      return;
    }
    benchmark::DoNotOptimize(s.run_delay_ns);
  }
}
BENCHMARK(BM_SchedStatOpenReadClose);

// What the request handler adds per request for the CPU-wait split: the
// sampling decision always, two kept-open reads when sampled.
void BM_CpuWaitSampledPerRequest(benchmark::State& state) {
  SchedStat before, after;
  int64_t sum = 0;
  for ([[maybe_unused]] auto _ : state) {
    const int64_t received = MonotonicNanos();
    if (SampleCpuWait(received) && ReadThreadSchedStat(&before) && ReadThreadSchedStat(&after)) {
      sum += after.run_delay_ns - before.run_delay_ns;
    }
  }
  benchmark::DoNotOptimize(sum);
}
BENCHMARK(BM_CpuWaitSampledPerRequest);

// Same, measuring every request (what sampling avoids).
void BM_CpuWaitEveryRequest(benchmark::State& state) {
  SchedStat before, after;
  int64_t sum = 0;
  for ([[maybe_unused]] auto _ : state) {
    ReadThreadSchedStat(&before);
    ReadThreadSchedStat(&after);
    sum += after.run_delay_ns - before.run_delay_ns;
  }
  benchmark::DoNotOptimize(sum);
}
BENCHMARK(BM_CpuWaitEveryRequest);

void BM_LatencyLogRecord(benchmark::State& state) {
  char dir[] = "/tmp/timing_cost_benchXXXXXX";
  if (mkdtemp(dir) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  const std::string file = std::string(dir) + "/times";
  {
    LatencyLogOptions o;
    o.time_file = file;
    LatencyLog log(o);
    if (const Status s = log.Open(); !s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    RequestSample s{1, true, 5000, 100, 200};
    for ([[maybe_unused]] auto _ : state) log.Record(s);  // one timing-file line per 1000
  }
  std::remove(file.c_str());
  rmdir(dir);
}
BENCHMARK(BM_LatencyLogRecord);

void BM_Pause10us(benchmark::State& state) {
  const auto mode = state.range(0) == 0 ? DelayMode::kUsleep : DelayMode::kPrecise;
  state.SetLabel(std::string(DelayModeName(mode)));
  ArtificialDelay delay(std::chrono::microseconds(10), mode);
  const int64_t cpu0 = ThreadCpuNanos();
  for ([[maybe_unused]] auto _ : state) delay.Pause();
  const double n = static_cast<double>(state.iterations());
  state.counters["slept_us"] = delay.MeanSleptNanos() / 1e3;
  state.counters["cpu_us"] = static_cast<double>(ThreadCpuNanos() - cpu0) / n / 1e3;
}
BENCHMARK(BM_Pause10us)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kv

BENCHMARK_MAIN();
