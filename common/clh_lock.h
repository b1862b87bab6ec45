// The CLH queue lock (its strategies: store_lock_families.h).
//
// How it works (Craig 1993; Magnussen, Landin & Hagersten 1994): like MCS,
// a queue of nodes with each waiter spinning on a flag of its own, but the
// queue is implicit: a thread sets its node's flag ("I hold or want the
// lock"), swaps the node into tail_, and spins on its PREDECESSOR's flag
// until the predecessor clears it. Unlock with a successor is a single store
// (clear my flag): no waiting for a successor to link, unlike MCS.
//
// Where the nodes live: a waiter spins on its predecessor's node after the
// predecessor has unlocked and returned, so a node cannot live on its
// owner's stack, and nodes migrate. A null tail_ means free: the first taker
// finds no predecessor. An unlock with nobody queued behind swings tail_ back
// to null by compare-exchange and gives its node back to the node source; an
// unlock with a successor clears its flag, and the successor, once it has
// the lock, gives the predecessor's node back (nobody else refers to it any
// more: its owner left it, and we, its only successor, are done spinning on
// it). So a node is out of its source exactly while its owner holds or waits
// for a lock, and the lock itself owns nothing: all-zero is unlocked (the
// preload keeps a lock in zero-filled storage) and nothing is freed with it.
// The node source is the template parameter: ClhHeapNodes (one spare node
// per thread, the heap beyond, for the servers' ClhLock), or the preload's
// fixed static pool, which never allocates (profile/lockprof_swap.h). The
// node travels from Lock to Unlock in the guard's Context (common/mutex.h);
// a caller may put a node in Context::mine before Lock (the preload does,
// so that a pool that ran out is its EAGAIN, not a failure inside Lock).
//
// Memory order: the swap on tail_ is acq_rel: release so that a successor
// that gets our node from tail_ sees its flag set (the node may have been
// someone else's, cleared, before); acquire for the same reason in the other
// direction. The flag is cleared with release and spun on with acquire,
// which hands the critical section over and makes the adopted node safe to
// reuse. The unlock's compare-exchange back to null is release, for the next
// taker's acquire swap.
//
// When it wins: as MCS (many threads, few locks, constant traffic per
// hand-off, FIFO), with an unlock that hands over by one store. When it
// collapses: a waiter spins on a node another core wrote, which is remote
// memory on NUMA machines without coherent caches (MCS spins on its own
// node); and like every FIFO queue lock, threads outnumbering cores: a
// preempted waiter holds up everyone queued behind it.
//
// Thread safety: a BasicClhLock is safe for any number of threads; Lock and
// Unlock are called by one thread with one Context (the guards do this); the
// node source is safe for any number of threads.
#ifndef KV_COMMON_CLH_LOCK_H_
#define KV_COMMON_CLH_LOCK_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "common/cache_line.h"
#include "common/spin_wait.h"
#include "common/thread_annotations.h"

namespace kv {

// A queue node. Padded: a waiter spins on it while its owner's core writes
// its own node. A node comes back to its source flagged (Lock flags the
// predecessor's before giving it back; an uncontended Unlock never clears its
// own), so reusing it stores nothing before the swap: a store just before a
// locked instruction makes it wait for the store buffer. A node never used
// (new, or zero-filled as the preload's pool is) is flagged on its first use.
struct alignas(kCacheLineSize) ClhNode {
  std::atomic<bool> locked{false};  // set: its owner holds or waits for it (or at rest)
  uint32_t pool_link = 0;           // for a node source's own use (a free list)
};

// The servers' node source: the calling thread's one spare node, the heap
// when it has none (a thread holding several CLH locks at once), freed when
// it has one already and at thread exit.
struct ClhHeapNodes {
  static ClhNode* Take() {
    std::unique_ptr<ClhNode>& spare = Spare();
    return spare != nullptr ? spare.release() : new ClhNode;
  }
  static void Give(ClhNode* node) {
    std::unique_ptr<ClhNode>& spare = Spare();
    if (spare == nullptr) {
      spare.reset(node);
    } else {
      delete node;
    }
  }

 private:
  static std::unique_ptr<ClhNode>& Spare() {
    thread_local std::unique_ptr<ClhNode> spare;
    return spare;
  }
};

// Nodes: a node source, static ClhNode* Take() and static void Give(ClhNode*).
template <typename Nodes>
class CAPABILITY("mutex") BasicClhLock {
 public:
  // What Unlock needs from Lock (held by the guard).
  struct Context {
    ClhNode* mine = nullptr;  // the node we enqueue; Lock takes one if null
  };

  constexpr BasicClhLock() = default;
  BasicClhLock(const BasicClhLock&) = delete;
  BasicClhLock& operator=(const BasicClhLock&) = delete;

  void Lock(Context* ctx) ACQUIRE() {
    ClhNode* const mine = Flagged(ctx);
    ClhNode* const pred = tail_.exchange(mine, std::memory_order_acq_rel);
    if (pred == nullptr) return;  // free: ours
    SpinUntil([pred] { return !pred->locked.load(std::memory_order_acquire); });
    pred->locked.store(true, std::memory_order_relaxed);  // at rest: flagged
    Nodes::Give(pred);  // its owner let go of it, and we were its only successor
  }

  // Takes it only if nobody holds or waits for it; the node goes back to
  // its source when it fails.
  bool TryLock(Context* ctx) TRY_ACQUIRE(true) {
    ClhNode* const mine = Flagged(ctx);
    ClhNode* expected = nullptr;
    if (tail_.compare_exchange_strong(expected, mine, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      return true;
    }
    Nodes::Give(mine);
    ctx->mine = nullptr;
    return false;
  }

  void Unlock(Context* ctx) RELEASE() {
    ClhNode* expected = ctx->mine;
    if (tail_.compare_exchange_strong(expected, nullptr, std::memory_order_release,
                                      std::memory_order_relaxed)) {
      Nodes::Give(ctx->mine);  // nobody queued behind us: the node is free again
      return;
    }
    ctx->mine->locked.store(false, std::memory_order_release);  // the successor goes
  }

 private:
  // The node to enqueue, flagged (published by the release of the swap): one at
  // rest is already, so nothing is stored on the reuse path.
  static ClhNode* Flagged(Context* ctx) {
    if (ctx->mine == nullptr) ctx->mine = Nodes::Take();
    if (!ctx->mine->locked.load(std::memory_order_relaxed)) {
      ctx->mine->locked.store(true, std::memory_order_relaxed);  // never used yet
    }
    return ctx->mine;
  }

  std::atomic<ClhNode*> tail_{nullptr};  // the last node enqueued; null: free
};

using ClhLock = BasicClhLock<ClhHeapNodes>;

}  // namespace kv

#endif  // KV_COMMON_CLH_LOCK_H_
