// The strategies the microbenchmarks compare: every registered strategy plus
// two stores without a lock, measured only to show what locking costs:
// UNPROTECTED, the floor (bench/store_floor.h: each access's work with nothing
// shared that another thread writes; no correct lock can beat it), and
// UNPROTECTED-RACY (the test-only unlocked store: writers race on the shared
// strings; a lock can beat it where racing writers share one line).
#ifndef KV_BENCH_BENCH_STRATEGIES_H_
#define KV_BENCH_BENCH_STRATEGIES_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/artificial_delay.h"
#include "common/store.h"

namespace kv::bench {

inline constexpr char kUnprotected[] = "unprotected";
inline constexpr char kUnprotectedRacy[] = "unprotected-racy";

// "unprotected", "unprotected-racy", then the registry's names in registry
// order.
std::vector<std::string> BenchStrategyNames();

// How a benchmarked store times its accesses (common/access_timer.h).
enum class BenchTiming {
  kTimed,    // every access, three clock_gettime reads: the server's path
  kSampled,  // 1 access in 64, cycle counter (every strategy)
  kUntimed,  // compiled out (only the stores without a lock and one-mutex)
};

// Builds the named store (registry defaults, e.g. 16 stripes). REQUIRES: the
// name is one of BenchStrategyNames(). kUntimed exists for the two stores
// without a lock and "one-mutex" (the timing-cost rows); other names get
// kSampled instead.
std::unique_ptr<Store> MakeBenchStore(const std::string& name, std::size_t n,
                                      ArtificialDelay* delay,
                                      BenchTiming timing = BenchTiming::kTimed);

// Registers the throughput grid (store_bench.cpp) and the writer-starvation
// runs (starvation_bench.cpp). quick: a tiny subset for CI smoke runs.
void RegisterStoreBenchmarks(bool quick);
// The scaling sweep alone (kv_bench --scaling, bench/run-microbench.sh --scaling).
void RegisterScalingBenchmarks();
void RegisterStarvationBenchmarks(bool quick);
// The single-thread CPU cost of one access (access_bench.cpp); only with
// `kv_bench --access`, which runs these alone.
void RegisterAccessBenchmarks(bool quick);

}  // namespace kv::bench

#endif  // KV_BENCH_BENCH_STRATEGIES_H_
