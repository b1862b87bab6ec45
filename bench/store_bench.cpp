// Throughput of every strategy, in process (no sockets), across threads x
// read share x n x delay. Each thread runs a precomputed ring of operations
// (uniform random slot; read with probability read%), so the loop measures
// the store and not the random number generator.
//
// Counters (wall time of a fixed window with all threads running; see
// BM_Store for why not ->Threads()):
//   ops_per_s : all threads' operations per second of wall time;
//   ns_per_op : wall time one thread spends per operation (threads x wall /
//               ops), i.e. the mean operation latency under that load;
//   fair_jain, fair_rsd, fair_max_min : how evenly the threads' operation
//               counts came out (client/fairness.h), the mean over the run's
//               iterations;
//   wait_p50_ns, wait_p99_ns, wait_p999_ns, wait_samples : the lock-wait
//               quantiles of the sampled accesses, all threads merged (the
//               client's LatencyHistogram, one per thread).
// The stores time 1 access in 64 with the cycle counter (BenchTiming::
// kSampled): timing every access with clock_gettime (three reads, ~20 ns
// each) cost more than most locks. StoreTiming/* compares the three timing
// modes on one thread and TimerCost/* the two timers alone.
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

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/bench_strategies.h"
#include "client/fairness.h"
#include "client/latency_histogram.h"
#include "common/access_timer.h"
#include "common/clock.h"

namespace kv::bench {
namespace {

struct Op {
  uint32_t pos;
  bool is_read;
};

// One operation of the workload on the store: every benchmark loop does the same.
inline void Apply(Store& store, const Op& op, const std::string& text, Value* value,
                  AccessTiming* timing) {
  if (op.is_read) {
    store.Read(op.pos, value, timing);
  } else {
    store.Write(op.pos, text, value, timing);
  }
}

// Per-thread result, in its own cache lines.
struct alignas(64) ThreadCount {
  uint64_t ops = 0;
  LatencyHistogram waits;
};

constexpr std::size_t kRing = 4096;  // power of two

// Each thread's op ring: uniform random slot, read with probability read%,
// seeded by the thread's index.
std::vector<Op> MakeRing(int t, uint32_t n, int read_pct) {
  std::vector<Op> ring(kRing);
  std::mt19937_64 rng(0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(t));
  std::uniform_int_distribution<uint32_t> pos(0, n - 1);
  std::uniform_int_distribution<int> pct(0, 99);
  for (Op& op : ring) op = {pos(rng), pct(rng) < read_pct};
  return ring;
}

// Adds one run's fairness and merged waits to the sums in `f` and `waits`.
void AddRunStats(const std::vector<ThreadCount>& counts, Fairness* f, LatencyHistogram* waits) {
  std::vector<uint64_t> ops;
  for (const ThreadCount& c : counts) {
    ops.push_back(c.ops);
    waits->Merge(c.waits);
  }
  const Fairness run = FairnessOf(ops);
  f->jain += run.jain;
  f->rsd += run.rsd;
  f->max_min += run.max_min;
}

void SetFairnessCounters(benchmark::State& state, const Fairness& sum,
                         const LatencyHistogram& waits) {
  const auto runs = static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["fair_jain"] = sum.jain / runs;
  state.counters["fair_rsd"] = sum.rsd / runs;
  state.counters["fair_max_min"] = sum.max_min / runs;
  state.counters["wait_p50_ns"] = static_cast<double>(waits.Percentile(0.5));
  state.counters["wait_p99_ns"] = static_cast<double>(waits.Percentile(0.99));
  state.counters["wait_p999_ns"] = static_cast<double>(waits.Percentile(0.999));
  state.counters["wait_samples"] = static_cast<double>(waits.count());
}

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
  Fairness fairness;
  LatencyHistogram waits;
  for ([[maybe_unused]] auto _ : state) {
    ArtificialDelay delay{std::chrono::microseconds(state.range(3))};
    std::unique_ptr<Store> store = MakeBenchStore(name, n, &delay, BenchTiming::kSampled);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false}, stop{false};
    std::vector<ThreadCount> counts(static_cast<std::size_t>(threads));
    std::vector<std::thread> workers;
    workers.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const std::vector<Op> ring = MakeRing(t, n, read_pct);
        ThreadCount& mine = counts[static_cast<std::size_t>(t)];
        const std::string text = "written by benchmark thread " + std::to_string(t);
        Value value;
        AccessTiming timing;
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        uint64_t k = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          Apply(*store, ring[k++ & (kRing - 1)], text, &value, &timing);
          benchmark::DoNotOptimize(value);
          if (timing.wait_ns >= 0) mine.waits.Record(static_cast<uint64_t>(timing.wait_ns));
        }
        mine.ops = k;
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
    AddRunStats(counts, &fairness, &waits);
  }
  const double ops = static_cast<double>(total_ops);
  state.counters["ops_per_s"] = ops / total_s;
  state.counters["ns_per_op"] = ops > 0 ? total_s * 1e9 * threads / ops : 0;
  SetFairnessCounters(state, fairness, waits);
}

