// BRAVO, a reader/writer lock over another one (its strategies:
// store_lock_families.h: over the pthread rwlock; the preload's: over the
// phase-fair lock).
//
// How it works (Dice & Kogan, "BRAVO: Biased Locking for Reader-Writer
// Locks", USENIX ATC 2019): a wrapper that gives an existing rwlock (the
// template parameter Base: PthreadRwLock, a default, reader-preferring
// pthread_rwlock_t as std::shared_mutex; or PhaseFairRwLock) a fast path for
// readers. One table of kTableSlots pointers is shared by every
// BRAVO lock in the process. While the lock's reader_bias_ is on, a reader
// hashes (its thread, the lock) to a slot, installs the lock's address there
// with one compare-exchange, re-checks the bias and is in: it never touches
// the underlying lock, so readers of one lock write different cache lines
// instead of all bouncing the rwlock's reader count. Unlock clears the slot.
// A reader that finds the bias off or its slot taken (another lock or
// thread hashed there) takes the underlying lock's read side.
// A writer takes the underlying write lock (which excludes slow readers)
// and, if the bias is on, revokes it: turns it off, then scans the whole
// table and waits until no slot holds this lock (the fast readers drained).
// Revocation costs a scan of the table, so afterwards the bias stays off
// until now + kInhibitFactor x (the scan's duration); the first slow reader
// after that turns it back on. That bounds the time spent revoking to about
// 1/(kInhibitFactor + 1) of the time. The bias starts off, so building a
// store (a write per lock) never scans.
//
// Memory order: the reader's slot compare-exchange and bias re-check, and
// the writer's bias store and slot loads, are seq_cst: this is a Dekker
// pattern (each side stores one location, then loads the other), which
// acquire/release does not order; seq_cst guarantees that the reader sees
// the bias off or the writer sees the reader's slot, never neither. A fast
// reader leaves with a release store of null that the writer's scan reads
// (acquire), so the reader's section comes before the writer's. A fast
// reader sees earlier writers' sections because the bias it read as on was
// turned on by a slow reader that held the underlying read lock after those
// writers unlocked. inhibit_until_ is relaxed: it is written under the write
// lock and read under the read lock, which order it.
//
// When it wins: read-mostly data read by many threads on many cores: reads
// scale because they write no shared line. When it collapses: writes. Each
// write after a read-biased period scans the 4096-slot table (32 KB) and
// waits for fast readers; the inhibit window then sends all reads down the
// slow path, so write-heavy loads get the underlying rwlock plus the scans.
// Readers that hash to an occupied slot also fall back to the slow path.
// Over the pthread rwlock, writers can starve under a stream of slow-path
// readers (over the phase-fair lock they cannot).
//
// All-zero is unlocked over an all-zero Base (the preload keeps a lock in
// zero-filled storage).
//
// Thread safety: a BravoRwLock is safe for any number of threads; it is
// taken through the guards of common/mutex.h, whose Context carries a fast
// reader's slot from LockShared to UnlockShared (the preload keeps it in a
// per-thread pool found again by the lock's address).
#ifndef KV_COMMON_BRAVO_RWLOCK_H_
#define KV_COMMON_BRAVO_RWLOCK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/clock.h"
#include "common/spin_wait.h"
#include "common/thread_annotations.h"

namespace kv {

// Base: a reader/writer lock with Lock, TryLock, Unlock, LockShared,
// TryLockShared and UnlockShared.
template <typename Base>
class CAPABILITY("shared_mutex") BravoRwLock {
 public:
  static constexpr std::size_t kTableSlots = 4096;  // as the paper
  static constexpr int64_t kInhibitFactor = 9;      // the paper's N

  // A reader's slot in the table, or null if it holds the underlying lock.
  struct Context {
    std::atomic<const void*>* slot = nullptr;
  };

  // The analysis checks callers against this lock; inside, base_ is taken in
  // one call and released in another, which it cannot follow.
  constexpr BravoRwLock() = default;
  BravoRwLock(const BravoRwLock&) = delete;
  BravoRwLock& operator=(const BravoRwLock&) = delete;

