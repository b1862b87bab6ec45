// Lock-free-style reads by atomic pointer swap of immutable strings
// (RCU-like: read-copy-update).
//
// How it works: slot i holds a std::atomic<std::shared_ptr<const Value>>. A
// value, once published, is never modified. A reader loads the pointer (which
// takes a reference) and copies the value it points to; it never waits for a
// writer. A writer (serialised with the other writers of the slot by
// write_mu) builds a NEW value in freshly allocated memory and swaps it in
// with one atomic store. Readers that loaded the old pointer keep reading the
// old, intact value.
//
// Memory reclamation: reference counting through std::shared_ptr. The old
// value is freed when the last reader that loaded it drops its reference (or
// at once by the writer's store if no reader holds it). Nothing is deferred,
// so nothing can leak under a long run; tests run this store under ASan/LSan.
// (Epoch-based reclamation or hazard pointers avoid the reference-count
// traffic but need a grace-period or scan mechanism; not worth it here.)
// Caveat: libstdc++ (GCC 12) implements std::atomic<std::shared_ptr> with a
// lock bit inside the pointer word, so a load is a short spin-protected
// reference increment, not wait-free; readers still never wait for a writer's
// delay or copy, only for another thread's pointer load/store of the same slot.
//
// Semantics as in store.h: a write holds its slot's write_mu (its exclusive
// section) for set (one delay, then the swap) and get (one delay, then a copy
// of what it published); a read takes one delay, then copies.
//
// When it wins: read-mostly data that is replaced whole (configuration,
// routing tables: the Linux kernel's RCU; the reason read paths in many
// servers take no lock). Readers never block writers or each other. When it
// loses: write-heavy loads (one allocation and free per write, plus two
// reference-count atomics on a shared line per read), and on one hot slot the
// reference count is itself a contended cache line.
//
// Thread safety: safe for any number of threads. Per slot: write_mu
// serialises writers; current is only accessed atomically; the Value it
// points to is immutable after publication.
#ifndef KV_COMMON_STORE_POINTER_SWAP_H_
#define KV_COMMON_STORE_POINTER_SWAP_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string_view>

#include "common/clock.h"
#include "common/store.h"
#include "common/string_array.h"

namespace kv {

class PointerSwapStore final : public Store {
 public:
  static constexpr std::string_view kStrategyName = "pointer-swap";

  // REQUIRES: n >= 1; `delay` outlives the store.
  PointerSwapStore(std::size_t n, ArtificialDelay* delay)
      : n_(n), delay_(delay), slots_(std::make_unique<Slot[]>(n)) {
    for (std::size_t i = 0; i < n; ++i) {
      slots_[i].current.store(MakeValue(StringArray::InitialValue(i)),
                              std::memory_order_relaxed);
    }
  }

  static std::unique_ptr<Store> Create(std::size_t n, ArtificialDelay* delay) {
    return std::make_unique<PointerSwapStore>(n, delay);
  }

  std::string_view name() const override { return kStrategyName; }
  std::size_t size() const override { return n_; }

  // Readers take no lock: wait_ns is 0, hold_ns the delay plus the copy.
  Status Read(std::size_t pos, Value* out, AccessTiming* timing) override {
    if (pos >= n_) return Status::OutOfRange("pos", pos, n_);
    const int64_t start = MonotonicNanos();
    delay_->Pause();
    {
      // The reference keeps this version alive while we copy it, even if a
      // writer swaps in a new one meanwhile.
      const std::shared_ptr<const Value> snapshot =
          slots_[pos].current.load(std::memory_order_acquire);
      *out = *snapshot;
    }
    timing->wait_ns = 0;
    timing->hold_ns = MonotonicNanos() - start;
    return Status::OK();
  }

  Status Write(std::size_t pos, std::string_view text, Value* out,
               AccessTiming* timing) override {
    if (pos >= n_) return Status::OutOfRange("pos", pos, n_);
    Slot& slot = slots_[pos];
    const int64_t asked = MonotonicNanos();
    int64_t got;
    {
      std::lock_guard<std::mutex> guard(slot.write_mu);
      got = MonotonicNanos();
      delay_->Pause();  // set
      std::shared_ptr<const Value> fresh = MakeValue(text);
      slot.current.store(fresh, std::memory_order_release);
      delay_->Pause();  // get: write_mu excludes other writers, so `fresh`
      *out = *fresh;    // is still the slot's value
    }
    timing->wait_ns = got - asked;
    timing->hold_ns = MonotonicNanos() - got;
    return Status::OK();
  }

 private:
  struct alignas(64) Slot {
    std::atomic<std::shared_ptr<const Value>> current;  // immutable value
    std::mutex write_mu;  // serialises this slot's writers
  };

  static std::shared_ptr<const Value> MakeValue(std::string_view text) {
    auto v = std::make_shared<Value>();
    FillFrame(text, v.get());
    return v;
  }

  const std::size_t n_;
  ArtificialDelay* const delay_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace kv

#endif  // KV_COMMON_STORE_POINTER_SWAP_H_
