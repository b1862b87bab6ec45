// Writer starvation: how long does a writer wait for the lock while readers
// keep one hot string busy? Reader-preferring rwlocks (std::shared_mutex =
// default glibc pthread_rwlock_t: one-rwlock) let new readers in while a
// writer waits, so with overlapping readers the writer can wait until they all
// happen to be out at once; writer-preferring ones (one-rwlock-wpref) block
// new readers behind a waiting writer; phase-fair ones (one-pflock) alternate
// read and write phases, so a writer waits for at most one read phase; BRAVO
// (one-bravo) is the reader-preferring pthread rwlock with a reader fast path.
//
// One benchmark iteration is a fixed-length experiment (kRunMs): `readers`
// threads read slot 0 back to back; one writer writes slot 0 once every
// kWriterGapUs and records each write's lock wait (AccessTiming::wait_ns).
// When the run ends the readers stop, so a writer starved for the whole run
// still finishes (its wait is then about the run length). Reported counters:
// writer wait mean / p99 / max in microseconds, writes and reads per second.
// Manual time = the run length.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_strategies.h"
#include "common/clock.h"

namespace kv::bench {
namespace {

constexpr int64_t kWriterGapUs = 1000;

// One run of run_ms: `readers` threads read slot 0 back to back while one
// writer writes it every kWriterGapUs, appending each write's lock wait to
// *waits. Returns the run's length in seconds and adds the reads to *reads_total.
double RunStarvation(const std::string& strategy, int readers, int64_t delay_us, int run_ms,
                     std::vector<int64_t>* waits, uint64_t* reads_total) {
  ArtificialDelay delay{std::chrono::microseconds(delay_us)};
  auto store = MakeBenchStore(strategy, 1, &delay);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(readers));
  for (int r = 0; r < readers; ++r) {
    threads.emplace_back([&] {
      Value v;
      AccessTiming t;
      uint64_t mine = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        store->Read(0, &v, &t);
        ++mine;
      }
      reads.fetch_add(mine);
    });
  }
  const int64_t start = MonotonicNanos();
  const int64_t end = start + int64_t{run_ms} * 1'000'000;
  std::thread writer([&] {
    Value v;
    AccessTiming t;
    for (uint64_t i = 0; MonotonicNanos() < end; ++i) {
      store->Write(0, "writer " + std::to_string(i), &v, &t);
      waits->push_back(t.wait_ns);
      std::this_thread::sleep_for(std::chrono::microseconds(kWriterGapUs));
    }
  });
  std::this_thread::sleep_until(std::chrono::steady_clock::now() +
                                std::chrono::milliseconds(run_ms));
  // The writer may still be waiting; it gets in once the readers stop.
  while (MonotonicNanos() < end) std::this_thread::yield();
  stop = true;
  writer.join();
  for (auto& t : threads) t.join();
  const double run_s = static_cast<double>(MonotonicNanos() - start) / 1e9;
  *reads_total += reads.load();
  return run_s;
}

// The writer's waits (sorted here) and the reads as the benchmark's counters.
void SetStarvationCounters(benchmark::State& state, std::vector<int64_t>* waits,
                           uint64_t reads_total) {
  std::sort(waits->begin(), waits->end());
  double mean = 0;
  for (const int64_t w : *waits) mean += static_cast<double>(w);
  mean = waits->empty() ? 0 : mean / static_cast<double>(waits->size());
  const auto pick = [&](double q) {
    if (waits->empty()) return 0.0;
    const auto i = static_cast<std::size_t>(q * static_cast<double>(waits->size() - 1));
    return static_cast<double>((*waits)[i]) / 1e3;
  };
  state.counters["writer_wait_mean_us"] = mean / 1e3;
  state.counters["writer_wait_p50_us"] = pick(0.5);
  state.counters["writer_wait_p99_us"] = pick(0.99);
  state.counters["writer_wait_max_us"] = pick(1.0);
  state.counters["writes"] = static_cast<double>(waits->size());
  state.counters["writes_per_s"] =
      benchmark::Counter(static_cast<double>(waits->size()), benchmark::Counter::kIsRate);
  state.counters["reads_per_s"] =
      benchmark::Counter(static_cast<double>(reads_total), benchmark::Counter::kIsRate);
}

void BM_WriterStarvation(benchmark::State& state, const std::string& strategy, int run_ms) {
  const int readers = static_cast<int>(state.range(0));
  const int64_t delay_us = state.range(1);
  std::vector<int64_t> waits;
  uint64_t reads_total = 0;
  for ([[maybe_unused]] auto _ : state) {
    state.SetIterationTime(
        RunStarvation(strategy, readers, delay_us, run_ms, &waits, &reads_total));
  }
  SetStarvationCounters(state, &waits, reads_total);
}

}  // namespace

void RegisterStarvationBenchmarks(bool quick) {
  const int run_ms = quick ? 50 : 400;
  for (const char* strategy : {"one-rwlock", "one-rwlock-wpref", "one-pflock", "one-bravo",
                               "one-mutex", "seqlock-per-slot", "pointer-swap"}) {
    auto* b = benchmark::RegisterBenchmark(
        (std::string("WriterStarvation/") + strategy).c_str(),
        [strategy, run_ms](benchmark::State& s) { BM_WriterStarvation(s, strategy, run_ms); });
    b->ArgNames({"readers", "delay_us"})
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
    if (quick) {
      b->Args({2, 10});
    } else {
      for (const int readers : {2, 4, 8}) {
        for (const int delay : {0, 10}) b->Args({readers, delay});
      }
    }
  }
}

}  // namespace kv::bench
