#include "common/strategy_registry.h"

#include <algorithm>
#include <array>

#include "common/store_mutex_per_slot.h"
#include "common/store_one_mutex.h"
#include "common/store_one_rwlock.h"
#include "common/store_pointer_swap.h"
#include "common/store_rwlock_per_slot.h"
#include "common/store_seqlock_per_slot.h"
#include "common/store_spinlock_per_slot.h"
#include "common/store_striped.h"
#include "common/store_writer_pref_rwlock.h"

namespace kv {
namespace {

// Adapts a store with a plain Create(n, delay) to the registry's signature.
template <typename StoreT>
std::unique_ptr<Store> CreatePlain(std::size_t n, ArtificialDelay* delay,
                                   const StrategyConfig& /*config*/) {
  return StoreT::Create(n, delay);
}

template <typename LockTable>
std::unique_ptr<Store> CreateStriped(std::size_t n, ArtificialDelay* delay,
                                     const StrategyConfig& config) {
  return std::make_unique<LockedStore<LockTable>>(n, delay, config.stripes);
}

constexpr std::array kStrategies = {
    StrategyInfo{"one-mutex",
                 "main1: one mutex for the whole array (everything serialised)",
                 false, &CreatePlain<OneMutexStore>},
    StrategyInfo{"mutex-per-slot",
                 "main2: one mutex per string (reads of one string serialised)",
                 false, &CreatePlain<MutexPerSlotStore>},
    StrategyInfo{"one-rwlock",
                 "main3: one reader-preferring rwlock (std::shared_mutex) for "
                 "the array",
                 false, &CreatePlain<OneRwLockStore>},
    StrategyInfo{"rwlock-per-slot",
                 "main4: one reader-preferring rwlock per string",
                 false, &CreatePlain<RwLockPerSlotStore>},
    StrategyInfo{"striped-mutex",
                 "k mutexes (--stripes, default 16), string i guarded by "
                 "stripe i mod k",
                 true, &CreateStriped<StripedMutexLocks>},
    StrategyInfo{"striped-rwlock",
                 "k reader-preferring rwlocks (--stripes, default 16), string "
                 "i guarded by stripe i mod k",
                 true, &CreateStriped<StripedRwLockLocks>},
    StrategyInfo{"one-rwlock-wpref",
                 "one writer-preferring pthread rwlock for the array",
                 false, &CreatePlain<OneWriterPrefRwLockStore>},
    StrategyInfo{"rwlock-per-slot-wpref",
                 "one writer-preferring pthread rwlock per string",
                 false, &CreatePlain<WriterPrefRwLockPerSlotStore>},
    StrategyInfo{"spinlock-per-slot",
                 "one test-and-test-and-set spinlock per string (yields after "
                 "128 spins)",
                 false, &CreatePlain<SpinLockPerSlotStore>},
    StrategyInfo{"seqlock-per-slot",
                 "one seqlock per string: readers copy optimistically and "
                 "retry, writers serialised by a per-string mutex",
                 false, &CreatePlain<SeqLockPerSlotStore>},
    StrategyInfo{"pointer-swap",
                 "RCU-like: lock-free readers copy an immutable value "
                 "(hazard pointers), writers swap in a new one",
                 false, &CreatePlain<PointerSwapStore>},
};

}  // namespace

std::span<const StrategyInfo> AllStrategies() { return kStrategies; }

const StrategyInfo* FindStrategy(std::string_view name) {
  const auto it = std::find_if(
      kStrategies.begin(), kStrategies.end(),
      [name](const StrategyInfo& s) { return s.name == name; });
  return it == kStrategies.end() ? nullptr : &*it;
}

std::string StrategyNames() {
  std::string names;
  for (const StrategyInfo& s : kStrategies) {
    if (!names.empty()) names += ", ";
    names += s.name;
  }
  return names;
}

std::string DescribeStrategies() {
  std::size_t width = 0;
  for (const StrategyInfo& s : kStrategies) width = std::max(width, s.name.size());
  std::string out;
  for (const StrategyInfo& s : kStrategies) {
    out += "  ";
    out += s.name;
    out.append(width + 2 - s.name.size(), ' ');
    out += s.description;
    out += '\n';
  }
  return out;
}

}  // namespace kv
