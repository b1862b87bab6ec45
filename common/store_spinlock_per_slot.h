// One spinlock PER STRING (test-and-test-and-set, with a yield after a while).
//
// How it works: a waiting thread does not sleep in the kernel (futex) as a
// std::mutex waiter does; it re-reads the lock word in a loop with the CPU's
// pause hint and retries the exchange when it looks free. After kSpinsBeforeYield
// failed looks it calls sched_yield() so that on an oversubscribed machine the
// holder (which may have been preempted) can run; a pure spinlock would burn
// the waiter's whole time slice instead.
//
// When it wins: critical sections of a few dozen nanoseconds (delay 0), few
// threads per core, low contention: lock and unlock are one atomic each and
// never enter the kernel. When it loses: with the lab's 10 us delay (about
// 60 us of sleep) inside the section, or with more runnable threads than
// cores (2 here), waiters spin and yield instead of sleeping, stealing CPU
// from the holder; expect it to fall behind mutex-per-slot there.
//
// Thread safety: slot_lock_[i] guards slot i; reads and writes both take it
// exclusively (acquire on lock, release on unlock, which is what orders the
// StringArray accesses for TSan and the memory model). Each lock sits in its
// own cache line.
#ifndef KV_COMMON_STORE_SPINLOCK_PER_SLOT_H_
#define KV_COMMON_STORE_SPINLOCK_PER_SLOT_H_

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string_view>

#include "common/store.h"

namespace kv {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A test-and-test-and-set spinlock with the BasicLockable interface, for
// std::unique_lock (lock()/unlock() exist for the guard only).
class SpinLock {
 public:
  static constexpr int kSpinsBeforeYield = 128;

  void lock() {
    for (;;) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      // Spin on a plain load: no cache-line ping-pong while the lock is held.
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins < kSpinsBeforeYield) {
          CpuRelax();
        } else {
          sched_yield();
          spins = 0;
        }
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

class SpinLockPerSlotLocks {
 public:
  static constexpr std::string_view kName = "spinlock-per-slot";
  explicit SpinLockPerSlotLocks(std::size_t n)
      : slot_lock_(std::make_unique<PaddedSpinLock[]>(n)) {}

  std::unique_lock<SpinLock> ReadGuard(std::size_t pos) {
    return std::unique_lock(slot_lock_[pos].lock);
  }
  std::unique_lock<SpinLock> WriteGuard(std::size_t pos) {
    return std::unique_lock(slot_lock_[pos].lock);
  }

 private:
  struct alignas(64) PaddedSpinLock {
    SpinLock lock;
  };
  std::unique_ptr<PaddedSpinLock[]> slot_lock_;  // slot_lock_[i] guards slot i
};

using SpinLockPerSlotStore = LockedStore<SpinLockPerSlotLocks>;

}  // namespace kv

#endif  // KV_COMMON_STORE_SPINLOCK_PER_SLOT_H_
