// The test-and-test-and-set lock with bounded exponential back-off (its
// strategies: store_lock_families.h).
//
// How it works (Anderson 1990; Herlihy & Shavit, "The Art of Multiprocessor
// Programming", 7.4): a waiter reads the lock word until it looks free (a
// plain load hits its own cache, no traffic) and only then tries the
// exchange. Each failed try means others want the lock too, so the waiter
// backs off: it pauses a random number of times in [limit/2, limit), and
// doubles limit up to kMaxBackoff. Random, growing pauses spread the retries
// out, so an unlock is not followed by every waiter's exchange at once (the
// "thundering herd" that makes plain TTAS collapse under contention). At the
// cap a waiter yields its core instead of spinning longer.
// spinlock-per-slot (store_spinlock_per_slot.h) is the same lock without the
// back-off: fixed spins, then a yield.
//
// Memory order: the exchange that takes the lock is acquire and the unlock
// store release, which orders the critical sections; the test loads are
// relaxed (they are hints: only the exchange decides).
//
// When it wins: short critical sections under moderate contention: one
// exchange and one store when uncontended, less coherence traffic than plain
// TTAS when contended. When it collapses: it is unfair (a waiter deep in its
// back-off loses to newcomers; a freed lock may sit idle while everyone
// pauses), and like every spinning lock it wastes the cores when threads
// outnumber them or the section sleeps (the lab's 10 us delay): waiters end
// up yielding in a loop while the holder needs a core.
//
// All-zero is unlocked (the preload keeps a lock in zero-filled storage).
//
// Thread safety: a TtasBackoffLock is safe for any number of threads; it is
// taken through the guards of common/mutex.h, or by the preload (profile/).
#ifndef KV_COMMON_TTAS_BACKOFF_LOCK_H_
#define KV_COMMON_TTAS_BACKOFF_LOCK_H_

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "common/cpu_relax.h"
#include "common/thread_annotations.h"

namespace kv {

class CAPABILITY("mutex") TtasBackoffLock {
 public:
  static constexpr uint32_t kMinBackoff = 4;     // pauses after the first failed try
  static constexpr uint32_t kMaxBackoff = 1024;  // the cap: from here on, yield

  void Lock() ACQUIRE() {
    uint32_t limit = kMinBackoff;
    while (!TryLock()) BackOff(&limit);
  }
  bool TryLock() TRY_ACQUIRE(true) {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void Unlock() RELEASE() { locked_.store(false, std::memory_order_release); }

 private:
  // Pauses a random count in [limit/2, limit) and doubles limit; at the cap,
  // yields instead.
  static void BackOff(uint32_t* limit) {
    if (*limit >= kMaxBackoff) {
      sched_yield();
      return;
    }
    const uint32_t half = *limit / 2;
    const uint32_t pauses = half + NextRandom() % half;
    for (uint32_t i = 0; i < pauses; ++i) CpuRelax();
    *limit *= 2;
  }
  // xorshift32 per thread: cheap, and different threads draw different
  // sequences (seeded from the address of the thread's own state).
  static uint32_t NextRandom() {
    // initial-exec: no __tls_get_addr (which may allocate) inside the preload
    [[gnu::tls_model("initial-exec")]] thread_local uint32_t state = 0;
    if (state == 0) state = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(&state) >> 4) | 1u;
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return state;
  }

  std::atomic<bool> locked_{false};
};

}  // namespace kv

#endif  // KV_COMMON_TTAS_BACKOFF_LOCK_H_
