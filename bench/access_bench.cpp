// The cost of ONE store access on one thread, in CPU time: opt-in with
// `kv_bench --access` (not part of the default grid or the report).
//
// BM_Store (store_bench.cpp) measures wall-clock throughput of many threads,
// which on a small shared machine mostly measures the scheduler. This one
// answers a narrower question that a layout change (each slot's
// lock and value in one cache-line-aligned record) is about: how long does a
// single uncontended read or write take when the slots are spread over
// memory (n up to 10^6: 10^6 x 192 bytes does not fit in any cache)? One
// thread runs a precomputed ring of uniformly random positions; Google
// Benchmark's default CPU-time clock makes preemption by other processes
// count far less than in a wall-clock window.
//
//   kv_bench --access --benchmark_filter='Access/' --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_strategies.h"

namespace kv::bench {
namespace {

std::vector<std::string> g_access_names;  // strategy by id (argument "s")

// Google Benchmark calls a benchmark several times (to pick an iteration
// count, and once per repetition); building a store of 10^6 slots each time
// would dominate the run, so the last store built is kept and reused while
// the strategy and n stay the same (writes change its contents, not its
// layout).
Store* CachedStore(std::size_t strategy_id, uint32_t n) {
  static ArtificialDelay no_delay{std::chrono::microseconds(0)};
  static std::size_t cached_id = ~std::size_t{0};
  static uint32_t cached_n = 0;
  static std::unique_ptr<Store> cached;
  if (cached == nullptr || cached_id != strategy_id || cached_n != n) {
    cached.reset();  // free the old one first: two 10^6 stores are 400 MB
    cached = MakeBenchStore(g_access_names.at(strategy_id), n, &no_delay);
    cached_id = strategy_id;
    cached_n = n;
  }
  return cached.get();
}

void BM_Access(benchmark::State& state) {
  const auto n = static_cast<uint32_t>(state.range(1));
  const int read_pct = static_cast<int>(state.range(2));
  Store* store = CachedStore(static_cast<std::size_t>(state.range(0)), n);
  constexpr std::size_t kRing = std::size_t{1} << 16;  // power of two
  std::vector<uint32_t> ring(kRing);                   // position << 1 | is_write
  // NOLINTNEXTLINE(cert-msc32-c,cert-msc51-cpp): fixed, so every strategy and run gets one ring
  std::mt19937_64 rng(0x9e3779b97f4a7c15ULL);
  std::uniform_int_distribution<uint32_t> pos(0, n - 1);
  std::uniform_int_distribution<int> pct(0, 99);
  for (uint32_t& op : ring) op = pos(rng) << 1 | (pct(rng) >= read_pct ? 1 : 0);
  const std::string text = "written by the access benchmark";
  Value value;
  AccessTiming timing;
  std::size_t k = 0;
  for ([[maybe_unused]] auto _ : state) {
    const uint32_t op = ring[k++ & (kRing - 1)];
    if ((op & 1) == 0) {
      store->Read(op >> 1, &value, &timing);
    } else {
      store->Write(op >> 1, text, &value, &timing);
    }
    benchmark::DoNotOptimize(value);
  }
}

}  // namespace

void RegisterAccessBenchmarks(bool quick) {
  g_access_names = BenchStrategyNames();
  const std::vector<int> sizes =
      quick ? std::vector<int>{1000} : std::vector<int>{1000, 100000, 1000000};
  for (const int read_pct : {100, 70}) {
    for (const int n : sizes) {
      for (std::size_t s = 0; s < g_access_names.size(); ++s) {
        benchmark::RegisterBenchmark(("Access/" + g_access_names[s]).c_str(), BM_Access)
            ->Args({static_cast<int64_t>(s), n, read_pct})
            ->ArgNames({"s", "n", "read"})
            ->MinTime(quick ? 0.01 : 0.2);
      }
    }
  }
}

}  // namespace kv::bench
