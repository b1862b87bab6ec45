// Lock-free reads by atomic pointer swap of immutable strings (RCU-like:
// read-copy-update), with hazard pointers for memory reclamation.
//
// How it works: slot i holds a std::atomic<const Value*> to a value that,
// once published, is never modified. A reader protects the current pointer
// with a hazard pointer (common/hazard_pointer.h: publish it, re-check it is
// still current) and copies the value; it takes no lock and never waits for
// a writer. A writer (serialised with the other writers of the slot by
// write_mu) builds a NEW value in fresh memory, swaps it in with one atomic
// exchange, and retires the old one.
//
// Memory reclamation: hazard pointers. A retired value is freed by a later
// Retire() scan once no reader's hazard record points to it; at most about
// 2 x (reader threads) + 16 retired values wait at any time, and the store's
// destructor frees the rest, so nothing leaks under a long run (the tests run
// this store under ASan/LeakSanitizer). Why not std::atomic<std::shared_ptr>:
// libstdc++ 12 implements it with a lock bit whose release in load() is
// relaxed, which ThreadSanitizer reports as a data race on the pointer (and a
// load is a spin-protected reference increment, not lock-free). Epoch-based
// reclamation would also work; hazard pointers bound the garbage without
// needing every reader to pass through quiescent states.
//
// Semantics as in store.h: a write holds its slot's write_mu (its exclusive
// section) for set (one delay, then the swap) and get (one delay, then a copy
// of what it published); a read protects the current value, takes one delay,
// then copies it.
//
// When it wins: read-mostly data that is replaced whole (configuration,
// routing tables: the Linux kernel's RCU; the reason read paths in many
// servers take no lock). Readers never block writers or each other and write
// only their own hazard record. When it loses: write-heavy loads (an
// allocation and a deferred free per write, and a retire mutex shared by all
// slots), and every read pays two seq_cst operations (a full fence on x86).
//
// Thread safety: safe for any number of threads. Per slot: write_mu
// serialises writers; current is only accessed atomically; the Value it
// points to is immutable after publication and freed only via retired_.
#ifndef KV_COMMON_STORE_POINTER_SWAP_H_
#define KV_COMMON_STORE_POINTER_SWAP_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string_view>

#include "common/access_timer.h"
#include "common/hazard_pointer.h"
#include "common/mutex.h"
#include "common/protocol.h"
#include "common/store.h"
#include "common/store_slot_base.h"
#include "common/string_array.h"

namespace kv {

// One string's current value and its writers' mutex, a cache line of its
// own. It does not depend on the store's timing policy, so every policy
// shares one type.
struct alignas(64) PointerSwapSlot {
  std::atomic<const Value*> current{nullptr};  // immutable value
  // Serialises this slot's writers. It guards no member in the analysis's
  // sense: `current` is atomic and readers load it without the lock; the
  // mutex makes each writer's swap-then-read-back one exclusive section.
  Mutex write_mu;
};

// Timing: a policy from common/access_timer.h (the server's Timed by default;
// the microbenchmarks sample with SampledTsc).
template <typename Timing = Timed>
class BasicPointerSwapStore final
    : public SlotStoreBase<BasicPointerSwapStore, Timing, "pointer-swap"> {
  using Base = SlotStoreBase<BasicPointerSwapStore, Timing, "pointer-swap">;

 public:
  // REQUIRES: n >= 1; `delay` outlives the store.
  BasicPointerSwapStore(std::size_t n, ArtificialDelay* delay)
      : Base(n, delay), slots_(std::make_unique<Slot[]>(n)) {
    for (std::size_t i = 0; i < n; ++i) {
      slots_[i].current.store(AllocateValue(StringArray::InitialValue(i)),
                              std::memory_order_relaxed);
    }
  }
  // REQUIRES: no thread is still using the store.
  ~BasicPointerSwapStore() override {
    for (std::size_t i = 0; i < this->n_; ++i) {
      // Takes back what AllocateValue() gave the slot; freed here.
      std::unique_ptr<const Value> last(slots_[i].current.load(std::memory_order_relaxed));
    }
  }
  BasicPointerSwapStore(const BasicPointerSwapStore&) = delete;
  BasicPointerSwapStore& operator=(const BasicPointerSwapStore&) = delete;

  // Readers take no lock: wait_ns is the time to protect the pointer (a
  // retry only if a writer swapped meanwhile), hold_ns the delay plus the
  // copy, timed by the same AccessClock as LockedStore, so benchmarks compare alike.
  void ReadAt(std::size_t pos, Value* out, AccessTiming* timing) {
    AccessClock<Timing> clock;
    {
      // The hazard keeps this version alive while we pause and copy it, even
      // if a writer swaps in a new one meanwhile.
      HazardGuard guard;
      const Value* current = guard.Protect(slots_[pos].current);
      clock.Got();
      this->delay_->Pause();
      *out = *current;
    }
    clock.Finish(timing);
  }

  void WriteAt(std::size_t pos, std::string_view text, Value* out, AccessTiming* timing) {
    Slot& slot = slots_[pos];
    const Value* fresh = nullptr;
    TimedSlotWrite<Timing>(
        &slot.write_mu, this->delay_, timing,
        [&] {
          fresh = AllocateValue(text);
          // seq_cst: the hazard-pointer protocol needs the swap ordered
          // before the retire scan's reads of the hazard records.
          retired_.Retire(slot.current.exchange(fresh, std::memory_order_seq_cst));
        },
        // Only a later writer of this slot (excluded by write_mu) could
        // retire `fresh`.
        [&] { *out = *fresh; });
  }

  // Retired values not yet freed (for tests).
  std::size_t pending_reclamation() { return retired_.pending(); }

 private:
  using Slot = PointerSwapSlot;

  // Ownership of a value: made here, held as a raw pointer by its slot's
  // atomic `current` while published (readers need a plain atomic pointer),
  // then handed to retired_ (RetireList, which frees it when no hazard holds
  // it) or, at the end, taken back by the destructor. No other path frees one.
  static const Value* AllocateValue(std::string_view text) {
    auto v = std::make_unique<Value>();
    FillFrame(text, v.get());
    return v.release();
  }

  std::unique_ptr<Slot[]> slots_;
  RetireList<Value> retired_;  // unlinked values, freed when unhazarded
};

using PointerSwapStore = BasicPointerSwapStore<>;

}  // namespace kv

#endif  // KV_COMMON_STORE_POINTER_SWAP_H_
