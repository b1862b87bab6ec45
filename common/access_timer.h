// Timing policies for the stores: how (and whether) an access measures its
// lock wait and hold, and AccessClock, which applies one to an access.
//
//   Timed          : every access, CLOCK_MONOTONIC (three reads). The server's
//                    path: the lab's latency log needs every request's split.
//   NoTiming       : never; the clock reads are compiled out and AccessTiming
//                    is left untouched. What a lock costs without the clock.
//   SampledTsc<K>  : 1 access in K per thread (K a power of two), with the
//                    cycle counter on x86 (calibrated once against
//                    CLOCK_MONOTONIC) and clock_gettime elsewhere. Unsampled
//                    accesses report wait_ns = hold_ns = -1.
// A policy provides kAlwaysOn, Sample(), Now() (ticks) and ToNanos(ticks).
// Why a policy and not a run-time flag: the microbenchmarks compare locks
// whose whole critical section is tens of nanoseconds, so even the three clock
// reads (about 20 ns each) would dominate; a type makes "off" cost nothing.
//
// Thread safety: all members are reentrant; SampledTsc keeps a per-thread
// counter and calibrates once (thread-safe static initialisation).
#ifndef KV_COMMON_ACCESS_TIMER_H_
#define KV_COMMON_ACCESS_TIMER_H_

#include <cstdint>
#include <type_traits>

#include "common/clock.h"
#include "common/store.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define KV_HAVE_RDTSC 1
#else
#define KV_HAVE_RDTSC 0
#endif

namespace kv {

struct Timed {
  static constexpr bool kAlwaysOn = true;
  static constexpr bool Sample() { return true; }
  static int64_t Now() { return MonotonicNanos(); }
  static constexpr int64_t ToNanos(int64_t ticks) { return ticks; }
};

struct NoTiming {
  static constexpr bool kAlwaysOn = false;
  static constexpr bool Sample() { return false; }
  static constexpr int64_t Now() { return 0; }
  static constexpr int64_t ToNanos(int64_t ticks) { return ticks; }
};

// The cycle counter's reading, or MonotonicNanos() where there is none.
inline int64_t CycleTicks() {
#if KV_HAVE_RDTSC
  return static_cast<int64_t>(__rdtsc());
#else
  return MonotonicNanos();
#endif
}

// Nanoseconds per CycleTicks() tick, measured over about 5 ms of
// CLOCK_MONOTONIC (1.0 where the ticks are nanoseconds already).
inline double MeasureNanosPerTick() {
#if KV_HAVE_RDTSC
  const int64_t ns0 = MonotonicNanos();
  const int64_t t0 = CycleTicks();
  int64_t ns1 = ns0;
  while (ns1 - ns0 < 5'000'000) ns1 = MonotonicNanos();
  const int64_t t1 = CycleTicks();
  return t1 > t0 ? static_cast<double>(ns1 - ns0) / static_cast<double>(t1 - t0) : 1.0;
#else
  return 1.0;
#endif
}

// MeasureNanosPerTick(), once per process, on first use (so a program that
// never samples never spends the 5 ms).
inline double NanosPerTick() {
  static const double ns_per_tick = MeasureNanosPerTick();
  return ns_per_tick;
}

template <uint32_t K>
struct SampledTsc {
  static_assert(K > 0 && (K & (K - 1)) == 0, "K must be a power of two");
  static constexpr bool kAlwaysOn = false;
  static constexpr uint32_t kEvery = K;
  static bool Sample() {
    static thread_local uint32_t count = 0;
    return (count++ & (K - 1)) == 0;
  }
  static int64_t Now() { return CycleTicks(); }
  static int64_t ToNanos(int64_t ticks) {
    return static_cast<int64_t>(static_cast<double>(ticks) * NanosPerTick());
  }
};

// What the microbenchmarks sample with.
using Sampled64 = SampledTsc<64>;

// One access measured under a policy: constructed before the access asks for
// its lock (that decides whether this access is sampled, and reads the clock
// if so), Got() once it holds the lock, Finish() right after releasing it.
// Timed fills every AccessTiming as RecordAccessTiming does; a sampling policy
// fills 1 access in K and marks the others -1; NoTiming leaves it untouched
// and compiles to nothing. Every store's timing goes through this one class,
// so "what a timed access measures" has one definition.
template <typename Timing>
class AccessClock {
 public:
  AccessClock() : sampled_(Timing::Sample()), asked_(Now()) {}

  bool sampled() const { return sampled_; }
  // The policy's clock, when this access is sampled (0 otherwise).
  int64_t Now() const {
    // An if, not ?:, which cppcheck misparses when Timing is a template (SampledTsc<64>).
    if (!sampled_) return 0;
    return Timing::Now();
  }
  void Got() { got_ = Now(); }
  void Finish(AccessTiming* timing) const {
    const int64_t now = Now();
    Report(got_ - asked_, now - got_, timing);
    // Timed's ticks are MonotonicNanos(): the release is a point in the server's time
    if constexpr (std::is_same_v<Timing, Timed>) timing->released_ns = now;
  }

  // For a store whose wait and hold are not one interval each (optimistic
  // readers): the two spans in the policy's ticks, measured with Now().
  void Report(int64_t wait_ticks, int64_t hold_ticks, AccessTiming* timing) const {
    if constexpr (std::is_same_v<Timing, NoTiming>) {
      (void)wait_ticks, (void)hold_ticks, (void)timing;
    } else if (sampled_) {
      timing->wait_ns = Timing::ToNanos(wait_ticks);
      timing->hold_ns = Timing::ToNanos(hold_ticks);
    } else {
      timing->wait_ns = timing->hold_ns = -1;  // not sampled
    }
  }

 private:
  const bool sampled_;
  const int64_t asked_;
  int64_t got_ = 0;
};

}  // namespace kv

#endif  // KV_COMMON_ACCESS_TIMER_H_
