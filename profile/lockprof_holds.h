// The profiler's bookkeeping on the lock path, per record and per thread: a record's
// counters and histograms added to while its lock is held, and the stack of holds a thread
// times (which acquisitions, sampled). Part of lockprof.cpp, which alone includes it (its
// state is that file's; the functions inline into its lock path).
#ifndef KV_PROFILE_LOCKPROF_HOLDS_H_
#define KV_PROFILE_LOCKPROF_HOLDS_H_

#include "profile/lockprof.h"

namespace lockprof {

extern constinit uint32_t g_hold_sample;

namespace {

constexpr int kHeldMax = 64;  // locks one thread holds at once whose hold time is measured

struct Held {
  const void* o;
  Rec* r;
  uint64_t t0;
  int kind;
  uint32_t weight : 31;  // the acquisitions this hold stands for in the histogram
  uint32_t exclusive : 1;
};
LOCKPROF_TLS Held t_held[kHeldMax];
LOCKPROF_TLS int t_nheld;
LOCKPROF_TLS uint32_t t_hold_skip, t_rng;  // uncontended acquisitions until the next timed hold

// ------------------------------------------------------------------ the record table

unsigned Bucket(uint64_t ns) {
  const unsigned b = ns != 0 ? 64u - static_cast<unsigned>(__builtin_clzll(ns)) : 0;
  return b < kBuckets ? b : kBuckets - 1;
}

// A counter of a record, added to while its lock is held. Held exclusively (a mutex, an
// rwlock's write side), the lock itself keeps the other holders out: a plain add, no locked
// instruction. Shared (read side, condition variables), an atomic add.
LOCKPROF_INLINE void Bump(uint64_t* p, uint64_t v, bool exclusive) {
  if (exclusive) {
    __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
  } else {
    AtomicAdd(p, v);
  }
}

// ns, standing for `weight` acquisitions (a sampled hold stands for the ones not timed).
void HistAdd(Hist* h, uint64_t ns, uint64_t weight, bool exclusive) {
  Bump(&h->count[Bucket(ns)], weight, exclusive);
  Bump(&h->total, ns * weight, exclusive);
  uint64_t m = AtomicLoad(&h->max);
  if (exclusive) {
    if (ns > m) __atomic_store_n(&h->max, ns, __ATOMIC_RELAXED);
    return;
  }
  while (ns > m &&
         !__atomic_compare_exchange_n(&h->max, &m, ns, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

LOCKPROF_INLINE bool Exclusive(int kind, int mode) {
  return kind == kMutex || (kind == kRwlock && mode == kWrite);
}

LOCKPROF_INLINE void NoteSite(Rec* r, const void* site) {
  uintptr_t none = 0;
  if (__atomic_load_n(&r->site, __ATOMIC_RELAXED) == 0) {
    __atomic_compare_exchange_n(&r->site, &none, reinterpret_cast<uintptr_t>(site), false,
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  }
}

// ------------------------------------------------------------------ hold times, per thread

// t_nheld is read once and checked both ways each time: a signal handler that locks (not
// allowed, but done) may push or pop in between; entries may then be wrong, never outside
// the array.
LOCKPROF_INLINE void HoldBegin(const void* o, int kind, Rec* r, uint64_t t0, uint32_t weight,
                               bool exclusive) {
  const int n = t_nheld;
  if (n < 0 || n >= kHeldMax) {
    AtomicAdd(&g_holds_lost, 1);
    return;
  }
  t_nheld = n + 1;
  t_held[n] = Held{o, r, t0, kind, weight, exclusive};
}

// Whether this uncontended acquisition's hold is timed: after a random run of 0 to
// 2 * g_hold_sample - 2 untimed ones (a mean of one in g_hold_sample, never in step with a
// program's own pattern of locks), per thread; a thread's first is always timed.
LOCKPROF_INLINE bool TimeThisHold() {
  const uint32_t skip = t_hold_skip;
  if (skip > 1) {
    t_hold_skip = skip - 1;
    return false;
  }
  uint32_t x = t_rng != 0 ? t_rng : static_cast<uint32_t>(Self() >> 4) | 1;
  x ^= x << 13, x ^= x >> 17, x ^= x << 5;
  t_rng = x;
  t_hold_skip = 1 + x % (2 * g_hold_sample - 1);
  return true;
}

LOCKPROF_INLINE Held* HeldOf(const void* o, int kind) {
  const int n = t_nheld;
  for (int i = (n > kHeldMax ? kHeldMax : n) - 1; i >= 0; i--) {
    if (t_held[i].o == o && t_held[i].kind == kind) return &t_held[i];
  }
  return nullptr;
}

// The hold of (o, kind) ends now; `keep` leaves it on the stack (a condition wait gives the
// mutex back for a while and HoldResume starts the next stretch). Its record, or null.
LOCKPROF_INLINE Rec* HoldEnd(const void* o, int kind, bool keep) {
  Held* const h = HeldOf(o, kind);
  if (h == nullptr) return nullptr;  // taken before we knew, by another thread, or too deep
  Rec* const r = h->r;
  const uint64_t t1 = Now();
  HistAdd(&r->hold, ToNs(t1 - h->t0), h->weight, kind == kMutex || h->exclusive);
  if (g_timeline) TimelineAdd('h', kind == kMutex ? 'm' : h->exclusive ? 'w' : 'r', o, h->t0, t1);
  const int n = t_nheld;
  if (!keep && n > 0 && n <= kHeldMax) *h = t_held[n - 1], t_nheld = n - 1;
  return r;
}

void HoldResume(const void* o, int kind) {
  if (Held* const h = HeldOf(o, kind); h != nullptr) h->t0 = Now();
}

}  // namespace
}  // namespace lockprof

#endif  // KV_PROFILE_LOCKPROF_HOLDS_H_
