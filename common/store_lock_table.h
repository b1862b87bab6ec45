// The lock-table template: every lock-based strategy is one line.
//
//   using MutexPerSlotStore = LockedStore<PerSlot<Mutex>, "mutex-per-slot">;
//
// A LockedStore<Table, name> is a Store whose n values live in a lock table;
// the table says how many locks there are and which one guards slot pos
// (the granularity), the lock type says what a lock is (mutex, rwlock,
// spinlock...). Three granularities:
//   WholeArray<L> : one lock for all n slots          (main1, main3);
//   PerSlot<L>    : one lock per slot                 (main2, main4);
//   Stripes<L>    : k locks, slot i under lock i mod k (striped-*).
// Any lock type with Lock()/Unlock() (and, for shared reads,
// LockShared()/UnlockShared()) marked CAPABILITY works (common/mutex.h).
// Readers take the lock shared when it has a shared mode, exclusively
// otherwise; writers always exclusively.
//
// Layout: a lock and the values it guards form one record, Padded to whole
// cache lines so that no two records share a line (no false sharing between
// neighbouring locks). PerSlot's record is the lock followed by its 100-byte
// value: an access touches one contiguous, cache-line-aligned record instead
// of a lock in one array and a value in another. WholeArray's and Stripes'
// records hold their lock and a vector of the values it guards.
//
// Thread safety: every record's values are GUARDED_BY its lock, and the only
// accessors REQUIRE it, so the clang build (`tsa` preset, -Wthread-safety)
// proves that no value is touched without its lock. A thread holds at most
// one lock at a time (no lock order). LockedStore is safe for any number of
// threads; the tables are only touched through it.
#ifndef KV_COMMON_STORE_LOCK_TABLE_H_
#define KV_COMMON_STORE_LOCK_TABLE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/access_timer.h"
#include "common/artificial_delay.h"
#include "common/cache_line.h"
#include "common/clock.h"
#include "common/fixed_string.h"
#include "common/limits.h"
#include "common/mutex.h"
#include "common/protocol.h"
#include "common/status.h"
#include "common/store.h"
#include "common/string_array.h"
#include "common/thread_annotations.h"

namespace kv {

// T in cache lines of its own: its size is a multiple of 64 and it starts on
// a line boundary, so it never shares a line with a neighbour.
template <typename T>
struct alignas(kCacheLineSize) Padded : T {};

inline constexpr std::size_t kDefaultStripes = 16;

// Maps a slot to its stripe (pos mod k) and to its place among that stripe's
// slots (pos div k), as a mask and a shift when k is a power of two (as
// memcached's item_lock(hv) does with its hashpower mask, thread.c).
class StripeIndex {
 public:
  // REQUIRES: n >= 1. stripes == 0 means kDefaultStripes; the result is
  // clamped to [1, min(n, kMaxStripes)] (more stripes than slots is waste).
  StripeIndex(std::size_t n, std::size_t stripes)
      : k_(std::clamp<std::size_t>(stripes == 0 ? kDefaultStripes : stripes, 1,
                                   std::min(n, kMaxStripes))),
        pow2_((k_ & (k_ - 1)) == 0),
        mask_(k_ - 1),
        shift_(Log2(k_)) {}

  std::size_t stripes() const { return k_; }
  std::size_t StripeOf(std::size_t pos) const { return pow2_ ? pos & mask_ : pos % k_; }
  std::size_t OffsetOf(std::size_t pos) const { return pow2_ ? pos >> shift_ : pos / k_; }

 private:
  static unsigned Log2(std::size_t k) {
    unsigned s = 0;
    while ((std::size_t{1} << (s + 1)) <= k) ++s;
    return s;
  }
  std::size_t k_;  // number of stripes
  bool pow2_;      // k is a power of two
  std::size_t mask_;
  unsigned shift_;
};

// Records: a lock and what it guards. Each has `Lock lock` and the two
// accessors LockedStore calls with the lock held.

// One lock and the values of every slot it guards, in slot order.
template <typename L>
struct LockAndValues {
  L lock;
  std::vector<Value> values GUARDED_BY(lock);