  void LockShared(Context* ctx) ACQUIRE_SHARED() NO_THREAD_SAFETY_ANALYSIS {
    if (reader_bias_.load(std::memory_order_relaxed) && TryFastRead(ctx)) return;
    ctx->slot = nullptr;
    base_.LockShared();
    Rebias();
  }
  bool TryLockShared(Context* ctx) TRY_ACQUIRE_SHARED(true) NO_THREAD_SAFETY_ANALYSIS {
    if (reader_bias_.load(std::memory_order_relaxed) && TryFastRead(ctx)) return true;
    ctx->slot = nullptr;
    if (!base_.TryLockShared()) return false;
    Rebias();
    return true;
  }
  void UnlockShared(Context* ctx) RELEASE_SHARED() NO_THREAD_SAFETY_ANALYSIS {
    if (ctx->slot != nullptr) {
      // A revoking writer reads this: our reads come before its section.
      ctx->slot->store(nullptr, std::memory_order_release);
    } else {
      base_.UnlockShared();
    }
  }

  void Lock(Context* /*ctx*/) ACQUIRE() NO_THREAD_SAFETY_ANALYSIS {
    base_.Lock();
    if (reader_bias_.load(std::memory_order_relaxed)) Revoke();
  }
  // Never waits for fast readers: with one in, the try fails, and the bias
  // goes back on before the base lock is let go (a bias that is off must
  // mean no fast reader is in: Lock revokes only a bias that is on).
  bool TryLock(Context* /*ctx*/) TRY_ACQUIRE(true) NO_THREAD_SAFETY_ANALYSIS {
    if (!base_.TryLock()) return false;
    if (!reader_bias_.load(std::memory_order_relaxed)) return true;
    reader_bias_.store(false, std::memory_order_seq_cst);
    for (std::atomic<const void*>& slot : table_) {
      if (slot.load(std::memory_order_seq_cst) == this) {
        reader_bias_.store(true, std::memory_order_relaxed);
        base_.Unlock();
        return false;
      }
    }
    return true;
  }
  void Unlock(Context* /*ctx*/) RELEASE() NO_THREAD_SAFETY_ANALYSIS { base_.Unlock(); }

  // The underlying lock, for what only it can say (PhaseFairRwLock's
  // HasReaders, of the slow readers).
  const Base& base() const { return base_; }

 private:
  // Takes this lock's slot for the calling thread; true if the bias was
  // still on afterwards (then ctx->slot is set and the read may go ahead).
  bool TryFastRead(Context* ctx) {
    std::atomic<const void*>* const slot = &table_[SlotIndex()];
    const void* expected = nullptr;
    if (!slot->compare_exchange_strong(expected, this, std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {
      return false;  // taken by another (thread, lock)
    }
    if (reader_bias_.load(std::memory_order_seq_cst)) {
      ctx->slot = slot;
      return true;
    }
    slot->store(nullptr, std::memory_order_relaxed);  // raced a revocation
    return false;
  }

  // With the read lock held (so no writer is revoking): the bias back on
  // once the inhibit time has passed.
  void Rebias() {
    if (!reader_bias_.load(std::memory_order_relaxed) &&
        MonotonicNanos() >= inhibit_until_.load(std::memory_order_relaxed)) {
      reader_bias_.store(true, std::memory_order_release);
    }
  }

  // With the write lock held: no new fast readers, wait for the old ones.
  void Revoke() {
    reader_bias_.store(false, std::memory_order_seq_cst);
    const int64_t start = MonotonicNanos();
    for (std::atomic<const void*>& slot : table_) {
      SpinUntil([&] { return slot.load(std::memory_order_seq_cst) != this; });
    }
    const int64_t now = MonotonicNanos();
    inhibit_until_.store(now + (now - start) * kInhibitFactor, std::memory_order_relaxed);
  }

  // (thread, lock) -> slot, Fibonacci hashing. A thread is told apart by the
  // address of a thread_local, unique among running threads (initial-exec:
  // no __tls_get_addr, which may allocate, inside the preload).
  std::size_t SlotIndex() const {
    [[gnu::tls_model("initial-exec")]] thread_local char thread_key = 0;
    const uintptr_t mix = ((reinterpret_cast<uintptr_t>(&thread_key) >> 4) * 31) ^
                          (reinterpret_cast<uintptr_t>(this) >> 6);
    return static_cast<std::size_t>((mix * 0x9E3779B97F4A7C15ull) >> 52);  // 12 bits
  }

  // The visible-readers table: a slot holds the lock a fast reader is in.
  static_assert(kTableSlots == std::size_t{1} << 12, "SlotIndex() takes 12 bits");
  static inline std::atomic<const void*> table_[kTableSlots] = {};

  Base base_;
  std::atomic<bool> reader_bias_{false};   // fast reads allowed
  std::atomic<int64_t> inhibit_until_{0};  // MonotonicNanos() before which it stays off
};

}  // namespace kv

#endif  // KV_COMMON_BRAVO_RWLOCK_H_
