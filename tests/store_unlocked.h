// TEST-ONLY strategy: NO locking at all. It exists to be caught.
//
// UnlockedStore is LockedStore with a lock table whose guards do nothing, so
// reads and writes of one slot race freely: a reader can copy a slot while a
// writer is half way through filling it (a torn read), and two writers of one
// slot can interleave their set and get so that a write's read-back is the
// other writer's text (a lost update). The stress tests in
// common/store_test.cpp and the client's consistency checker must flag it;
// if they do not, they cannot catch a broken strategy either.
//
// Thread safety: NONE, deliberately. Concurrent use is a data race (undefined
// behaviour in C++, reported by TSan). Never use it outside tests; it is built
// only with LOCKBENCH_BUILD_TESTS and lives under tests/ for that reason.
#ifndef KV_TESTS_STORE_UNLOCKED_H_
#define KV_TESTS_STORE_UNLOCKED_H_

#include <cstddef>
#include <string_view>

#include "common/store.h"

namespace kv {

class NoLocks {
 public:
  static constexpr std::string_view kName = "unlocked";
  explicit NoLocks(std::size_t /*n*/) {}

  // A guard that guards nothing (non-trivial destructor so that
  // `auto guard = ...` in LockedStore does not count as an unused variable).
  struct NoGuard {
    ~NoGuard() {}
  };
  NoGuard ReadGuard(std::size_t /*pos*/) { return {}; }
  NoGuard WriteGuard(std::size_t /*pos*/) { return {}; }
};

using UnlockedStore = LockedStore<NoLocks>;

}  // namespace kv

#endif  // KV_TESTS_STORE_UNLOCKED_H_