  void GetLocked(std::size_t i, Value* out) const REQUIRES_SHARED(lock) { *out = values[i]; }
  void SetLocked(std::size_t i, std::string_view text) REQUIRES(lock) {
    FillFrame(text, &values[i]);
  }
};

// One lock and the one value it guards.
template <typename L>
struct LockAndValue {
  L lock;
  Value value GUARDED_BY(lock);

  void GetLocked(std::size_t /*i*/, Value* out) const REQUIRES_SHARED(lock) { *out = value; }
  void SetLocked(std::size_t /*i*/, std::string_view text) REQUIRES(lock) {
    FillFrame(text, &value);
  }
};

// Granularities. Each is a lock table for LockedStore:
//   using Lock;                          the lock type
//   static constexpr bool kUsesStripes;  reads the stripe count
//   Table(std::size_t n, std::size_t stripes);
//   Record& RecordOf(pos);               the record whose lock guards pos
//   std::size_t IndexInRecord(pos);      pos's place in that record

// k locks, each in one record with the values it guards: slot pos is value
// pos div k of record pos mod k. k is kFixedStripes, or the run-time stripe
// count (--stripes) when kFixedStripes is 0. T threads on random slots
// collide on a stripe with a chance of about T^2 / (2k), so a small multiple
// of the thread count gives nearly per-slot parallelism at k records.
template <typename L, std::size_t kFixedStripes>
class StripeTable {
 public:
  using Lock = L;
  using Record = Padded<LockAndValues<L>>;
  static constexpr bool kUsesStripes = kFixedStripes == 0;

  // REQUIRES: n >= 1. stripes: see StripeIndex (ignored if kFixedStripes
  // is not 0). The values are blank frames until LockedStore fills them.
  StripeTable(std::size_t n, std::size_t stripes)
      : index_(n, kFixedStripes == 0 ? stripes : kFixedStripes),
        records_(std::make_unique<Record[]>(index_.stripes())) {
    const std::size_t k = index_.stripes();
    for (std::size_t s = 0; s < k; ++s) {
      // No other thread can see the table yet; the guard costs nothing at
      // start-up and keeps the analysis exact.
      WriteGuard<L> guard(&records_[s].lock);
      records_[s].values.resize((n - s + k - 1) / k);  // slots s, s+k, ...
    }
  }

  std::size_t stripes() const { return index_.stripes(); }
  Record& RecordOf(std::size_t pos) { return records_[index_.StripeOf(pos)]; }
  std::size_t IndexInRecord(std::size_t pos) const { return index_.OffsetOf(pos); }

 private:
  StripeIndex index_;
  std::unique_ptr<Record[]> records_;  // records_[s] guards slots i, i%k == s
};

// k locks, k from --stripes.
template <typename L>
using Stripes = StripeTable<L, 0>;

// One lock for the whole array: one stripe.
template <typename L>
using WholeArray = StripeTable<L, 1>;

// One lock per slot, each next to its value in one record.
template <typename L>
class PerSlot {
 public:
  static constexpr bool kUsesStripes = false;
  using Lock = L;
  using Record = Padded<LockAndValue<L>>;  // the lock and its value

  // REQUIRES: n >= 1. The values are blank frames until LockedStore fills
  // them.
  PerSlot(std::size_t n, std::size_t /*stripes*/) : records_(std::make_unique<Record[]>(n)) {}

  Record& RecordOf(std::size_t pos) { return records_[pos]; }
  static std::size_t IndexInRecord(std::size_t /*pos*/) { return 0; }

 private:
  std::unique_ptr<Record[]> records_;  // records_[i] guards slot i
};

// A Store over a lock table (see the top of this file). Timing, bounds
// checks and the delays are here, once, for every lock-based strategy.
// Timing: a policy from common/access_timer.h (the server's Timed by default;
// the microbenchmarks use NoTiming and SampledTsc).
template <typename Table, FixedString kName, typename Timing = Timed>
class LockedStore final : public Store {
 public:
  using TimingPolicy = Timing;
  template <typename OtherTiming>
  using WithTiming = LockedStore<Table, kName, OtherTiming>;

