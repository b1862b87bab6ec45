#include "common/strategy_registry.h"

#include <algorithm>
#include <array>

#include "common/access_timer.h"
#include "common/store_flat_combining.h"
#include "common/store_lock_families.h"
#include "common/store_mutex_per_slot.h"
#include "common/store_one_mutex.h"
#include "common/store_one_rwlock.h"
#include "common/store_pointer_swap.h"
#include "common/store_rwlock_per_slot.h"
#include "common/store_seqlock_per_slot.h"
#include "common/store_spinlock_per_slot.h"
#include "common/store_striped.h"
#include "common/store_writer_pref_rwlock.h"
#include "common/swap_locks.h"

namespace kv {
namespace {

// Stores whose lock table reads the stripe count (LockedStore<Stripes<L>>).
template <typename StoreT>
concept UsesStripes = requires {
  requires StoreT::kUsesStripes;
};

template <typename StoreT>
std::unique_ptr<Store> Create(std::size_t n, ArtificialDelay* delay, const StrategyConfig& config) {
  if constexpr (UsesStripes<StoreT>) {
    return std::make_unique<StoreT>(n, delay, config.stripes);
  } else {
    return StoreT::Create(n, delay);
  }
}

// Every store can be rebuilt with another timing policy (common/access_timer.h),
// so the microbenchmarks time every strategy the same way.
template <typename StoreT>
concept HasTimingPolicy = requires {
  typename StoreT::template WithTiming<Sampled64>;
};

// One registry line: the store's own name, a description, its factories.
template <typename StoreT>
constexpr StrategyInfo Entry(std::string_view description) {
  static_assert(HasTimingPolicy<StoreT>, "a store takes a timing policy: template WithTiming");
  return {StoreT::kStrategyName, description, UsesStripes<StoreT>, &Create<StoreT>,
          &Create<typename StoreT::template WithTiming<Sampled64>>};
}

// A lock family's three strategies (LockFamily, common/store_lock_table.h).
template <typename Family>
constexpr std::array<StrategyInfo, 3> EntriesOf() {
  return {Entry<typename Family::One>(Family::kOneWhat.view()),
          Entry<typename Family::PerString>(Family::kPerStringWhat.view()),
          Entry<typename Family::Striped>(Family::kStripedWhat.view())};
}

// The table: the strategies written out one by one, then each family's three.
template <typename... Families, std::size_t N>
constexpr auto Joined(FamilyList<Families...> /*families*/,
                      const std::array<StrategyInfo, N>& single) {
  std::array<StrategyInfo, N + 3 * sizeof...(Families)> all{};
  auto at = std::copy(single.begin(), single.end(), all.begin());
  ((at = std::ranges::copy(EntriesOf<Families>(), at).out), ...);
  return all;
}
template <typename List, std::size_t N>
constexpr auto WithFamilies(const std::array<StrategyInfo, N>& single) {
  return Joined(List{}, single);
}

// The classic lock families: store_lock_families.h's list, which common/swap_locks.h is
// checked against (each lock's header says how, when it wins, when it collapses).
constexpr auto kStrategies = WithFamilies<LockFamilies>(std::array{
    Entry<OneMutexStore>("main1: one mutex for the whole array (everything serialised)"),
    Entry<MutexPerSlotStore>("main2: one mutex per string (reads of one string serialised)"),
    Entry<OneRwLockStore>("main3: one reader-preferring rwlock "
                          "(std::shared_mutex) for the array"),
    Entry<RwLockPerSlotStore>("main4: one reader-preferring rwlock per string"),
    Entry<StripedMutexStore>("k mutexes (--stripes, default 16), string i "
                             "guarded by stripe i mod k"),
    Entry<StripedRwLockStore>("k reader-preferring rwlocks (--stripes, "
                              "default 16), string i guarded by stripe i mod k"),
    Entry<OneWriterPrefRwLockStore>("one writer-preferring pthread rwlock for the array"),
    Entry<WriterPrefRwLockPerSlotStore>("one writer-preferring pthread rwlock per string"),
    Entry<SpinLockPerSlotStore>("one test-and-test-and-set spinlock per "
                                "string (yields after 128 spins)"),
    Entry<SeqLockPerSlotStore>("one seqlock per string: readers copy optimistically and retry, "
                               "writers serialised by a per-string mutex"),
    Entry<PointerSwapStore>("RCU-like: lock-free readers copy an immutable value (hazard "
                            "pointers), writers swap in a new one"),
    Entry<FlatCombiningStore>("flat combining: threads publish requests, one combiner "
                              "applies them under one lock"),
});

}  // namespace

std::span<const StrategyInfo> AllStrategies() { return kStrategies; }

const StrategyInfo* FindStrategy(std::string_view name) {
  const auto it = std::find_if(kStrategies.begin(), kStrategies.end(),
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

namespace {

// "  name           kinds          description\n", as analysis/profile/cli.py prints it.
void AppendSwapLockRow(std::string* out, std::string_view name, std::string_view kinds,
                       std::string_view text) {
  constexpr std::size_t kWidth = 14;
  *out += "  ";
  *out += name;
  out->append(name.size() < kWidth ? kWidth - name.size() : 0, ' ');
  *out += ' ';
  *out += kinds;
  out->append(kinds.size() < kWidth ? kWidth - kinds.size() : 0, ' ');
  *out += ' ';
  *out += text;
  *out += '\n';
}

}  // namespace

std::string DescribeSwapLocks() {
  std::string out;
  for (const SwapLockInfo& lock : kSwapLocks) {
    AppendSwapLockRow(&out, lock.name, lock.rwlock_only ? "rwlock" : "mutex, rwlock",
                      lock.description);
  }
  AppendSwapLockRow(&out, "pthread", "rwlock",
                    "glibc's own (--swap-rwlock only: keep the rwlocks)");
  return out;
}

}  // namespace kv
