// The phase-fair reader/writer lock (ticket-based, PF-T; its strategies:
// store_lock_families.h).
//
// How it works (Brandenburg & Anderson, "Spin-based reader-writer
// synchronization for multiprocessor real-time systems", Real-Time Systems
// 2010; the algorithm of Concurrency Kit's ck_pflock): four counters.
// Writers are ordered among themselves by a ticket lock (win_: tickets
// handed out, wout_: tickets served). Readers count themselves in on rin_
// (in units of kReaderInc) and out on rout_. The low two bits of rin_ are
// the writer's: kWriterPresent while a writer waits or writes, and kPhaseId,
// the parity of that writer's ticket. A writer whose turn it is sets those
// bits with one fetch_add on rin_, whose result tells it how many readers
// came in before it; it waits until rout_ says as many have left. A reader
// that finds writer bits set waits only until they CHANGE (not until they
// are clear): the current writer's exit clears them, and the next writer's
// bits carry the other parity, so readers that arrived during one write
// phase all enter before the next writer (which counted them in rin_ and
// waits for them). Reads and writes alternate in phases: a reader waits for
// at most one writer, a writer for at most one read phase and the writers
// ahead of it. Neither side starves, unlike main3's reader-preferring
// rwlock (writers starve) and the writer-preferring one (readers wait out
// every queued writer).
//
// Memory order: a reader's fetch_add on rin_ is acquire (when it enters at
// once it reads the value the last writer's release fetch_and left, which
// hands over that writer's section), its wait for the bits to change loads
// with acquire for the same reason, and it leaves with a release fetch_add
// on rout_. A writer waits for its ticket with acquire (the previous
// writer's release increment of wout_) and for rout_ with acquire: rout_ only
// ever changes by release fetch_adds, so the load that sees the count
// reached synchronises with every reader that left. The writer's own
// fetch_add on rin_ is relaxed: the partition of readers into "before" and
// "after" it comes from the total order of read-modify-writes on rin_, not
// from ordering. Its exit clears the bits with release and passes the
// writer ticket on with release.
//
// When it wins: mixed reads and writes where both sides need bounded waits
// (real-time; writer tail latency under heavy reads), with short sections:
// a read is two atomic adds, no kernel. When it collapses: every reader
// writes rin_ and rout_, so the counters' cache line bounces between cores on
// every read (a seqlock's or BRAVO's readers write nothing shared); and all
// waiting spins, which with more threads than cores or a sleeping section
// (the lab's delay) burns the CPU the holder needs.
//
// Tries: a try that sees no writer (and, to write, no reader) claims; a
// reader that slips in between a writer's look and its claim is waited for,
// as briefly as its read lasts. All-zero is unlocked (the preload keeps a
// lock in zero-filled storage).
//
// Thread safety: a PhaseFairRwLock is safe for any number of threads; it is
// taken through the guards of common/mutex.h (shared for reads), or by the
// preload (profile/).
#ifndef KV_COMMON_PFLOCK_H_
#define KV_COMMON_PFLOCK_H_

#include <atomic>
#include <cstdint>

#include "common/spin_wait.h"
#include "common/thread_annotations.h"

namespace kv {

class CAPABILITY("shared_mutex") PhaseFairRwLock {
 public:
  static constexpr uint32_t kPhaseId = 0x1;        // parity of the writer's ticket
  static constexpr uint32_t kWriterPresent = 0x2;  // a writer waits or writes
  static constexpr uint32_t kWriterBits = kPhaseId | kWriterPresent;
  static constexpr uint32_t kReaderInc = 0x100;  // one reader, above the writer bits

  void Lock() ACQUIRE() {
    const uint32_t ticket = win_.fetch_add(1, std::memory_order_relaxed);
    SpinUntil([&] { return wout_.load(std::memory_order_acquire) == ticket; });
    Drain(ticket);
  }
  bool TryLock() TRY_ACQUIRE(true) {
    uint32_t ticket = wout_.load(std::memory_order_acquire);
    if (HasReaders()) return false;
    // Ours if no writer holds or waits (every ticket handed out is served).
    if (!win_.compare_exchange_strong(ticket, ticket + 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return false;
    }
    Drain(ticket);
    return true;
  }
  void Unlock() RELEASE() {
    rin_.fetch_and(~kWriterBits, std::memory_order_release);  // readers go
    // Only the writer holding the lock writes wout_.
    wout_.store(wout_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  void LockShared() ACQUIRE_SHARED() {
    const uint32_t writer = rin_.fetch_add(kReaderInc, std::memory_order_acquire) & kWriterBits;
    if (writer == 0) return;
    // Wait for this write phase to end (the bits change), not for writers
    // to be gone: the next writer counted us and waits for us.
    SpinUntil([&] { return (rin_.load(std::memory_order_acquire) & kWriterBits) != writer; });
  }
  bool TryLockShared() TRY_ACQUIRE_SHARED(true) {
    uint32_t in = rin_.load(std::memory_order_relaxed);
    for (int i = 0; i < 8 && (in & kWriterBits) == 0; ++i) {
      if (rin_.compare_exchange_weak(in, in + kReaderInc, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  void UnlockShared() RELEASE_SHARED() { rout_.fetch_add(kReaderInc, std::memory_order_release); }

  // Some reader is in (or a writer is draining readers): a caller that must
  // refuse the read unlock of a lock nobody reads (pthread's EPERM) asks
  // this first. rout_ first, then rin_: a reader inside is counted in rin_
  // and not in rout_ at both loads, and rout_ only grows, so a held read
  // lock never looks free. (rin_ first would let a reader that came and
  // left in between make the two equal.)
  bool HasReaders() const {
    const uint32_t out = rout_.load(std::memory_order_acquire);
    return (rin_.load(std::memory_order_acquire) & ~(kReaderInc - 1)) != out;
  }

 private:
  // The write phase is ours (ticket): block new readers, wait for the ones
  // in (the old value of rin_ counts them).
  void Drain(uint32_t ticket) {
    const uint32_t readers_in =
        rin_.fetch_add(kWriterPresent | (ticket & kPhaseId), std::memory_order_relaxed);
    SpinUntil([&] { return rout_.load(std::memory_order_acquire) == readers_in; });
  }

  std::atomic<uint32_t> rin_{0};   // readers in (x kReaderInc) | writer bits
  std::atomic<uint32_t> rout_{0};  // readers out (x kReaderInc)
  std::atomic<uint32_t> win_{0};   // writer tickets handed out
  std::atomic<uint32_t> wout_{0};  // writer tickets served
};

}  // namespace kv

#endif  // KV_COMMON_PFLOCK_H_