  static constexpr std::string_view kStrategyName = kName.view();
  static constexpr bool kUsesStripes = Table::kUsesStripes;

  // REQUIRES: n >= 1; `delay` outlives the store. `stripes` is read by
  // Stripes only (0: kDefaultStripes, clamped to [1, n]).
  LockedStore(std::size_t n, ArtificialDelay* delay, std::size_t stripes = 0)
      : n_(n), delay_(delay), table_(n, stripes) {
    for (std::size_t pos = 0; pos < n; ++pos) {
      auto& record = table_.RecordOf(pos);
      WriteGuard<Lock> guard(&record.lock);  // see StripeTable()
      record.SetLocked(table_.IndexInRecord(pos), StringArray::InitialValue(pos));
    }
  }

  static std::unique_ptr<Store> Create(std::size_t n, ArtificialDelay* delay) {
    return std::make_unique<LockedStore>(n, delay);
  }

  std::string_view name() const override { return kStrategyName; }
  std::size_t size() const override { return n_; }
  const Table& table() const { return table_; }

  Status Read(std::size_t pos, Value* out, AccessTiming* timing) override {
    return Access</*kWrite=*/false>(pos, {}, out, timing);
  }
  Status Write(std::size_t pos, std::string_view text, Value* out, AccessTiming* timing) override {
    return Access</*kWrite=*/true>(pos, text, out, timing);
  }

 private:
  using Lock = typename Table::Lock;

  // The two critical sections, side by side. A read: shared guard (where
  // the lock has a shared mode), delay, copy. A write: exclusive guard, then
  // the kit's set and get (a delay before each) in one section. No lock is
  // held on return, so the caller does its socket I/O unlocked.
  template <bool kWrite>
  Status Access(std::size_t pos, std::string_view text, Value* out, AccessTiming* timing) {
    if (pos >= n_) return Status::OutOfRange("pos", pos, n_);
    auto& record = table_.RecordOf(pos);
    const std::size_t i = table_.IndexInRecord(pos);
    AccessClock<Timing> clock;
    if constexpr (kWrite) {
      WriteGuard<Lock> guard(&record.lock);
      clock.Got();
      delay_->Pause();  // setContent()
      record.SetLocked(i, text);
      delay_->Pause();  // getContent(): the reply is the value read back
      record.GetLocked(i, out);
    } else {
      ReadGuard<Lock> guard(&record.lock);
      clock.Got();
      delay_->Pause();  // getContent(): sleep, then copy
      record.GetLocked(i, out);
    }
    clock.Finish(timing);
    return Status::OK();
  }

  const std::size_t n_;
  ArtificialDelay* const delay_;
  Table table_;
};

// A lock type in the three granularities, registered with one line
// (strategy_registry.cpp): the strategies one-<name>, <name>-per-slot and
// striped-<name>, described from `kWhat`, one such lock in words.
template <typename L, FixedString kName, FixedString kWhat>
struct LockFamily {
  static constexpr auto kFamilyName = kName;
  using One = LockedStore<WholeArray<L>, FixedString("one-") + kName>;
  using PerString = LockedStore<PerSlot<L>, kName + FixedString("-per-slot")>;
  using Striped = LockedStore<Stripes<L>, FixedString("striped-") + kName>;

  static constexpr auto kOneWhat = FixedString("one ") + kWhat + FixedString(" for the array");
  static constexpr auto kPerStringWhat = FixedString("one ") + kWhat + FixedString(" per string");
  static constexpr auto kStripedWhat =
      FixedString("one ") + kWhat + FixedString(" per stripe (--stripes K, default 16)");
};

}  // namespace kv

#endif  // KV_COMMON_STORE_LOCK_TABLE_H_
