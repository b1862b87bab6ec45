// Timing policies for LockedStore: how (and whether) an access measures its
// lock wait and hold.
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

#include "common/clock.h"

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

}  // namespace kv

#endif  // KV_COMMON_ACCESS_TIMER_H_
