// Our own futex-based mutex (its strategies: store_lock_families.h).
//
// How it works (Drepper, "Futexes Are Tricky", 2011, mutex 2): one 32-bit
// word with three states: 0 free, 1 locked with no waiter, 2 locked and
// maybe waiters. Lock tries 0 -> 1 with one compare-exchange and is done
// (no system call). Otherwise it marks the word 2 and sleeps in the kernel
// with FUTEX_WAIT, which sleeps only if the word still is 2 (so a wake-up
// between our check and the sleep is not lost); woken, it tries 0 -> 2 (2,
// not 1: other waiters may still sleep, and whoever unlocks must wake them).
// Unlock decrements: from 1 to 0 means nobody waits, no system call; from 2,
// it stores 0 and wakes one sleeper with FUTEX_WAKE. glibc's
// pthread_mutex_t (std::mutex, main1/main2) is the same protocol, with a
// short adaptive spin on some configurations and more bookkeeping
// (owner, kind, robust lists); this one is four bytes.
//
// Memory order: the compare-exchanges that take the lock are acquire, the
// decrement and the store of 0 that release it are release; the futex
// calls order nothing (the kernel compares and sleeps; after waking the
// waiter's own acquire compare-exchange reads the unlocker's release
// store). ThreadSanitizer sees the atomics, so it needs no model of the
// futex.
//
// When it wins: the same places as std::mutex (it is what std::mutex is):
// waiters sleep instead of spinning, so it holds up with more threads than
// cores and with long or sleeping sections (the lab's delay), where the
// spinning locks collapse. When it loses: hand-off through the kernel costs
// a system call on each side and a wake-up latency of microseconds, so for
// sections of tens of nanoseconds under contention a spinning lock that
// hands over in the cache is faster; it is not fair (a running thread can
// take the word before the woken one gets to try), and an unlock after
// contention always makes a FUTEX_WAKE system call, even if the waiter
// already left.
//
// A timed lock (LockUntil) sleeps in the same FUTEX_WAIT with the deadline
// on the caller's clock. All-zero is unlocked (the preload keeps a lock in
// zero-filled storage).
//
// Thread safety: a FutexMutex is safe for any number of threads; it is
// taken through the guards of common/mutex.h, or by the preload (profile/).
#ifndef KV_COMMON_FUTEX_MUTEX_H_
#define KV_COMMON_FUTEX_MUTEX_H_

#include <atomic>
#include <cstdint>
#include <ctime>

#include "common/futex.h"
#include "common/thread_annotations.h"

namespace kv {

class CAPABILITY("mutex") FutexMutex {
 public:
  static constexpr uint32_t kFree = 0;
  static constexpr uint32_t kLocked = 1;     // no waiter
  static constexpr uint32_t kContended = 2;  // maybe waiters: unlock must wake

  void Lock() ACQUIRE() { (void)Take(CLOCK_MONOTONIC, nullptr); }

  bool TryLock() TRY_ACQUIRE(true) {
    uint32_t seen = kFree;
    return word_.compare_exchange_strong(seen, kLocked, std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }

  // Until the absolute time deadline on clock (CLOCK_REALTIME or
  // CLOCK_MONOTONIC): false if it passed first.
  bool LockUntil(clockid_t clock, const timespec& deadline) TRY_ACQUIRE(true) {
    return Take(clock, &deadline);
  }

  // Held: a caller that must refuse the unlock of a free lock (pthread's
  // EPERM) asks this first.
  bool IsLocked() const { return word_.load(std::memory_order_relaxed) != kFree; }

  void Unlock() RELEASE() {
    if (word_.fetch_sub(1, std::memory_order_release) != kLocked) {
      word_.store(kFree, std::memory_order_release);
      FutexWake(Word(), 1);
    }
  }

 private:
  // The lock, sleeping while it is held (until *deadline on clock unless
  // null); false if the deadline passed first.
  bool Take(clockid_t clock, const timespec* deadline) {
    uint32_t seen = kFree;
    if (word_.compare_exchange_strong(seen, kLocked, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return true;
    }
    do {
      // Sleep while it is held: mark it contended first (1 -> 2) unless it
      // already is or has just become free.
      if ((seen == kContended || MarkContended()) &&
          !FutexWait(Word(), kContended, clock, deadline)) {
        return false;
      }
      seen = kFree;
    } while (!word_.compare_exchange_strong(seen, kContended, std::memory_order_acquire,
                                            std::memory_order_relaxed));
    return true;
  }
  // 1 -> 2; true if the lock is held (now marked contended), false if it was
  // free.
  bool MarkContended() {
    uint32_t expected = kLocked;
    return word_.compare_exchange_strong(expected, kContended, std::memory_order_relaxed) ||
           expected != kFree;
  }
  // The kernel reads the word as a plain 32-bit int: std::atomic<uint32_t>
  // is one (checked below).
  uint32_t* Word() { return reinterpret_cast<uint32_t*>(&word_); }

  std::atomic<uint32_t> word_{kFree};
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                std::atomic<uint32_t>::is_always_lock_free);
};

}  // namespace kv

#endif  // KV_COMMON_FUTEX_MUTEX_H_