// One thread's cost per operation of the unprotected store (or one-mutex)
// under each timing mode: what the clock adds to an operation, and what
// sampling leaves of it. Same ring as BM_Store (n 1000, 95% reads).
void BM_StoreTiming(benchmark::State& state, const std::string& name, BenchTiming mode) {
  constexpr uint32_t kN = 1000;
  ArtificialDelay delay{std::chrono::microseconds(0)};
  std::unique_ptr<Store> store = MakeBenchStore(name, kN, &delay, mode);
  const std::vector<Op> ring = MakeRing(0, kN, 95);
  const std::string text = "written by benchmark thread 0";
  Value value;
  AccessTiming timing;
  uint64_t k = 0;
  for ([[maybe_unused]] auto _ : state) {
    Apply(*store, ring[k++ & (kRing - 1)], text, &value, &timing);
    benchmark::DoNotOptimize(value);
    benchmark::DoNotOptimize(timing);
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kAvgThreadsRate | benchmark::Counter::kInvert);
}

// The timers alone: one read of the cycle counter (CycleTicks(): rdtsc on
// x86) and one clock_gettime(CLOCK_MONOTONIC).
void BM_TimerCost(benchmark::State& state, bool cycle_counter) {
  if (cycle_counter) {
    state.counters["ns_per_tick"] = NanosPerTick();
    for ([[maybe_unused]] auto _ : state) benchmark::DoNotOptimize(CycleTicks());
  } else {
    for ([[maybe_unused]] auto _ : state) benchmark::DoNotOptimize(MonotonicNanos());
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kAvgThreadsRate | benchmark::Counter::kInvert);
}

// The fixed cost inside every Store operation that is not the lock: each
// Read/Write reads the monotonic clock three times for its wait/hold timing.
void BM_ClockRead(benchmark::State& state) {
  for ([[maybe_unused]] auto _ : state) benchmark::DoNotOptimize(MonotonicNanos());
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
  benchmark::RegisterBenchmark(KV_HAVE_RDTSC ? "TimerCost/rdtsc" : "TimerCost/cycle-fallback",
                               BM_TimerCost, true)
      ->UseRealTime()
      ->MinTime(min_time);
  benchmark::RegisterBenchmark("TimerCost/clock_gettime", BM_TimerCost, false)
      ->UseRealTime()
      ->MinTime(min_time);
  const std::pair<const char*, BenchTiming> modes[] = {{"timed", BenchTiming::kTimed},
                                                       {"sampled", BenchTiming::kSampled},
                                                       {"untimed", BenchTiming::kUntimed}};
  for (const char* name : {kUnprotected, "one-mutex"}) {
    for (const auto& [label, mode] : modes) {
      benchmark::RegisterBenchmark(
          (std::string("StoreTiming/") + name + "/timing:" + label).c_str(), BM_StoreTiming,
          std::string(name), mode)
          ->UseRealTime()
          ->MinTime(min_time);
    }
  }
  // Strategies innermost: all strategies of one setting run back to back, so
  // the machine's slow drifts hit them alike.
  for (const Setting& g : grid) {
    for (std::size_t s = 0; s < g_names.size(); ++s) {
      Add(s, g.read_pct, g.n, g.delay_us, g.threads);
    }
  }
}

// The scaling sweep (kv_bench --scaling): the four lab strategies and every lock family
// for the whole array, at 1, 2, 4, ... threads up to twice this machine's cores (the last
// step twice the cores itself when that is no power of two), read 70 % and 95 %, one hot
// string and 1000, no delay: where each lock stops scaling, and how fair it stays, on a
// machine with more cores than the project's. About 11 strategies x 2 x 2 x log2(2 x cores)
// runs of one window each per repetition.
void RegisterScalingBenchmarks() {
  g_window_s = 0.05;
  g_names = BenchStrategyNames();
  const char* const wanted[] = {"one-mutex",       "mutex-per-slot", "one-rwlock",
                                "rwlock-per-slot", "one-ticketlock", "one-ttas-backoff",
                                "one-mcs",         "one-clh",        "one-pflock",
                                "one-bravo",       "one-futex-mutex"};
  const int top = 2 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> threads;
  for (int t = 1; t < top; t *= 2) threads.push_back(t);
  threads.push_back(top);
  for (const int read : {70, 95}) {
    for (const int n : {1, 1000}) {
      for (const int t : threads) {
        for (const char* name : wanted) {
          for (std::size_t s = 0; s < g_names.size(); ++s) {
            if (g_names[s] == name) Add(s, read, n, 0, t);
          }
        }
      }
    }
  }
}

}  // namespace kv::bench
