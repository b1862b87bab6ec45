// TEST-ONLY strategy: NO locking at all. It exists to be caught.
//
// UnlockedStore is a LockedStore whose lock does nothing, so
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

#include "common/store_lock_table.h"
#include "common/thread_annotations.h"

namespace kv {

// A "lock" that locks nothing. It claims to, so the thread-safety analysis
// accepts the store: the analysis checks that code takes its locks, not that
// a lock excludes anyone. The stress tests are what catch this one.
class CAPABILITY("mutex") NoLock {
 public:
  void Lock() ACQUIRE() {}
  void Unlock() RELEASE() {}
};

using UnlockedStore = LockedStore<WholeArray<NoLock>, "unlocked">;

}  // namespace kv

#endif  // KV_TESTS_STORE_UNLOCKED_H_
