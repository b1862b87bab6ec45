// Store: the string array plus the locking strategy that guards it.
//
// This is the one interface the server core talks to. The four lab variants
// (and any further strategy) are Stores; the server never knows which lock is
// inside. Lock-based strategies are one line each: a LockedStore over a lock
// table of some granularity and lock type (common/store_lock_table.h); a
// strategy that is not a lock (a seqlock, pointer swapping) implements Store
// directly.
//
// Semantics, identical for every strategy:
//   Read(pos)        : one artificial delay, then a copy of slot pos.
//   Write(pos, text) : set (one delay) then get (one delay) under ONE
//                      exclusive critical section, as the kit's write path
//                      does; *out receives the value read back.
// Both return OutOfRange for pos >= size() and leave the array untouched.
// AccessTiming reports how long the caller waited for the lock and how long it
// held it; no lock is ever held when these functions return, so the caller
// does its socket I/O unlocked.
//
// Thread safety: every Store is safe for concurrent use by any number of
// threads (except the test-only unlocked store, which exists to be caught).
#ifndef KV_COMMON_STORE_H_
#define KV_COMMON_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/artificial_delay.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/string_array.h"

namespace kv {

struct AccessTiming {
  int64_t wait_ns = 0;      // from asking for the lock to getting it
  int64_t hold_ns = 0;      // from getting the lock to releasing it
  int64_t released_ns = 0;  // MonotonicNanos() at the release; 0: not known
};

// Fills *timing for an access that asked for its lock at `asked_ns` and got
// it at `got_ns` (MonotonicNanos()); call it right after releasing the lock.
inline void RecordAccessTiming(int64_t asked_ns, int64_t got_ns, AccessTiming* timing) {
  timing->wait_ns = got_ns - asked_ns;
  timing->released_ns = MonotonicNanos();
  timing->hold_ns = timing->released_ns - got_ns;
}

class Store {
 public:
  virtual ~Store() = default;

  // A short stable name, e.g. "one-mutex"; used in logs and results.
  virtual std::string_view name() const = 0;
  virtual std::size_t size() const = 0;

  virtual Status Read(std::size_t pos, Value* out, AccessTiming* timing) = 0;
  virtual Status Write(std::size_t pos, std::string_view text, Value* out,
                       AccessTiming* timing) = 0;
};

// Builds a Store of n slots whose artificial delay is `delay` (which must
// outlive it).
using StoreFactory = std::unique_ptr<Store> (*)(std::size_t n, ArtificialDelay* delay);

}  // namespace kv

#endif  // KV_COMMON_STORE_H_
