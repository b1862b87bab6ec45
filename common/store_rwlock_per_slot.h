// main4's strategy: one read/write lock PER STRING.
//
// Thread safety: slot_rw_[i] guards slot i; reads take it shared, writes
// exclusive. Different slots never contend; reads of one slot run together.
// Reader-preferring like store_one_rwlock.h (glibc default rwlock). Each lock
// sits in its own cache line. Memory: 64 bytes of lock per slot.
#ifndef KV_COMMON_STORE_RWLOCK_PER_SLOT_H_
#define KV_COMMON_STORE_RWLOCK_PER_SLOT_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string_view>

#include "common/store.h"

namespace kv {

class RwLockPerSlotLocks {
 public:
  static constexpr std::string_view kName = "rwlock-per-slot";
  explicit RwLockPerSlotLocks(std::size_t n)
      : slot_rw_(std::make_unique<PaddedRwLock[]>(n)) {}

  std::shared_lock<std::shared_mutex> ReadGuard(std::size_t pos) {
    return std::shared_lock(slot_rw_[pos].rw);
  }
  std::unique_lock<std::shared_mutex> WriteGuard(std::size_t pos) {
    return std::unique_lock(slot_rw_[pos].rw);
  }

 private:
  struct alignas(64) PaddedRwLock {
    std::shared_mutex rw;
  };
  std::unique_ptr<PaddedRwLock[]> slot_rw_;  // slot_rw_[i] guards slot i
};

using RwLockPerSlotStore = LockedStore<RwLockPerSlotLocks>;

}  // namespace kv

#endif  // KV_COMMON_STORE_RWLOCK_PER_SLOT_H_
