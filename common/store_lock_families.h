// The classic lock families as strategies: each lock type of common/ in the
// three granularities of the lock table (one-NAME, NAME-per-slot,
// striped-NAME; store_lock_table.h's LockFamily). The lock types themselves,
// how each works and when it wins, are in their own headers, which the
// preload (profile/) uses as well. A family the preload can swap in takes its
// name's description from common/swap_locks.h (one text for both), and a
// static_assert below keeps the two lists naming the same locks: a lock added
// to one and not the other fails the build.
//
// Thread safety: as the lock table.
#ifndef KV_COMMON_STORE_LOCK_FAMILIES_H_
#define KV_COMMON_STORE_LOCK_FAMILIES_H_

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <string_view>

#include "common/bravo_rwlock.h"
#include "common/clh_lock.h"
#include "common/futex_mutex.h"
#include "common/mcs_lock.h"
#include "common/pflock.h"
#include "common/swap_locks.h"
#include "common/pthread_rwlock.h"
#include "common/store_lock_table.h"
#include "common/ticket_lock.h"
#include "common/ttas_backoff_lock.h"

namespace kv {

// The place of name in kSwapLocks, or kSwapLockCount.
constexpr std::size_t SwapLockIndex(std::string_view name) {
  std::size_t i = 0;
  while (i < kSwapLockCount && kSwapLocks[i].name != name) ++i;
  return i;
}

// The description of swap lock kName, as a template argument.
template <FixedString kName>
constexpr auto SwapLockWhat() {
  constexpr std::size_t kAt = SwapLockIndex(kName.view());
  static_assert(kAt < kSwapLockCount, "not a lock of common/swap_locks.h");
  constexpr std::string_view kText = kSwapLocks[kAt].description;
  FixedString<kText.size() + 1> what;
  std::copy_n(kText.data(), kText.size(), what.chars);
  return what;
}

// A family the preload swaps in too: described once, in common/swap_locks.h.
template <typename L, FixedString kName>
using SwapLockFamily = LockFamily<L, kName, SwapLockWhat<kName>()>;

using TicketLocks = SwapLockFamily<TicketLock, "ticketlock">;
using TtasBackoffLocks = SwapLockFamily<TtasBackoffLock, "ttas-backoff">;
using McsLocks = SwapLockFamily<McsLock, "mcs">;
using ClhLocks = SwapLockFamily<ClhLock, "clh">;
using FutexMutexes = SwapLockFamily<FutexMutex, "futex-mutex">;
using PhaseFairRwLocks = SwapLockFamily<PhaseFairRwLock, "pflock">;
// BRAVO over pthread's rwlock cannot replace pthread's rwlock: strategies only.
using BravoRwLocks =
    LockFamily<BravoRwLock<PthreadRwLock>, "bravo",
               "BRAVO rwlock (a pthread rwlock with biased readers in a shared slot table)">;
// The same BRAVO over the phase-fair lock: what the preload swaps in as
// bravo-pflock, so that its microbenchmark and its swaps run one code.
using BravoPflockRwLocks = SwapLockFamily<BravoRwLock<PhaseFairRwLock>, "bravo-pflock">;

// Every family, in the order the strategy registry lists them.
template <typename... Families>
struct FamilyList {
  // Every swap lock has a family of its name, and every family but the named
  // strategy-only ones is a swap lock.
  static constexpr bool MatchesSwapLocks(std::initializer_list<std::string_view> only_strategies) {
    for (const SwapLockInfo& lock : kSwapLocks) {
      if (((Families::kFamilyName.view() != lock.name) && ...)) return false;
    }
    for (const std::string_view name : {Families::kFamilyName.view()...}) {
      const bool strategy_only =
          std::find(only_strategies.begin(), only_strategies.end(), name) != only_strategies.end();
      if (strategy_only == (SwapLockIndex(name) < kSwapLockCount)) return false;
    }
    return true;
  }
};

using LockFamilies = FamilyList<TicketLocks, TtasBackoffLocks, McsLocks, ClhLocks, PhaseFairRwLocks,
                                BravoRwLocks, BravoPflockRwLocks, FutexMutexes>;
static_assert(LockFamilies::MatchesSwapLocks({"bravo"}),
              "common/swap_locks.h and the lock families must name the same locks");

}  // namespace kv

#endif  // KV_COMMON_STORE_LOCK_FAMILIES_H_
