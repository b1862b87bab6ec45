// main2's strategy: one mutex PER STRING.
//
// Thread safety: slot_mu_[i] guards slot i only. Accesses to different slots
// run in parallel; accesses to one slot (reads included) are serialised. Each
// mutex sits in its own cache line so that neighbouring slots' locks do not
// false-share. Memory: 64 bytes of lock per slot.
#ifndef KV_COMMON_STORE_MUTEX_PER_SLOT_H_
#define KV_COMMON_STORE_MUTEX_PER_SLOT_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <string_view>

#include "common/store.h"

namespace kv {

class MutexPerSlotLocks {
 public:
  static constexpr std::string_view kName = "mutex-per-slot";
  explicit MutexPerSlotLocks(std::size_t n)
      : slot_mu_(std::make_unique<PaddedMutex[]>(n)) {}

  std::unique_lock<std::mutex> ReadGuard(std::size_t pos) {
    return std::unique_lock(slot_mu_[pos].mu);
  }
  std::unique_lock<std::mutex> WriteGuard(std::size_t pos) {
    return std::unique_lock(slot_mu_[pos].mu);
  }

 private:
  struct alignas(64) PaddedMutex {
    std::mutex mu;
  };
  std::unique_ptr<PaddedMutex[]> slot_mu_;  // slot_mu_[i] guards slot i
};

using MutexPerSlotStore = LockedStore<MutexPerSlotLocks>;

}  // namespace kv

#endif  // KV_COMMON_STORE_MUTEX_PER_SLOT_H_
