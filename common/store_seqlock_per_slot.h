// A seqlock PER STRING: readers never block or write shared memory; they
// copy optimistically and retry if a writer raced them.
//
// How it works (the Linux kernel's seqcount_t, as in read-mostly kernel data
// such as the time of day): each slot has a sequence number `seq`, even when
// the slot is stable and odd while a writer is copying into it. A writer
// (serialised with the other writers of the slot by write_mu) sets seq odd,
// stores the 100-byte value as 13 64-bit words, and sets seq even again. A
// reader loads seq (retrying while it is odd), copies the 13 words into a
// local buffer, loads seq again and keeps the copy only if seq did not change;
// otherwise it retries. Only the buffer is handed out, so a torn copy is
// never seen.
//
// Memory model (why TSan and the C++ standard accept it): every shared word
// is a std::atomic<uint64_t>, so there is no data race by definition. The
// writer stores data words with release after its relaxed "seq odd" store;
// the reader loads data words with acquire before its second seq load. If the
// reader sees any word of a write in progress, its acquire load synchronises
// with that release store, which comes after seq became odd, so the second
// seq load cannot still return the old even value: the reader retries (Boehm,
// "Can seqlocks get along with programming language memory models?", MSPC
// 2012, using per-word release/acquire instead of fences; GCC's TSan does not
// model std::atomic_thread_fence). On x86 these are plain loads and stores.
//
// Semantics as in store.h, delays where the lock-based stores have them: a
// write holds its slot's write_mu (its exclusive section) for set (one delay,
// then the publish) and get (one delay, then a copy of its own value); a read
// takes one delay, then copies. Readers are never blocked by the writer's
// delays, only by its ~100-byte publish (seq odd for a few nanoseconds).
//
// When it wins: read-mostly data with short writes (the kernel's jiffies,
// timekeeping): reads scale with cores because they only read the cache line,
// never write it (a rwlock's reader count is a shared write that bounces
// between cores). When it loses: write-heavy loads on one hot slot (readers
// retry), values too large to copy twice, or data holding pointers (a reader
// may follow a pointer from a torn copy; here the value is plain bytes).
//
// Thread safety: safe for any number of threads. Per slot: write_mu
// serialises writers; seq and words are only ever accessed atomically.
#ifndef KV_COMMON_STORE_SEQLOCK_PER_SLOT_H_
#define KV_COMMON_STORE_SEQLOCK_PER_SLOT_H_

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "common/access_timer.h"
#include "common/mutex.h"
#include "common/protocol.h"
#include "common/store.h"
#include "common/store_slot_base.h"
#include "common/string_array.h"
#include "common/thread_annotations.h"

namespace kv {

// One string's seqlock and value, a cache line pair of its own. It does not
// depend on the store's timing policy, so every policy shares one type.
struct alignas(64) SeqLockSlot {
  static constexpr std::size_t kWords = (kFrameSize + 7) / 8;  // 13

  std::atomic<uint64_t> seq{0};              // odd while a writer is publishing
  Mutex write_mu;                            // serialises this slot's writers
  std::atomic<uint64_t> words[kWords] = {};  // the value, 8 bytes a word
};

// Timing: a policy from common/access_timer.h (the server's Timed by default;
// the microbenchmarks sample with SampledTsc).
template <typename Timing = Timed>
class BasicSeqLockPerSlotStore final
    : public SlotStoreBase<BasicSeqLockPerSlotStore, Timing, "seqlock-per-slot"> {
  using Base = SlotStoreBase<BasicSeqLockPerSlotStore, Timing, "seqlock-per-slot">;

 public:
  // Failed read attempts before a reader yields the CPU (a writer preempted
  // while seq is odd would otherwise make readers spin a whole time slice).
  static constexpr int kRetriesBeforeYield = 64;

  // REQUIRES: n >= 1; `delay` outlives the store.
  BasicSeqLockPerSlotStore(std::size_t n, ArtificialDelay* delay)
      : Base(n, delay), slots_(std::make_unique<Slot[]>(n)) {
    for (std::size_t i = 0; i < n; ++i) {
      Value v;
      FillFrame(StringArray::InitialValue(i), &v);
      Words w{};
      ToWords(v, &w);
      for (std::size_t k = 0; k < kWords; ++k) {
        slots_[i].words[k].store(w[k], std::memory_order_relaxed);
      }
    }
  }

  // wait_ns is the time spent in failed (raced) attempts, hold_ns the delay
  // plus the successful copy.
  void ReadAt(std::size_t pos, Value* out, AccessTiming* timing) {
    const AccessClock<Timing> clock;
    const int64_t start = clock.Now();
    this->delay_->Pause();
    const int64_t paused = clock.Now();
    int64_t attempt = paused;
    for (int failures = 1; !TryCopy(slots_[pos], out); ++failures) {
      if (failures % kRetriesBeforeYield == 0) sched_yield();
      attempt = clock.Now();
    }
    clock.Report(attempt - paused, (paused - start) + (clock.Now() - attempt), timing);
  }

  void WriteAt(std::size_t pos, std::string_view text, Value* out, AccessTiming* timing) {
    Slot& slot = slots_[pos];
    Value v;
    FillFrame(text, &v);
    Words w{};
    ToWords(v, &w);
    TimedSlotWrite<Timing>(
        &slot.write_mu, this->delay_, timing,
        [&] {
          slot.write_mu.AssertHeld();  // TimedSlotWrite holds it
          PublishLocked(w, &slot);
        },
        // write_mu excludes other writers, so the slot still holds exactly
        // what we published.
        [&] { *out = v; });
  }

 private:
  using Slot = SeqLockSlot;
  static constexpr std::size_t kWords = Slot::kWords;
  using Words = uint64_t[kWords];

  // REQUIRES: *w zeroed (its last word is only partly covered by the frame).
  static void ToWords(const Value& v, Words* w) { std::memcpy(*w, v.data(), kFrameSize); }

  // One optimistic read attempt; true (and *out filled) if no write raced.
  static bool TryCopy(const Slot& slot, Value* out) {
    const uint64_t before = slot.seq.load(std::memory_order_acquire);
    if ((before & 1) != 0) return false;  // a writer is publishing
    Words w;
    for (std::size_t k = 0; k < kWords; ++k) {
      w[k] = slot.words[k].load(std::memory_order_acquire);
    }
    if (slot.seq.load(std::memory_order_relaxed) != before) return false;
    std::memcpy(out->data(), w, kFrameSize);
    return true;
  }

  // seq is written only here, so holding write_mu makes the relaxed
  // load-then-store of seq an increment no other writer can interleave.
  static void PublishLocked(const Words& w, Slot* slot) REQUIRES(slot->write_mu) {
    const uint64_t seq = slot->seq.load(std::memory_order_relaxed);
    slot->seq.store(seq + 1, std::memory_order_relaxed);
    for (std::size_t k = 0; k < kWords; ++k) {
      // release: a reader that sees this word also sees seq odd (see top).
      slot->words[k].store(w[k], std::memory_order_release);
    }
    slot->seq.store(seq + 2, std::memory_order_release);
  }

  std::unique_ptr<Slot[]> slots_;
};

using SeqLockPerSlotStore = BasicSeqLockPerSlotStore<>;

}  // namespace kv

#endif  // KV_COMMON_STORE_SEQLOCK_PER_SLOT_H_
