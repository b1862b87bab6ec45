// The MCS queue lock (its strategies: store_lock_families.h).
//
// How it works (Mellor-Crummey & Scott, "Algorithms for scalable
// synchronization on shared-memory multiprocessors", TOCS 1991): the lock is
// a pointer to the tail of a queue of waiters' nodes. To lock, a thread
// swaps its own node into tail_; if there was a predecessor, it links itself
// behind it (pred->next = me) and spins on a flag in ITS OWN node. To
// unlock, the holder clears its successor's flag; with no successor yet it
// swings tail_ back to null, or, if someone is just enqueueing, waits for the
// link to appear. Each waiter spins on a different cache line, written once
// by its predecessor: one cache-line transfer per hand-off however many
// threads wait (a ticket lock invalidates every waiter's copy on each
// unlock), and the queue makes it FIFO.
//
// Where the node lives: on the acquirer's stack. McsLock declares `struct
// Context` (the node), so the guards of common/mutex.h hold one and pass it
// to Lock and Unlock: it exists exactly from lock to unlock, a thread
// holding several MCS locks has one node per lock, and nothing is
// allocated. The preload, whose lock and unlock are two pthread calls, keeps
// the Context in a fixed per-thread pool instead, found again at unlock by
// the lock's address (profile/lockprof_swap.h). A node is no longer
// referenced once Unlock returns: the
// successor's only use of it (linking itself in) happens before the holder
// reads the link, and the holder's last use is clearing the successor's
// flag.
//
// A node at rest is free: next is null (a fresh Context is; Unlock leaves it
// so), so Lock stores nothing before its swap. A store just before a locked
// instruction makes the instruction wait for it to leave the store buffer,
// which on some x86 cores costs as much as the swap itself; uncontended, Lock
// is the swap alone and Unlock a load and a compare-exchange, as glibc's mutex
// is one locked instruction each way. The waiting flag is set only by a thread
// that found a predecessor, before it links itself in: the predecessor cannot
// clear it before it sees the link.
//
// Memory order: the swap on tail_ is acq_rel: acquire so that a thread that
// finds no predecessor sees the previous holder's section (its unlock swung
// tail_ back with release), release so that the successor that finds our node
// in tail_ sees it at rest (next null) before writing its link into it. The
// link is stored with release and read with acquire, so the holder's write of
// the successor's flag comes after the successor set it; the flag is cleared
// with release and spun on with acquire, which hands the critical section
// over.
//
// When it wins: many threads contending on few locks on a machine with many
// cores (and NUMA): traffic per hand-off stays constant. When it collapses:
// uncontended it costs two atomic read-modify-writes (swap and, on unlock,
// compare-exchange) against a spinlock's one; and, like every FIFO queue
// lock, when threads outnumber cores: the lock can only go to the next node
// in line, so a preempted waiter stalls everyone behind it, and an unlock
// that races an enqueue waits for a thread that may not be running.
//
// All-zero is unlocked (the preload keeps a lock in zero-filled storage).
//
// Thread safety: an McsLock is safe for any number of threads; Lock and
// Unlock are called by one thread with one Context (the guards do this).
#ifndef KV_COMMON_MCS_LOCK_H_
#define KV_COMMON_MCS_LOCK_H_

#include <atomic>

#include "common/spin_wait.h"
#include "common/thread_annotations.h"

namespace kv {

class CAPABILITY("mutex") McsLock {
 public:
  // The acquirer's queue node (held by the guard: see the top of this file).
  struct Context {
    std::atomic<Context*> next{nullptr};  // the successor, once it linked in
    std::atomic<bool> waiting{false};     // cleared by the predecessor
  };

  McsLock() = default;
  McsLock(const McsLock&) = delete;
  McsLock& operator=(const McsLock&) = delete;

  // `me` at rest (next null: see the top of this file).
  void Lock(Context* me) ACQUIRE() {
    Context* const pred = tail_.exchange(me, std::memory_order_acq_rel);
    if (pred == nullptr) return;                         // the queue was empty: ours
    me->waiting.store(true, std::memory_order_relaxed);  // ordered by the release below
    pred->next.store(me, std::memory_order_release);
    SpinUntil([me] { return !me->waiting.load(std::memory_order_acquire); });
  }

  // Takes it only if the queue is empty (`me` at rest).
  bool TryLock(Context* me) TRY_ACQUIRE(true) {
    Context* expected = nullptr;
    return tail_.compare_exchange_strong(expected, me, std::memory_order_acq_rel,
                                         std::memory_order_relaxed);
  }

  // Leaves `me` at rest.
  void Unlock(Context* me) RELEASE() {
    Context* next = me->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      Context* expected = me;
      // Nobody behind us: the queue becomes empty (release: the next thread
      // to swap tail_ sees our section).
      if (tail_.compare_exchange_strong(expected, nullptr, std::memory_order_release,
                                        std::memory_order_relaxed)) {
        return;
      }
      // Someone swapped itself in but has not linked yet: wait for the link.
      SpinUntil([&] { return (next = me->next.load(std::memory_order_acquire)) != nullptr; });
    }
    // Nobody else writes our link once the successor has: back at rest before the
    // hand-off, after which the successor may be gone.
    me->next.store(nullptr, std::memory_order_relaxed);
    next->waiting.store(false, std::memory_order_release);
  }

 private:
  std::atomic<Context*> tail_{nullptr};  // the last node in the queue; null: free
};

}  // namespace kv

#endif  // KV_COMMON_MCS_LOCK_H_
