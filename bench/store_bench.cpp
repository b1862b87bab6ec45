// Throughput of every strategy, in process (no sockets), across threads x
// read share x n x delay. Each thread runs a precomputed ring of operations
// (uniform random slot; read with probability read%), so the loop measures
// the store and not the random number generator.
//
// Counters (real time, summed over threads, google/benchmark user_guide.md):
//   ops_per_s : all threads' operations per second of wall time (kIsRate);
//   ns_per_op : wall time one thread spends per operation (kAvgThreadsRate,
//               inverted), i.e. the mean operation latency under that load.
//
// The full cross product (12 strategies x 6 thread counts x 4 read shares x
// 5 sizes x 2 delays = 2880 runs) would take over an hour on 2 cores, so the
// grid is pruned into three slices that each answer one question:
//   scaling : threads {1..32} x read {50,70,95,100} x n {1 (one hot string),
//             1000}, delay 0 -- the cost of the lock itself;
//   size    : n {1,10,100,1000,100000} x read {70,95} x threads {2,8},
//             delay 0 -- contention versus spread (and cache misses at 10^5);
//   delay   : threads {1..32} x read {70,100} x n {1,1000}, delay 10 us --
//             the lab's setting, where the sleep inside the lock dominates.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_strategies.h"
#include "common/clock.h"

namespace kv::bench {
namespace {

// Shared state of the run in progress. Setup() fills it before the threads
// start and Teardown() empties it after they stop, so the benchmark body only
// reads it (no race, and store construction is not timed).
struct SharedRun {
  std::unique_ptr<ArtificialDelay> delay;
  std::unique_ptr<Store> store;
};
SharedRun g_run;
std::vector<std::string> g_names;  // strategy by id (argument "s")

void SetUpRun(const benchmark::State& state) {
  const auto& name = g_names.at(static_cast<std::size_t>(state.range(0)));
  g_run.delay = std::make_unique<ArtificialDelay>(
      std::chrono::microseconds(state.range(3)));
  g_run.store = MakeBenchStore(name, static_cast<std::size_t>(state.range(2)),
                               g_run.delay.get());
}

void TearDownRun(const benchmark::State&) {
  g_run.store.reset();
  g_run.delay.reset();
}

struct Op {
  uint32_t pos;
  bool is_read;
};

void BM_Store(benchmark::State& state) {
  const int read_pct = static_cast<int>(state.range(1));
  const auto n = static_cast<uint32_t>(state.range(2));
  // Per-thread setup: a reproducible op ring, seeded by the thread index.
  constexpr std::size_t kRing = 4096;  // power of two
  std::vector<Op> ring(kRing);
  std::mt19937_64 rng(0x9e3779b97f4a7c15ULL ^
                      static_cast<uint64_t>(state.thread_index()));
  std::uniform_int_distribution<uint32_t> pos(0, n - 1);
  std::uniform_int_distribution<int> pct(0, 99);
  for (Op& op : ring) op = {pos(rng), pct(rng) < read_pct};
  const std::string text =
      "written by benchmark thread " + std::to_string(state.thread_index());
  Store* const store = g_run.store.get();
  Value value;
  AccessTiming timing;
  std::size_t k = 0;
  for (auto _ : state) {
    const Op& op = ring[k++ & (kRing - 1)];
    if (op.is_read) {
      store->Read(op.pos, &value, &timing);
    } else {
      store->Write(op.pos, text, &value, &timing);
    }
    benchmark::DoNotOptimize(value);
  }
  const auto iters = static_cast<double>(state.iterations());
  state.counters["ops_per_s"] = benchmark::Counter(iters, benchmark::Counter::kIsRate);
  state.counters["ns_per_op"] = benchmark::Counter(
      iters * 1e-9, benchmark::Counter::kAvgThreadsRate | benchmark::Counter::kInvert);
}

// The fixed cost inside every Store operation that is not the lock: each
// Read/Write reads the monotonic clock three times for its wait/hold timing.
void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(MonotonicNanos());
  state.counters["ns_per_op"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 1e-9,
      benchmark::Counter::kAvgThreadsRate | benchmark::Counter::kInvert);
}

void Add(std::size_t strategy_id, int read_pct, int n, int delay_us,
         const std::vector<int>& threads, double min_time) {
  auto* b = benchmark::RegisterBenchmark(("Store/" + g_names[strategy_id]).c_str(),
                                         BM_Store);
  b->Args({static_cast<int64_t>(strategy_id), read_pct, n, delay_us})
      ->ArgNames({"s", "read", "n", "delay_us"})
      ->Setup(SetUpRun)
      ->Teardown(TearDownRun)
      ->UseRealTime()
      ->MinWarmUpTime(0.01)  // first touches of a fresh store are not timed
      ->MinTime(min_time);
  for (const int t : threads) b->Threads(t);
}

}  // namespace

void RegisterStoreBenchmarks(bool quick) {
  const double min_time = quick ? 0.01 : 0.05;
  g_names = BenchStrategyNames();
  struct Setting {
    int read_pct, n, delay_us, threads;
  };
  std::vector<Setting> grid;
  if (quick) {
    for (const int t : {1, 2}) grid.push_back({95, 1000, 0, t});
  } else {
    const std::vector<int> all_threads{1, 2, 4, 8, 16, 32};
    // scaling slice
    for (const int read : {50, 70, 95, 100}) {
      for (const int n : {1, 1000}) {
        for (const int t : all_threads) grid.push_back({read, n, 0, t});
      }
    }
    // size slice (n = 1 and 1000 are in the scaling slice)
    for (const int read : {70, 95}) {
      for (const int n : {10, 100, 100000}) {
        for (const int t : {2, 8}) grid.push_back({read, n, 0, t});
      }
    }
    // delay slice
    for (const int read : {70, 100}) {
      for (const int n : {1, 1000}) {
        for (const int t : all_threads) grid.push_back({read, n, 10, t});
      }
    }
  }
  benchmark::RegisterBenchmark("Clock/MonotonicNanos", BM_ClockRead)
      ->UseRealTime()
      ->MinTime(min_time);
  // Strategies innermost: all strategies of one setting run back to back, so
  // the machine's slow drifts (shared/PERF.md) hit them alike.
  for (const Setting& g : grid) {
    for (std::size_t s = 0; s < g_names.size(); ++s) {
      Add(s, g.read_pct, g.n, g.delay_us, {g.threads}, min_time);
    }
  }
}

}  // namespace kv::bench
