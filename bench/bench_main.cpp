// kv_bench: in-process microbenchmarks of the locking strategies.
//
//   kv_bench [--quick] [--access] [--scaling] [Google Benchmark flags, e.g.
//             --benchmark_out=x.json --benchmark_out_format=json
//             --benchmark_filter=REGEX]
//
// --quick registers a small subset (a few seconds; for CI). Without it the
// full pruned grid runs (about 3 minutes per repetition on 2 cores for the 35
// stores; bench/run-microbench.sh runs 7 interleaved, about 20 minutes); see
// bench/run-microbench.sh and docs/strategies.md. --access runs only the
// single-thread cost of one access (access_bench.cpp) instead; --scaling only
// the scaling sweep (store_bench.cpp RegisterScalingBenchmarks: threads up to
// twice this machine's cores).
#include <benchmark/benchmark.h>

#include <string_view>
#include <vector>

#include "bench/bench_strategies.h"
#include "bench/store_floor.h"
#include "common/access_timer.h"
#include "common/store_one_mutex.h"
#include "common/strategy_registry.h"
#include "tests/store_unlocked.h"

namespace kv::bench {

std::vector<std::string> BenchStrategyNames() {
  std::vector<std::string> names{kUnprotected, kUnprotectedRacy};
  for (const StrategyInfo& s : AllStrategies()) names.emplace_back(s.name);
  return names;
}

namespace {

// make(policy) for the timing policy type that `timing` names; make is a
// generic lambda that builds a store with decltype(policy) as its Timing.
template <typename Make>
std::unique_ptr<Store> WithPolicy(BenchTiming timing, Make make) {
  switch (timing) {
    case BenchTiming::kTimed:
      return make(Timed{});
    case BenchTiming::kSampled:
      return make(Sampled64{});
    case BenchTiming::kUntimed:
      break;
  }
  return make(NoTiming{});
}

}  // namespace

std::unique_ptr<Store> MakeBenchStore(const std::string& name, std::size_t n,
                                      ArtificialDelay* delay, BenchTiming timing) {
  if (name == kUnprotected) {
    return WithPolicy(timing,
                      [&](auto policy) { return FloorStore<decltype(policy)>::Create(n, delay); });
  }
  if (name == kUnprotectedRacy) {
    return WithPolicy(timing, [&](auto policy) {
      return UnlockedStore::WithTiming<decltype(policy)>::Create(n, delay);
    });
  }
  if (timing == BenchTiming::kUntimed && name == OneMutexStore::kStrategyName) {
    return OneMutexStore::WithTiming<NoTiming>::Create(n, delay);
  }
  const StrategyInfo* s = FindStrategy(name);
  if (timing != BenchTiming::kTimed) {
    return s->create_sampled(n, delay, StrategyConfig{});
  }
  return s->create(n, delay, StrategyConfig{});
}

}  // namespace kv::bench

int main(int argc, char** argv) {
  bool quick = false;
  bool access = false;
  bool scaling = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--quick") {
      quick = true;
    } else if (std::string_view(argv[i]) == "--access") {
      access = true;
    } else if (std::string_view(argv[i]) == "--scaling") {
      scaling = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  if (access) {
    kv::bench::RegisterAccessBenchmarks(quick);
  } else if (scaling) {
    kv::bench::RegisterScalingBenchmarks();
  } else {
    kv::bench::RegisterStoreBenchmarks(quick);
    kv::bench::RegisterStarvationBenchmarks(quick);
  }
  benchmark::AddCustomContext("lockbench_quick", quick ? "1" : "0");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
