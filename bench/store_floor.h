// The microbenchmarks' floor ("unprotected"): each operation's own work (its
// artificial delays, its 100-byte copies, its sampled timing) with no lock
// and no line that one thread writes and another reads.
//
// Reads copy from one array that nobody writes after construction, so its
// lines stay shared in every core's cache. A write fills, and reads back, a
// value of the calling thread's own. A correct lock does all of this too, and
// in addition its own atomics and, when threads write shared strings, the
// cache misses those writes cause; so no lock can be faster than this floor,
// and a strategy measured faster beyond its spread is a disturbed measurement.
//
// Why not simply the store without a lock ("unprotected-racy",
// tests/store_unlocked.h): that store is not a floor. Its writers race on the
// shared strings, and on one hot string every write moves the line between
// cores; a lock whose holder runs a streak of accesses while the others back
// off moves it far less often, and beats it (docs/strategies.md has the
// figures). The benchmarks keep it as a row of its own, for what racing
// costs, and measure every lock against this floor.
//
// Thread safety: safe for any number of threads. The shared array is only
// read after construction; each thread writes only its own thread_local
// value. It does not keep what is written (no other thread ever reads it), so
// it is not a correct store and is built only into the benchmarks.
#ifndef KV_BENCH_STORE_FLOOR_H_
#define KV_BENCH_STORE_FLOOR_H_

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "common/access_timer.h"
#include "common/artificial_delay.h"
#include "common/protocol.h"
#include "common/status.h"
#include "common/store.h"
#include "common/string_array.h"

namespace kv::bench {

template <typename Timing>
class FloorStore final : public Store {
 public:
  // REQUIRES: n >= 1; `delay` outlives the store.
  FloorStore(std::size_t n, ArtificialDelay* delay) : values_(n), delay_(delay) {
    for (std::size_t i = 0; i < n; ++i) FillFrame(StringArray::InitialValue(i), &values_[i]);
  }

  static std::unique_ptr<Store> Create(std::size_t n, ArtificialDelay* delay) {
    return std::make_unique<FloorStore>(n, delay);
  }

  std::string_view name() const override { return "unprotected"; }
  std::size_t size() const override { return values_.size(); }

  // The same steps as LockedStore::Access, without the guard.
  Status Read(std::size_t pos, Value* out, AccessTiming* timing) override {
    if (pos >= values_.size()) return Status::OutOfRange("pos", pos, values_.size());
    AccessClock<Timing> clock;
    clock.Got();
    delay_->Pause();
    *out = values_[pos];
    clock.Finish(timing);
    return Status::OK();
  }

  Status Write(std::size_t pos, std::string_view text, Value* out, AccessTiming* timing) override {
    if (pos >= values_.size()) return Status::OutOfRange("pos", pos, values_.size());
    Value& own = OwnValue();
    AccessClock<Timing> clock;
    clock.Got();
    delay_->Pause();
    FillFrame(text, &own);
    delay_->Pause();
    *out = own;
    clock.Finish(timing);
    return Status::OK();
  }

 private:
  // The calling thread's value, on cache lines no other thread writes.
  static Value& OwnValue() {
    alignas(64) static thread_local Value own;
    return own;
  }

  std::vector<Value> values_;  // written only by the constructor
  ArtificialDelay* const delay_;
};

}  // namespace kv::bench

#endif  // KV_BENCH_STORE_FLOOR_H_
