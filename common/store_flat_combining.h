// Flat combining: one lock for the array, held by one thread at a time
// that applies everybody's requests.
//
// How it works (Hendler, Incze, Shavit & Tzafrir, "Flat Combining and the
// Synchronization-Parallelism Tradeoff", SPAA 2010): a thread does not take
// the lock to do its own access; it publishes its request (read or write,
// position, text, where the reply goes) in a publication slot and then
// either finds it done or tries the lock. The thread that gets the lock
// becomes the combiner: it scans all kPublicationSlots slots, applies every
// pending request in turn (each with the store's delays, exactly as the
// owner would have under one-mutex), marks it done, repeats while a pass
// finds work (at most kCombinePasses passes, so a combiner returns to its
// own caller), and unlocks. Waiters spin on their own slot's state and retry
// the lock now and then, so a request published just after a combiner's
// last pass is still served (by its own thread, if by nobody else).
// Publication slots are a fixed array rather than the paper's per-thread
// list: a thread claims a free one per request (starting from a per-thread
// hint, so threads rarely collide), which needs no registration and nothing
// to clean up when a thread exits (a connection thread lives for one
// connection here).
//
// Why a Store and not a lock type: combining needs the request as data that
// another thread can apply. The lock-table seam (store_lock_table.h) hands a
// lock type only Lock() and Unlock() around code that runs on the caller's
// own thread, so the combiner would have nothing to apply; like
// seqlock-per-slot and pointer-swap, this is a Store of its own.
//
// Memory order: a slot's state is the hand-over. The owner fills the request
// while the slot is claimed and publishes it with a release store of
// kPending; the combiner reads the state with acquire, applies the request
// (writing *out and the times) and stores kDone with release; the owner
// reads kDone with acquire before it looks at the result, and frees the slot
// with release, which the next claimer's acquire compare-exchange reads. The
// combiner lock orders the combiners' accesses to the values (acquire
// exchange, release store).
//
// When it wins: many threads hammering one small shared structure with short
// operations: one thread applies a batch with the data hot in its cache and
// the lock changes hands once per batch instead of once per operation, so
// throughput stays flat as threads are added where a mutex's drops. When it
// loses: the combiner works serially, so it never beats one thread's speed
// (per-slot locks run accesses to different strings in parallel; here they
// queue); with the lab's delay the combiner sleeps through every delay of
// the batch (one-mutex's throughput, with the latency moved onto the
// combiner's own request); and waiters spin and yield instead of sleeping,
// so with more threads than cores they take CPU from the combiner.
//
// Thread safety: safe for any number of threads. values_ is GUARDED_BY the
// combiner lock; a publication slot's request belongs to its owner from
// claim to kPending and from kDone to free, to the combiner in between.
#ifndef KV_COMMON_STORE_FLAT_COMBINING_H_
#define KV_COMMON_STORE_FLAT_COMBINING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "common/access_timer.h"
#include "common/spin_wait.h"
#include "common/store.h"
#include "common/store_lock_table.h"
#include "common/store_slot_base.h"
#include "common/string_array.h"
#include "common/thread_annotations.h"

