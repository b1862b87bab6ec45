// CLH queue locks: one for the array, one per string, or k stripes.
//
// How it works (Craig 1993; Magnussen, Landin & Hagersten 1994): like MCS,
// a queue of nodes with each waiter spinning on a flag of its own, but the
// queue is implicit: a thread sets its node's flag ("I hold or want the
// lock"), swaps the node into tail_, and spins on its PREDECESSOR's flag
// until the predecessor clears it. Unlock is a single store (clear my flag):
// no compare-exchange and no waiting for a successor to link, unlike MCS.
//
// Where the nodes live: a waiter spins on its predecessor's node after the
// predecessor has unlocked and returned, so a node cannot live on its
// owner's stack. Nodes migrate instead (the classic scheme): each lock owns
// one node from construction (the first thread's predecessor, flag clear);
// a thread enqueues its spare node, and on unlock takes its predecessor's
// node as its new spare (nobody else refers to it any more: its owner left
// it, and we, its only successor, are done spinning on it), leaving its own
// node to its successor. The spare is thread_local (one per thread, freed at
// thread exit); a thread that holds several CLH locks at once takes a fresh
// node for each beyond the first and frees what it cannot keep. The node and
// its predecessor travel from Lock to Unlock in the guard's Context (see
// common/mutex.h). Cost: one 64-byte heap node per lock (clh-per-slot: one
// per string), freed with the lock.
//
// Memory order: the swap on tail_ is acq_rel: release so that a successor
// that gets our node from tail_ sees its flag set (the node may have been
// someone else's, cleared, before); acquire for the same reason in the other
// direction. The flag is cleared with release and spun on with acquire,
// which hands the critical section over and makes the adopted node safe to
// reuse.
//
// When it wins: as MCS (many threads, few locks, constant traffic per
// hand-off, FIFO), with a cheaper unlock. When it collapses: a waiter spins
// on a node another core wrote, which is remote memory on NUMA machines
// without coherent caches (MCS spins on its own node); a node per lock; and
// like every FIFO queue lock, threads outnumbering cores: a preempted waiter
// holds up everyone queued behind it.
//
// Thread safety: a ClhLock is safe for any number of threads; Lock and
// Unlock are called by one thread with one Context (the guards do this).
#ifndef KV_COMMON_STORE_CLH_LOCK_H_
#define KV_COMMON_STORE_CLH_LOCK_H_

#include <atomic>
#include <memory>

#include "common/spin_wait.h"
#include "common/store_lock_table.h"
#include "common/thread_annotations.h"

namespace kv {

class CAPABILITY("mutex") ClhLock {
 public:
  // Padded: a waiter spins on it while its owner's core writes its own node.
  struct alignas(kCacheLineSize) Node {
    std::atomic<bool> locked{false};  // set: its owner holds or waits for the lock
  };
  // What Unlock needs from Lock (held by the guard).
  struct Context {
    Node* mine = nullptr;  // the node we enqueued
    Node* pred = nullptr;  // our predecessor's, ours to keep after Unlock
  };

  ClhLock() : tail_(new Node) {}
  // REQUIRES: nobody holds or waits for the lock; then tail_ is the node of
  // the last thread to unlock (or the initial one), which nobody refers to.
  ~ClhLock() { delete tail_.load(std::memory_order_relaxed); }
  ClhLock(const ClhLock&) = delete;
  ClhLock& operator=(const ClhLock&) = delete;

  void Lock(Context* ctx) ACQUIRE() {
    Node* const mine = TakeSpare();
    mine->locked.store(true, std::memory_order_relaxed);
    Node* const pred = tail_.exchange(mine, std::memory_order_acq_rel);
    SpinUntil([pred] { return !pred->locked.load(std::memory_order_acquire); });
    ctx->mine = mine;
    ctx->pred = pred;
  }

  void Unlock(Context* ctx) RELEASE() {
    ctx->mine->locked.store(false, std::memory_order_release);  // our successor goes
    KeepSpare(ctx->pred);
  }

 private:
  // The calling thread's spare node (null after its first Lock until its
  // first Unlock, or while it holds several CLH locks).
  static std::unique_ptr<Node>& Spare() {
    thread_local std::unique_ptr<Node> spare;
    return spare;
  }
  static Node* TakeSpare() {
    std::unique_ptr<Node>& spare = Spare();
    return spare != nullptr ? spare.release() : new Node;
  }
  static void KeepSpare(Node* node) {
    std::unique_ptr<Node>& spare = Spare();
    if (spare == nullptr) {
      spare.reset(node);
    } else {
      delete node;  // we already have one (we held several CLH locks)
    }
  }

  std::atomic<Node*> tail_;  // the last node enqueued; its flag clear: free
};

using ClhLocks =
    LockFamily<ClhLock, "clh", "CLH queue lock (waiters spin on the predecessor's node)">;

}  // namespace kv

#endif  // KV_COMMON_STORE_CLH_LOCK_H_
