// The strategy registry: every Store strategy by name, with a one-line
// description and a factory that takes run-time parameters.
//
// main1..main4 pick their Store at compile time (server.h ServerMain); the
// generic server `lockserver --strategy NAME [--stripes K]`, the benchmarks
// and the tests pick one here at run time. Names are stable: they appear in
// ready lines, results and reports. The four lab strategies keep the names
// their stores report: one-mutex (main1), mutex-per-slot (main2), one-rwlock
// (main3), rwlock-per-slot (main4). The test-only unlocked store is NOT
// registered (tests/store_unlocked.h).
//
// Thread safety: the registry is immutable (a constant table); every function
// here may be called from any thread.
#ifndef KV_COMMON_STRATEGY_REGISTRY_H_
#define KV_COMMON_STRATEGY_REGISTRY_H_

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/artificial_delay.h"
#include "common/store.h"

namespace kv {

// Run-time parameters of a strategy; each strategy reads only its own.
struct StrategyConfig {
  // Lock stripes for the striped-* strategies; 0 means their default
  // (kDefaultStripes = 16), clamped to n. Ignored by the others.
  std::size_t stripes = 0;
};

struct StrategyInfo {
  std::string_view name;         // e.g. "striped-mutex"
  std::string_view description;  // one line, for --list-strategies and docs
  bool uses_stripes;             // reads StrategyConfig::stripes
  // Builds a store of n >= 1 slots whose delay (which must outlive it) is
  // `delay`. Never returns null.
  std::unique_ptr<Store> (*create)(std::size_t n, ArtificialDelay* delay,
                                   const StrategyConfig& config);
  // The same store timed on 1 access in 64 with the cycle counter
  // (Sampled64, common/access_timer.h; unsampled accesses report -1), for the
  // microbenchmarks. Never null: every store takes a timing policy.
  std::unique_ptr<Store> (*create_sampled)(std::size_t n, ArtificialDelay* delay,
                                           const StrategyConfig& config);
};

// Every registered strategy, the four lab ones first, in a fixed order.
std::span<const StrategyInfo> AllStrategies();

// The strategy called `name`, or nullptr if there is none.
const StrategyInfo* FindStrategy(std::string_view name);

// "one-mutex, mutex-per-slot, ...": the names, for usage messages.
std::string StrategyNames();

// One line per strategy, "  name  description", for --list-strategies.
std::string DescribeStrategies();

// One line per lock the preload can swap in (common/swap_locks.h), "  name
// kinds  description", and pthread's (for rwlocks only), for --list-locks.
std::string DescribeSwapLocks();

}  // namespace kv

#endif  // KV_COMMON_STRATEGY_REGISTRY_H_