namespace kv {

// Timing: a policy from common/access_timer.h (the server's Timed by default;
// the microbenchmarks sample with SampledTsc). The owner decides whether its
// request is sampled; the combiner reads the clock only for one that is.
template <typename Timing = Timed>
class BasicFlatCombiningStore final
    : public SlotStoreBase<BasicFlatCombiningStore, Timing, "flat-combining"> {
  using Base = SlotStoreBase<BasicFlatCombiningStore, Timing, "flat-combining">;

 public:
  static constexpr std::size_t kPublicationSlots = 64;
  static constexpr int kCombinePasses = 4;

  // REQUIRES: n >= 1; `delay` outlives the store.
  BasicFlatCombiningStore(std::size_t n, ArtificialDelay* delay) : Base(n, delay) {
    if (!combiner_.TryLock()) std::abort();  // nobody else can see the store yet
    values_.resize(n);
    for (std::size_t i = 0; i < n; ++i) FillFrame(StringArray::InitialValue(i), &values_[i]);
    combiner_.Unlock();
  }

  // wait_ns: from the call to the moment a combiner started on the request;
  // hold_ns: the request's own section (its delays and copies).
  void ReadAt(std::size_t pos, Value* out, AccessTiming* timing) {
    Execute({.write = false, .pos = pos, .text = {}, .out = out}, timing);
  }
  void WriteAt(std::size_t pos, std::string_view text, Value* out, AccessTiming* timing) {
    Execute({.write = true, .pos = pos, .text = text, .out = out}, timing);
  }

 private:
  // A publication slot's states.
  static constexpr uint32_t kFree = 0;
  static constexpr uint32_t kClaimed = 1;  // its owner is filling the request
  static constexpr uint32_t kPending = 2;  // waiting for a combiner
  static constexpr uint32_t kDone = 3;     // applied; the result is in *out

  struct Request {
    bool write = false;
    std::size_t pos = 0;
    std::string_view text;  // what a write stores (the owner's buffer)
    Value* out = nullptr;   // the owner's reply
    bool timed = false;     // the owner samples this request: the combiner stamps it
    int64_t got = 0;        // set by the combiner: when it started on it (policy ticks)
    int64_t done = 0;       // and when it finished
  };
  struct alignas(kCacheLineSize) PublicationSlot {
    std::atomic<uint32_t> state{kFree};
    Request request;  // see the thread-safety note at the top
  };

  // A try-only lock: whoever gets it combines; nobody blocks on it.
  class CAPABILITY("mutex") CombinerLock {
   public:
    bool TryLock() TRY_ACQUIRE(true) {
      return !held_.load(std::memory_order_relaxed) &&
             !held_.exchange(true, std::memory_order_acquire);
    }
    void Unlock() RELEASE() { held_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> held_{false};
  };

  void Execute(Request request, AccessTiming* timing) {
    const AccessClock<Timing> clock;
    const int64_t asked = clock.Now();
    request.timed = clock.sampled();
    PublicationSlot& slot = Claim();
    slot.request = request;
    slot.state.store(kPending, std::memory_order_release);
    SpinWait wait;
    while (slot.state.load(std::memory_order_acquire) != kDone) {
      if (combiner_.TryLock()) {
        Combine();
        combiner_.Unlock();
      } else {
        wait.Once();
      }
    }
    clock.Report(slot.request.got - asked, slot.request.done - slot.request.got, timing);
    slot.state.store(kFree, std::memory_order_release);
  }

  // A free publication slot, now claimed by the caller.
  PublicationSlot& Claim() {
    static std::atomic<std::size_t> next_hint{0};
    thread_local const std::size_t hint =
        next_hint.fetch_add(1, std::memory_order_relaxed) % kPublicationSlots;
    SpinWait wait;
    for (;;) {
      for (std::size_t i = 0; i < kPublicationSlots; ++i) {
        PublicationSlot& slot = slots_[(hint + i) % kPublicationSlots];
        uint32_t expected = kFree;
        if (slot.state.load(std::memory_order_relaxed) == kFree &&
            slot.state.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
          return slot;
        }
      }
      wait.Once();  // more threads than publication slots: wait for one
    }
  }

  // Passes over the publication slots while they find work (bounded).
  void Combine() REQUIRES(combiner_) {
    for (int pass = 0; pass < kCombinePasses; ++pass) {
      bool found = false;
      for (PublicationSlot& slot : slots_) {
        if (slot.state.load(std::memory_order_acquire) != kPending) continue;
        Apply(&slot.request);
        slot.state.store(kDone, std::memory_order_release);
        found = true;
      }
      if (!found) return;
    }
  }

  // One request's critical section, as LockedStore's: a read is a delay and
  // a copy; a write is set (a delay) and get (a delay, a copy).
  void Apply(Request* r) REQUIRES(combiner_) {
    if (r->timed) r->got = Timing::Now();
    Value& value = values_[r->pos];
    if (r->write) {
      this->delay_->Pause();  // setContent()
      FillFrame(r->text, &value);
    }
    this->delay_->Pause();  // getContent()
    *r->out = value;
    if (r->timed) r->done = Timing::Now();
  }

  CombinerLock combiner_;
  std::vector<Value> values_ GUARDED_BY(combiner_);
  PublicationSlot slots_[kPublicationSlots];
};

using FlatCombiningStore = BasicFlatCombiningStore<>;

}  // namespace kv

#endif  // KV_COMMON_STORE_FLAT_COMBINING_H_
