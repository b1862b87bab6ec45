// What the stores written without a lock table share: the Store boilerplate
// (SlotStoreBase: store_seqlock_per_slot.h, store_pointer_swap.h,
// store_flat_combining.h) and, for the two whose readers take no lock, the
// writer's exclusive section (TimedSlotWrite).
//
// Those two serialise a slot's writers with a per-slot Mutex and give a write the
// lab's two delays inside that section: set (one delay, then publish the new
// value) and get (one delay, then copy what was published back to the
// caller). Only the publish and the copy differ, so they are passed in.
//
// Thread safety: as the stores: any number of threads; `write_mu` is held
// from before `publish` to after `read_back`.
#ifndef KV_COMMON_STORE_SLOT_BASE_H_
#define KV_COMMON_STORE_SLOT_BASE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/access_timer.h"
#include "common/artificial_delay.h"
#include "common/fixed_string.h"
#include "common/mutex.h"
#include "common/protocol.h"
#include "common/status.h"
#include "common/store.h"

namespace kv {

// The part of a slot store that does not depend on how slots are kept:
// the name, the factory, the timing policy (WithTiming rebuilds the store
// with another), the size, the bounds check and the delay. StoreT<Timing>
// derives from this and has, public: a constructor (std::size_t n,
// ArtificialDelay*), and ReadAt and WriteAt, Read and Write for a pos < n.
template <template <typename> class StoreT, typename Timing, FixedString kName>
class SlotStoreBase : public Store {
 public:
  template <typename OtherTiming>
  using WithTiming = StoreT<OtherTiming>;
  static constexpr std::string_view kStrategyName = kName.view();

  static std::unique_ptr<Store> Create(std::size_t n, ArtificialDelay* delay) {
    return std::make_unique<StoreT<Timing>>(n, delay);
  }

  std::string_view name() const override { return kStrategyName; }
  std::size_t size() const override { return n_; }

  // The bounds check, once; StoreT's ReadAt/WriteAt do the access itself.
  Status Read(std::size_t pos, Value* out, AccessTiming* timing) final {
    if (pos >= n_) return Status::OutOfRange("pos", pos, n_);
    static_cast<StoreT<Timing>*>(this)->ReadAt(pos, out, timing);
    return Status::OK();
  }
  Status Write(std::size_t pos, std::string_view text, Value* out, AccessTiming* timing) final {
    if (pos >= n_) return Status::OutOfRange("pos", pos, n_);
    static_cast<StoreT<Timing>*>(this)->WriteAt(pos, text, out, timing);
    return Status::OK();
  }

 protected:
  // REQUIRES: n >= 1; `delay` outlives the store.
  SlotStoreBase(std::size_t n, ArtificialDelay* delay) : n_(n), delay_(delay) {}

  const std::size_t n_;
  ArtificialDelay* const delay_;
};

// Holds *write_mu; pauses (set); publish(); pauses (get); read_back();
// releases it. Records the lock wait and the hold in *timing as policy Timing
// says (common/access_timer.h). `publish` and
// `read_back` run with *write_mu held (call write_mu->AssertHeld() in them
// where a REQUIRES(write_mu) function needs the analysis to know).
template <typename Timing, typename Publish, typename ReadBack>
void TimedSlotWrite(Mutex* write_mu, ArtificialDelay* delay, AccessTiming* timing,
                    Publish&& publish, ReadBack&& read_back) {
  AccessClock<Timing> clock;
  {
    MutexLock guard(write_mu);
    clock.Got();
    delay->Pause();  // set
    publish();
    delay->Pause();  // get
    read_back();
  }
  clock.Finish(timing);
}

}  // namespace kv

#endif  // KV_COMMON_STORE_SLOT_BASE_H_
