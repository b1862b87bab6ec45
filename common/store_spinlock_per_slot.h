// One spinlock PER STRING (test-and-test-and-set, with a yield after a while).
//
// How it works: a waiting thread does not sleep in the kernel (futex) as a
// std::mutex waiter does; it re-reads the lock word in a loop with the CPU's
// pause hint and retries the exchange when it looks free, waiting as every
// spinning lock of common/ does (SpinWait, spin_wait.h: after
// SpinWait::kSpinsBeforeYield failed looks a sched_yield() on every round) so
// that on an oversubscribed machine the holder (which may have been preempted)
// can run; a pure spinlock would burn the waiter's whole time slice instead.
//
// When it wins: critical sections of a few dozen nanoseconds (delay 0), few
// threads per core, low contention: lock and unlock are one atomic each and
// never enter the kernel. When it loses: with the lab's 10 us delay (about
// 60 us of sleep) inside the section, or with more runnable threads than
// cores (2 here), waiters spin and yield instead of sleeping, stealing CPU
// from the holder; expect it to fall behind mutex-per-slot there.
//
// Thread safety: slot i's SpinLock guards slot i (its value is GUARDED_BY
// it); reads and writes both take it exclusively (acquire on lock, release
// on unlock, which is what orders the value accesses for TSan and the memory
// model). Each lock shares a padded record with its value only.
#ifndef KV_COMMON_STORE_SPINLOCK_PER_SLOT_H_
#define KV_COMMON_STORE_SPINLOCK_PER_SLOT_H_

#include <atomic>

#include "common/spin_wait.h"
#include "common/store_lock_table.h"
#include "common/thread_annotations.h"

namespace kv {

// A test-and-test-and-set spinlock (a lock type for the lock table and the
// guards of common/mutex.h; Lock()/Unlock() exist for the guards only).
class CAPABILITY("spinlock") SpinLock {
 public:
  void Lock() ACQUIRE() {
    SpinWait wait;  // one wait however many exchanges it loses
    while (locked_.exchange(true, std::memory_order_acquire)) {
      // Spin on a plain load: no cache-line ping-pong while the lock is held.
      while (locked_.load(std::memory_order_relaxed)) wait.Once();
    }
  }
  void Unlock() RELEASE() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

using SpinLockPerSlotStore = LockedStore<PerSlot<SpinLock>, "spinlock-per-slot">;

}  // namespace kv

#endif  // KV_COMMON_STORE_SPINLOCK_PER_SLOT_H_
