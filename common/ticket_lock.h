// The ticket lock (its strategies: store_lock_families.h).
//
// How it works (Mellor-Crummey & Scott 1991, the Linux kernel's x86 spinlock
// until 2014): two counters. A thread takes the next ticket with one
// fetch_add on next_ and waits until serving_ shows its number; unlock
// advances serving_. Waiters are served strictly in arrival order (FIFO), so
// none starves, unlike a test-and-set lock where the fastest core wins again
// and again.
//
// Memory order: the ticket fetch_add is relaxed (a ticket carries no data:
// it only fixes the order); a waiter's acquire load of serving_ pairs with
// the previous holder's release store, which orders the critical sections.
// Only the holder ever writes serving_, so unlock is a load and a release
// store, not a read-modify-write.
//
// When it wins: short critical sections, few threads per core, where
// fairness matters (no waiter's wait is longer than the queue in front of
// it). When it collapses: every waiter spins on the same serving_ word, so
// each unlock invalidates it in every waiter's cache (traffic grows with the
// number of waiters; MCS and CLH fix that); and FIFO hand-off is fatal when
// threads outnumber cores: if the thread holding the next ticket is
// preempted, nobody can take the lock until it runs again, even though the
// lock is free (SpinWait's yields only give it the chance to run).
//
// All-zero is unlocked (the preload keeps a lock in zero-filled storage).
//
// Thread safety: a TicketLock is safe for any number of threads; it is
// taken through the guards of common/mutex.h (Lock/Unlock on one thread), or
// by the preload's pthread wrappers (profile/).
#ifndef KV_COMMON_TICKET_LOCK_H_
#define KV_COMMON_TICKET_LOCK_H_

#include <atomic>
#include <cstdint>

#include "common/spin_wait.h"
#include "common/thread_annotations.h"

namespace kv {

class CAPABILITY("mutex") TicketLock {
 public:
  void Lock() ACQUIRE() {
    const uint32_t ticket = next_.fetch_add(1, std::memory_order_relaxed);
    SpinUntil([&] { return serving_.load(std::memory_order_acquire) == ticket; });
  }
  // Takes it only if nobody holds or waits for it.
  bool TryLock() TRY_ACQUIRE(true) {
    // acquire: the previous holder's section happens before ours.
    const uint32_t serving = serving_.load(std::memory_order_acquire);
    uint32_t expected = serving;
    return next_.compare_exchange_strong(expected, serving + 1, std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }
  void Unlock() RELEASE() {
    // Wraps after 2^32 tickets, which only needs fewer than 2^32 waiters.
    serving_.store(serving_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  // Held or waited for: a caller that must refuse the unlock of a free lock
  // (pthread's EPERM) asks this first.
  bool IsLocked() const {
    return serving_.load(std::memory_order_relaxed) != next_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<uint32_t> next_{0};     // the next ticket to hand out
  std::atomic<uint32_t> serving_{0};  // the ticket that may hold the lock
};

}  // namespace kv

#endif  // KV_COMMON_TICKET_LOCK_H_
