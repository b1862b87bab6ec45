// main1's strategy: ONE mutex for the whole array.
//
// Thread safety: array_mu_ guards every slot. Reads and writes are fully
// serialised, so with the lab's delay the array serves one access at a time
// (about 1.3 delays per request at 70% reads): simple, and the slowest.
#ifndef KV_COMMON_STORE_ONE_MUTEX_H_
#define KV_COMMON_STORE_ONE_MUTEX_H_

#include <cstddef>
#include <mutex>
#include <string_view>

#include "common/store.h"

namespace kv {

class OneMutexLocks {
 public:
  static constexpr std::string_view kName = "one-mutex";
  explicit OneMutexLocks(std::size_t /*n*/) {}

  std::unique_lock<std::mutex> ReadGuard(std::size_t) {
    return std::unique_lock(array_mu_);
  }
  std::unique_lock<std::mutex> WriteGuard(std::size_t) {
    return std::unique_lock(array_mu_);
  }

 private:
  std::mutex array_mu_;  // guards all slots
};

using OneMutexStore = LockedStore<OneMutexLocks>;

}  // namespace kv

#endif  // KV_COMMON_STORE_ONE_MUTEX_H_
