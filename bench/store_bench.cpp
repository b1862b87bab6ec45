// Throughput of every strategy, in process (no sockets), across threads x
// read share x n x delay. Each thread runs a precomputed ring of operations
// (uniform random slot; read with probability read%), so the loop measures
// the store and not the random number generator.
//
// Counters (wall time of a fixed window with all threads running; see
// BM_Store for why not ->Threads()):
//   ops_per_s : all threads' operations per second of wall time;
//   ns_per_op : wall time one thread spends per operation (threads x wall /
//               ops), i.e. the mean operation latency under that load.
//
// The full cross product (34 strategies x 6 thread counts x 4 read shares x
// 5 sizes x 2 delays = 8160 runs) would take hours on 2 cores, so the
// grid is pruned into three slices that each answer one question:
//   scaling : threads {1..32} x read {50,70,95,100} x n {1 (one hot string),
//             1000}, delay 0 -- the cost of the lock itself;
//   size    : n {1,10,100,1000,100000} x read {70,95} x threads {2,8},
//             delay 0 -- contention versus spread (and cache misses at 10^5);
//   delay   : threads {1..32} x read {70,100} x n {1,1000}, delay 10 us --
//             the lab's setting, where the sleep inside the lock dominates.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_strategies.h"
#include "common/clock.h"

namespace kv::bench {
namespace {

struct Op {
  uint32_t pos;
  bool is_read;
};

// Per-thread result, in its own cache line.
struct alignas(64) ThreadCount {
  uint64_t ops = 0;
};

std::vector<std::string> g_names;  // strategy by id (argument "s")
double g_window_s = 0.05;          // measured wall time per repetition

// One repetition = a fixed wall-clock window with ALL threads running.
//
// Why not Google Benchmark's ->Threads(t): it times each thread from the
// moment that thread passes the start barrier and averages those times. With
// more threads than cores (2 here) most threads start late and then run in a
// burst, so the average thread time is far below the wall time and ops/s came
// out up to ~threads/cores too high (300 M ops/s on 2 cores in a first run).
// Here the main thread releases all workers at once, sleeps for the window,
// raises `stop`, and divides the operations done by the wall time between
// release and stop (UseManualTime). Each worker builds its op ring (uniform
// random slot, read with probability read%, seeded by its index) before the
// release, so setup is not timed.
void BM_Store(benchmark::State& state) {
  const std::string& name = g_names.at(static_cast<std::size_t>(state.range(0)));
  const int read_pct = static_cast<int>(state.range(1));
  const auto n = static_cast<uint32_t>(state.range(2));
  const int threads = static_cast<int>(state.range(4));
  uint64_t total_ops = 0;
  double total_s = 0;
  for (auto _ : state) {
    ArtificialDelay delay{std::chrono::microseconds(state.range(3))};
    std::unique_ptr<Store> store = MakeBenchStore(name, n, &delay);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false}, stop{false};
    std::vector<ThreadCount> counts(static_cast<std::size_t>(threads));
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        constexpr std::size_t kRing = 4096;  // power of two
        std::vector<Op> ring(kRing);
        std::mt19937_64 rng(0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(t));
        std::uniform_int_distribution<uint32_t> pos(0, n - 1);
        std::uniform_int_distribution<int> pct(0, 99);
        for (Op& op : ring) op = {pos(rng), pct(rng) < read_pct};
        const std::string text = "written by benchmark thread " + std::to_string(t);
        Value value;
        AccessTiming timing;
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        uint64_t k = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          const Op& op = ring[k++ & (kRing - 1)];
          if (op.is_read) {
            store->Read(op.pos, &value, &timing);
          } else {
            store->Write(op.pos, text, &value, &timing);
          }
          benchmark::DoNotOptimize(value);
        }
        counts[static_cast<std::size_t>(t)].ops = k;
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    const int64_t start = MonotonicNanos();
    go.store(true, std::memory_order_release);
    std::this_thread::sleep_for(std::chrono::duration<double>(g_window_s));
    stop.store(true, std::memory_order_relaxed);
    const int64_t end = MonotonicNanos();
    for (auto& w : workers) w.join();
    const double wall_s = static_cast<double>(end - start) / 1e9;
    state.SetIterationTime(wall_s);
    for (const ThreadCount& c : counts) total_ops += c.ops;
    total_s += wall_s;
  }
  const double ops = static_cast<double>(total_ops);
  state.counters["ops_per_s"] = ops / total_s;
  state.counters["ns_per_op"] = ops > 0 ? total_s * 1e9 * threads / ops : 0;
}

// The fixed cost inside every Store operation that is not the lock: each
// Read/Write reads the monotonic clock three times for its wait/hold timing.
void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(MonotonicNanos());
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kAvgThreadsRate | benchmark::Counter::kInvert);
}

void Add(std::size_t strategy_id, int read_pct, int n, int delay_us, int threads) {
  benchmark::RegisterBenchmark(("Store/" + g_names[strategy_id]).c_str(), BM_Store)
      ->Args({static_cast<int64_t>(strategy_id), read_pct, n, delay_us, threads})
      ->ArgNames({"s", "read", "n", "delay_us", "threads"})
      ->UseManualTime()
      ->Iterations(1);
}

}  // namespace

void RegisterStoreBenchmarks(bool quick) {
  const double min_time = quick ? 0.01 : 0.05;
  g_window_s = quick ? 0.01 : 0.05;
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
      Add(s, g.read_pct, g.n, g.delay_us, g.threads);
    }
  }
}

}  // namespace kv::bench
