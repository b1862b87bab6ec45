// main3's strategy: ONE read/write lock for the whole array.
//
// Thread safety: array_rw_ guards every slot; reads take it shared, writes
// exclusive. Any number of reads proceed together; a write excludes all.
// Preference: libstdc++'s std::shared_mutex is a default pthread_rwlock_t,
// which glibc makes READER-preferring: a steady stream of readers can starve a
// writer. Writer preference needs PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP.
#ifndef KV_COMMON_STORE_ONE_RWLOCK_H_
#define KV_COMMON_STORE_ONE_RWLOCK_H_

#include <cstddef>
#include <mutex>
#include <shared_mutex>
#include <string_view>

#include "common/store.h"

namespace kv {

class OneRwLockLocks {
 public:
  static constexpr std::string_view kName = "one-rwlock";
  explicit OneRwLockLocks(std::size_t /*n*/) {}

  std::shared_lock<std::shared_mutex> ReadGuard(std::size_t) {
    return std::shared_lock(array_rw_);
  }
  std::unique_lock<std::shared_mutex> WriteGuard(std::size_t) {
    return std::unique_lock(array_rw_);
  }

 private:
  std::shared_mutex array_rw_;  // guards all slots
};

using OneRwLockStore = LockedStore<OneRwLockLocks>;

}  // namespace kv

#endif  // KV_COMMON_STORE_ONE_RWLOCK_H_
