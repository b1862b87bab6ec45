// lockprof: an LD_PRELOAD lock profiler, lock swapper and per-request lock tracer for any
// dynamically linked program (./lockbench profile; the command is analysis/profile/cli.py, the
// story docs/profile.md; the tracer is the grader's design check,
// analysis/grade/measure/design.py).
//
// Profiler. Every pthread mutex, rwlock and condition variable call is forwarded and noted
// in a record per lock object (by address and kind): acquisitions per mode, contended
// acquisitions (a trylock first; when it fails the acquisition was contended and the
// blocking call follows), failed trylocks, and log2 histograms of the wait and the hold in
// nanoseconds (the hold of every contended acquisition, of one uncontended one in
// $LOCKPROF_HOLD_SAMPLE, weighted), plus the return address of the first call, named with
// dladdr at dump time.
// At exit (a destructor) or on SIGINT/SIGTERM one JSON document goes to $LOCKPROF_FILE
// (lockprof_dump.cpp).
//
// Swapper. $LOCKPROF_SWAP (a name of common/swap_locks.h) replaces every normal or adaptive
// pthread mutex by that lock of common/ and every rwlock by pflock ($LOCKPROF_SWAP_RW:
// bravo-pflock, or a mutex lock taken exclusively, or pthread); $LOCKPROF_SWAP=pflock or
// bravo-pflock swaps the rwlocks alone (lockprof_swap.cpp). The state lives in the pthread
// object, in bytes glibc's normal mutex and rwlock use only inside their own lock calls (a
// lock too large for them, BRAVO, in the object's record); swapping without profiling or
// tracing, the entry points jump straight into the swap lock's own fast path. Condition waits
// on a swapped mutex release our lock, sleep on a futex sequence counter of the condition
// variable's record, and take it back.
//
// Tracer. With $LOCKPROF_TRACE_FD or $LOCKPROF_TRACE_FILE it records which lock objects each
// request of a kit-style server touched (lockprof_trace.cpp). It combines with the other two.
//
// It runs inside someone else's program, so on the lock path it never allocates (records
// in a static open-addressing table, inserted by compare-and-swap on the key; per-thread
// state in initial-exec TLS), takes no lock of its own, keeps errno, throws nothing (built
// without exceptions and RTTI, and without the C++ runtime library), and never crashes the
// program: a full table leaves the object to pthread, uncounted.
#include "profile/lockprof.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/futex.h"
#include "common/spin_wait.h"
#include "profile/lockprof_holds.inc"
#include "profile/lockprof_real.inc"
#include "profile/lockprof_swap.h"
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace lockprof {

constinit uintptr_t g_keys[kTableSize];
constinit Rec g_recs[kTableSize] = {};
constinit uint64_t g_untracked_ops, g_holds_lost;
constinit int g_profiling;
constinit char g_out_path[PATH_MAX];

namespace {

CondState g_fallback_cond;  // condvars the full table could not take share this one

}  // namespace

// Set by Configure (lockprof_config.cpp).
constinit const SwapOps *g_mutex_swap, *g_rw_swap;
constinit int g_config_state;
// Uncontended holds are timed one in g_hold_sample ($LOCKPROF_HOLD_SAMPLE, default 16): a
// timed hold reads the clock twice, and a clock read costs one to two uncontended glibc
// pairs on x86 (rdtsc 8 to 15 ns); an uncontended acquisition reads it for nothing else,
// so the average uncontended pair pays one clock read in eight.
constinit uint32_t g_hold_sample = 16;

// ------------------------------------------------------------------ small tools

uint32_t HoldSample() { return g_hold_sample; }

uint64_t ClockNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

// The clock of every wait and hold: the TSC where it is invariant (one rate on every core,
// in every power state), at a third to a half of clock_gettime's cost, two reads per
// acquisition; CLOCK_MONOTONIC otherwise. Ticks become ns by g_tick_mult, 32.32 fixed
// point, set once by Calibrate() before any time is taken.
constinit int g_use_tsc;
constinit uint64_t g_tick_mult = 1ull << 32;
// A TSC reading and the CLOCK_MONOTONIC time at that moment, from the calibration
// (Calibrate, lockprof_config.cpp).
constinit uint64_t g_tick_origin, g_ns_origin;

uint64_t Now() {
#if defined(__x86_64__)
  if (g_use_tsc) return __rdtsc();
#endif
  return ClockNs();
}

uint64_t ToNs(uint64_t ticks) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * g_tick_mult) >> 32);
}

uint64_t MonotonicNs(uint64_t ticks) {
  if (!g_use_tsc) return ticks;
  return ticks >= g_tick_origin ? g_ns_origin + ToNs(ticks - g_tick_origin)
                                : g_ns_origin - ToNs(g_tick_origin - ticks);
}

void Say(const char* a, const char* b) {
  syscall(SYS_write, 2, a, strlen(a));
  syscall(SYS_write, 2, b, strlen(b));
}

uintptr_t Self() { return reinterpret_cast<uintptr_t>(&t_nheld); }

namespace {

bool Passed(clockid_t clk, const timespec* abs) {
  timespec t;
  clock_gettime(clk, &t);
  return t.tv_sec > abs->tv_sec || (t.tv_sec == abs->tv_sec && t.tv_nsec >= abs->tv_nsec);
}

}  // namespace

// ------------------------------------------------------------------ which lock serves

namespace {

bool Passthrough() { return !g_profiling && g_mutex_swap == nullptr && g_rw_swap == nullptr; }

// The configuration read, by this call if no call read it before.
LOCKPROF_INLINE void Configured() {
  if (__builtin_expect(__atomic_load_n(&g_config_state, __ATOMIC_ACQUIRE) != 2, 0)) Configure();
}

// What serves (o, kind) when a swap is named: that lock, or null (pthread's) for an object
// of a kind only pthread serves (MutexSwappable).
LOCKPROF_INLINE const SwapOps* SwapKind(const void* o, int kind) {
  if (kind == kMutex) return g_mutex_swap != nullptr && MutexSwappable(o) ? g_mutex_swap : nullptr;
  return g_rw_swap != nullptr && RwlockSwappable(o) ? g_rw_swap : nullptr;
}

// The same, the object's record r known (profiling): a lock kept in the record (not in the
// object) cannot serve an object the full table had no room for, which stays pthread's.
LOCKPROF_INLINE const SwapOps* SwapFor(const void* o, int kind, const Rec* r) {
  const SwapOps* const ops = SwapKind(o, kind);
  return ops != nullptr && (ops->in_place || r != nullptr) ? ops : nullptr;
}

// The same, with the record looked up (into *r) only when the lock keeps its state there.
LOCKPROF_INLINE const SwapOps* SwapWithRec(const void* o, int kind, Rec** r) {
  const SwapOps* const ops = SwapKind(o, kind);
  if (ops == nullptr || ops->in_place || *r != nullptr) return ops;
  *r = FindRec(o, kind);
  return *r != nullptr ? ops : nullptr;
}

}  // namespace

namespace {

// ------------------------------------------------------------------ the lock path

// A timed acquisition of a swapped lock: the lock's own, or tries until the deadline (not
// FIFO).
int SwapTimed(const SwapOps* ops, Rec* r, const Req q) {
  if (BadDeadline(q)) return EINVAL;
  if (ops->timed != nullptr) return ops->timed(r, q.o, q.mode, q.clk, q.abs);
  for (kv::SpinWait wait;; wait.Once()) {
    const int rc = ops->try_lock(r, q.o, q.mode);
    if (rc != EBUSY) return rc;
    if (Passed(q.clk, q.abs)) return ETIMEDOUT;
  }
}

// Noted while the lock is held, so an exclusive one's counters need no locked instruction.
// t1: when it was acquired, if the clock was read then (a contended acquisition).
LOCKPROF_INLINE void Acquired(Rec* r, const Req q, const SwapOps* ops, uint64_t t1,
                              uint64_t waited) {
  if (r == nullptr) return;
  const bool exclusive = Exclusive(q.kind, q.mode);
  NoteSite(r, q.site);
  if (ops != nullptr && __atomic_load_n(&r->impl, __ATOMIC_RELAXED) != SwapIndex(ops) + 1)
    __atomic_store_n(&r->impl, SwapIndex(ops) + 1, __ATOMIC_RELAXED);
  if (t1 != 0) {  // the uncontended ones are acquisitions minus these (the dump's)
    Bump(&r->contended, 1, exclusive);
    HistAdd(&r->wait, waited, 1, exclusive);
    HoldBegin(q.o, q.kind, r, t1, 1, exclusive);
  } else if (TimeThisHold()) {
    HoldBegin(q.o, q.kind, r, Now(), g_hold_sample, exclusive);
  }
  Bump(&r->acq[q.mode], 1, exclusive);
}

// A contended acquisition's wait, the clock read around the blocking call (into *t1, the
// acquisition's time, never 0, and *waited): out of line, and the only step that takes the
// call stack (--stacks) and notes the wait's interval (--timeline), so that neither touches
// an uncontended acquisition.
__attribute__((noinline)) int Wait(const Req q, Rec* r, const SwapOps* ops, uint64_t* t1,
                                   uint64_t* waited) {
  const int saved = errno;
  uintptr_t pc[kStackMax];
  const int depth = g_stack_depth != 0 ? TakeStack(pc) : 0;
  const uint64_t t0 = Now();
  int rc = 0;
  if (ops == nullptr) {
    rc = RealBlock(q);
  } else {
    rc = q.op == kTimedOp ? SwapTimed(ops, r, q) : ops->lock(r, q.o, q.mode);
  }
  uint64_t t = Now();
  t += t == 0;  // 0 means "not read"
  *t1 = t, *waited = ToNs(t - t0);
  if (rc == 0 || rc == EOWNERDEAD) {
    if (depth > 0) StackAdd(pc, depth, CallIndex(q.kind, q.mode, q.op, q.clocked), *waited);
    if (g_timeline)
      TimelineAdd('w', q.kind == kMutex ? 'm' : q.mode == kRead ? 'r' : 'w', q.o, t0, t);
  }
  errno = saved;
  return rc;
}

// Profiling: a try first; only when it fails is the clock read, around the blocking call.
LOCKPROF_INLINE int AcquireCounted(const Req q) {
  Rec* const r = FindRec(q.o, q.kind);
  const SwapOps* const ops = SwapFor(q.o, q.kind, r);
  int rc = ops != nullptr ? ops->try_lock(r, q.o, q.mode) : RealTry(q);
  uint64_t t1 = 0, waited = 0;
  if (rc == EBUSY && q.op != kTryOp) rc = Wait(q, r, ops, &t1, &waited);
  if (rc == 0 || rc == EOWNERDEAD) {
    Acquired(r, q, ops, t1, waited);
  } else if (rc == EBUSY && r != nullptr) {
    AtomicAdd(&r->busy, 1);
  }
  return rc;
}

// Swapping, not profiling: the swap lock's try (atomics only, errno untouched), its
// blocking call only when that fails.
LOCKPROF_INLINE int AcquireSwapped(const Req q) {
  Rec* r = nullptr;
  const SwapOps* const ops = SwapWithRec(q.o, q.kind, &r);
  if (ops == nullptr) return q.op == kTryOp ? RealTry(q) : RealBlock(q);
  int rc = ops->try_lock(r, q.o, q.mode);
  if (rc != EBUSY || q.op == kTryOp) return rc;
  const int saved = errno;
  rc = q.op == kTimedOp ? SwapTimed(ops, r, q) : ops->lock(r, q.o, q.mode);
  errno = saved;
  return rc;
}

LOCKPROF_INLINE int Acquire(const Req q) {
  Configured();
  int rc = 0;
  if (g_profiling) {
    rc = AcquireCounted(q);
  } else if (g_mutex_swap != nullptr || g_rw_swap != nullptr) {
    rc = AcquireSwapped(q);
  } else {
    rc = q.op == kTryOp ? RealTry(q) : RealBlock(q);
  }
  // Inside dlsym a lock is a no-op: none is noted.
  if (rc == 0 && g_trace_fd >= 0 && !Resolving()) {
    TraceNote(q.o, q.kind == kMutex ? 'm' : q.mode == kRead ? 'r' : 'w', true);
  }
  return rc;
}

// The slow path of every acquisition (the entry points call the real function directly when
// the preload only passes calls on), one instance per entry point, which fixes its kind, mode
// and op; out of line, so that the direct path needs no stack frame.
template <int kKind, int kMode, int kOp>
__attribute__((noinline)) int AcquireUntimed(void* o, const void* site) {
  const Req q = Untimed(o, kKind, kMode, kOp, site);
  return Acquire(q);
}
template <int kKind, int kMode>
__attribute__((noinline)) int AcquireTimed(void* o, bool clocked, clockid_t clk,
                                           const timespec* abs, const void* site) {
  const Req q = Timed(o, kKind, kMode, clocked, clk, abs, site);
  return Acquire(q);
}

// r: the record if known (a timed hold's), else looked up only for a lock kept there.
LOCKPROF_INLINE int ReleaseSwapped(void* o, int kind, Rec* r) {
  const SwapOps* const ops = SwapWithRec(o, kind, &r);
  if (ops == nullptr) return RealUnlock(o, kind);
  return ops->unlock(r, o);  // keeps errno (lockprof_swap.h)
}

template <int kKind>
__attribute__((noinline)) int Release(void* o) {
  constexpr int kind = kKind;
  Configured();
  int rc = 0;
  if (g_profiling) {
    rc = ReleaseSwapped(o, kind, HoldEnd(o, kind, false));  // a timed hold spares the lookup
  } else if (g_mutex_swap != nullptr || g_rw_swap != nullptr) {
    rc = ReleaseSwapped(o, kind, nullptr);
  } else {
    rc = RealUnlock(o, kind);
  }
  if (rc == 0 && g_trace_fd >= 0) TraceReleased();
  return rc;
}

// ------------------------------------------------------------------ condition variables

CondState* CondOf(Rec* cr) { return cr != nullptr ? &cr->s.cond : &g_fallback_cond; }

// A wait on a swapped mutex: the counter is read while the mutex is held, so a signal sent
// after our unlock changes it and the futex does not sleep. Wake-ups may be spurious, as
// POSIX allows; one is never lost.
int SwapCondWait(const SwapOps* ops, Rec* mr, Rec* cr, const Req q, pthread_mutex_t* m) {
  CondState* const c = CondOf(cr);
  const bool timed = q.op == kTimedOp;
  if (timed && BadDeadline(q)) return EINVAL;
  __atomic_fetch_add(&c->waiters, 1, __ATOMIC_SEQ_CST);
  const uint32_t seen = __atomic_load_n(&c->seq, __ATOMIC_SEQ_CST);
  ops->unlock(mr, m);
  const bool woken = kv::FutexWait(&c->seq, seen, q.clk, timed ? q.abs : nullptr);
  __atomic_fetch_sub(&c->waiters, 1, __ATOMIC_RELAXED);
  ops->lock(mr, m, kMutexMode);
  return woken ? 0 : ETIMEDOUT;
}

int RealCondWait(const Req q, pthread_mutex_t* m) {
  auto* const c = static_cast<pthread_cond_t*>(q.o);
  if (q.op != kTimedOp) return CALL(pthread_cond_wait, c, m);
  if (q.clocked) return CALL(pthread_cond_clockwait, c, m, q.clk, q.abs);
  return CALL(pthread_cond_timedwait, c, m, q.abs);
}

void CondNoted(Rec* cr, const Req q, uint64_t ns) {
  if (!g_profiling || cr == nullptr) return;
  NoteSite(cr, q.site);
  AtomicAdd(&cr->acq[q.mode], 1);
  if (q.mode == kWait) HistAdd(&cr->wait, ns, 1, false);
}

// A wait gives its mutex back and takes it again inside libc: the trace's "held" is
// unchanged.
int CondWait(const Req q, pthread_mutex_t* m) {
  Configured();
  if (g_trace_fd >= 0) TraceNote(q.o, 'c', false);
  if (Passthrough()) return RealCondWait(q, m);
  const int saved = errno;
  Rec* mr = nullptr;
  const SwapOps* const ops = SwapWithRec(m, kMutex, &mr);
  Rec* const cr = FindRec(q.o, kCond);
  if (g_profiling) HoldEnd(m, kMutex, true);
  const uint64_t t0 = Now();
  const int rc = ops != nullptr ? SwapCondWait(ops, mr, cr, q, m) : RealCondWait(q, m);
  CondNoted(cr, q, ToNs(Now() - t0));
  if (g_profiling) HoldResume(m, kMutex);
  errno = saved;
  return rc;
}

int RealCondSignal(void* c, bool all) {
  auto* const cond = static_cast<pthread_cond_t*>(c);
  return all ? CALL(pthread_cond_broadcast, cond) : CALL(pthread_cond_signal, cond);
}

// Signals reach both kinds of waiter: ours on the counter, pthread's (a wait on a mutex we
// did not swap) through the real call, which costs a load when nobody waits there.
int CondSignal(const Req q, bool all) {
  Configured();
  if (g_trace_fd >= 0) TraceNote(q.o, 'c', false);
  if (Passthrough()) return RealCondSignal(q.o, all);
  const int saved = errno;
  Rec* const cr = FindRec(q.o, kCond);
  if (g_mutex_swap != nullptr) {
    CondState* const c = CondOf(cr);
    __atomic_fetch_add(&c->seq, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&c->waiters, __ATOMIC_SEQ_CST) != 0)
      kv::FutexWake(&c->seq, all || cr == nullptr ? INT_MAX : 1);
  }
  CondNoted(cr, q, 0);
  const int rc = RealCondSignal(q.o, all);
  errno = saved;
  return rc;
}

// pthread_cond_timedwait measures against the clock the condvar was made with: bit 1 of
// glibc's __wrefs (CLOCK_MONOTONIC when set).
clockid_t CondClock(const pthread_cond_t* c) {
  return (__atomic_load_n(&c->__data.__wrefs, __ATOMIC_RELAXED) & 2) != 0 ? CLOCK_MONOTONIC
                                                                          : CLOCK_REALTIME;
}

// ------------------------------------------------------------------ the entry points' targets

// What each entry point jumps to, chosen once by the constructor with every real function
// found (null until then, and wherever the general path serves): libc's function for a kind
// nothing is swapped for; for a swapped kind, the swap lock's own fast path (lockprof_swap.h)
// for the plain and try acquisitions and the unlock, the general path for the timed ones and
// condition variables; the general path for every call while profiling or tracing.
#define LOCKPROF_TARGET(fn) void* g_fast_##fn;
LOCKPROF_TARGET(pthread_mutex_lock)
LOCKPROF_TARGET(pthread_mutex_trylock)
LOCKPROF_TARGET(pthread_mutex_timedlock)
LOCKPROF_TARGET(pthread_mutex_clocklock)
LOCKPROF_TARGET(pthread_mutex_unlock)
LOCKPROF_TARGET(pthread_rwlock_rdlock)
LOCKPROF_TARGET(pthread_rwlock_wrlock)
LOCKPROF_TARGET(pthread_rwlock_tryrdlock)
LOCKPROF_TARGET(pthread_rwlock_trywrlock)
LOCKPROF_TARGET(pthread_rwlock_timedrdlock)
LOCKPROF_TARGET(pthread_rwlock_timedwrlock)
LOCKPROF_TARGET(pthread_rwlock_clockrdlock)
LOCKPROF_TARGET(pthread_rwlock_clockwrlock)
LOCKPROF_TARGET(pthread_rwlock_unlock)
LOCKPROF_TARGET(pthread_cond_wait)
LOCKPROF_TARGET(pthread_cond_timedwait)
LOCKPROF_TARGET(pthread_cond_clockwait)
LOCKPROF_TARGET(pthread_cond_signal)
LOCKPROF_TARGET(pthread_cond_broadcast)
#undef LOCKPROF_TARGET

// fn's target: the swap's fast entry `field` if swap is not null, else libc's fn.
#define LOCKPROF_AIM(fn, swap, field)                                                        \
  __atomic_store_n(&g_fast_##fn,                                                             \
                   (swap) != nullptr ? reinterpret_cast<void*>((swap)->field) : g_real_##fn, \
                   __ATOMIC_RELEASE)
// fn's target when only the general path serves a swapped kind.
#define LOCKPROF_AIM_GENERAL(fn, swap) \
  __atomic_store_n(&g_fast_##fn, (swap) != nullptr ? nullptr : g_real_##fn, __ATOMIC_RELEASE)

// The chosen locks' own set-up, once.
void StartSwaps() {
  if (g_mutex_swap != nullptr && g_mutex_swap->start != nullptr) g_mutex_swap->start();
  if (g_rw_swap != nullptr && g_rw_swap->start != nullptr && g_rw_swap != g_mutex_swap)
    g_rw_swap->start();
}

void ChooseFastPaths() {
  if (g_profiling || g_trace_fd >= 0 || !ResolveAll()) return;
  const SwapFast* const m = g_mutex_swap != nullptr ? &g_mutex_swap->fast : nullptr;
  const SwapFast* const rw = g_rw_swap != nullptr ? &g_rw_swap->fast : nullptr;
  LOCKPROF_AIM(pthread_mutex_lock, m, mutex_lock);
  LOCKPROF_AIM(pthread_mutex_trylock, m, mutex_trylock);
  LOCKPROF_AIM(pthread_mutex_unlock, m, mutex_unlock);
  LOCKPROF_AIM_GENERAL(pthread_mutex_timedlock, m);
  LOCKPROF_AIM_GENERAL(pthread_mutex_clocklock, m);
  LOCKPROF_AIM(pthread_rwlock_rdlock, rw, rdlock);
  LOCKPROF_AIM(pthread_rwlock_wrlock, rw, wrlock);
  LOCKPROF_AIM(pthread_rwlock_tryrdlock, rw, tryrdlock);
  LOCKPROF_AIM(pthread_rwlock_trywrlock, rw, trywrlock);
  LOCKPROF_AIM(pthread_rwlock_unlock, rw, rwlock_unlock);
  LOCKPROF_AIM_GENERAL(pthread_rwlock_timedrdlock, rw);
  LOCKPROF_AIM_GENERAL(pthread_rwlock_timedwrlock, rw);
  LOCKPROF_AIM_GENERAL(pthread_rwlock_clockrdlock, rw);
  LOCKPROF_AIM_GENERAL(pthread_rwlock_clockwrlock, rw);
  // A condition wait or signal involves a swapped mutex only if mutexes are swapped.
  LOCKPROF_AIM_GENERAL(pthread_cond_wait, m);
  LOCKPROF_AIM_GENERAL(pthread_cond_timedwait, m);
  LOCKPROF_AIM_GENERAL(pthread_cond_clockwait, m);
  LOCKPROF_AIM_GENERAL(pthread_cond_signal, m);
  LOCKPROF_AIM_GENERAL(pthread_cond_broadcast, m);
}
#undef LOCKPROF_AIM
#undef LOCKPROF_AIM_GENERAL

}  // namespace
}  // namespace lockprof

// ------------------------------------------------------------------ the entry points

using lockprof::kCond;
using lockprof::kLockOp;
using lockprof::kMutex;
using lockprof::kMutexMode;
using lockprof::kRead;
using lockprof::kRwlock;
using lockprof::kTryOp;
using lockprof::kWrite;
using lockprof::Req;
using lockprof::Timed;
using lockprof::Untimed;

#define SITE __builtin_return_address(0)

// Where the constructor chose a target for the entry point (lockprof::ChooseFastPaths), it is
// one predictable branch and a jump there: to libc's function, or to the swap lock's fast
// path; otherwise the general path.
#define LOCKPROF_DIRECT(fn, ...)                                                  \
  if (void* const to = __atomic_load_n(&lockprof::g_fast_##fn, __ATOMIC_RELAXED); \
      __builtin_expect(to != nullptr, 1))                                         \
  return reinterpret_cast<decltype(&::fn)>(to)(__VA_ARGS__)

// The mutex and rwlock entry points come in four shapes, each stamped out by one macro: an
// entry point must be the exported function itself (not a call into a shared one) so that SITE
// is its caller's call site and the chosen target is reached by a tail jump. `type` is a
// parameter's type, which parentheses cannot enclose.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define LOCKPROF_UNTIMED(fn, type, kind, mode, op)            \
  LOCKPROF_EXPORT int fn(type* l) noexcept {                  \
    LOCKPROF_DIRECT(fn, l);                                   \
    return lockprof::AcquireUntimed<kind, mode, op>(l, SITE); \
  }
#define LOCKPROF_TIMED(fn, type, kind, mode)                                      \
  LOCKPROF_EXPORT int fn(type* l, const timespec* t) noexcept {                   \
    LOCKPROF_DIRECT(fn, l, t);                                                    \
    return lockprof::AcquireTimed<kind, mode>(l, false, CLOCK_REALTIME, t, SITE); \
  }
#define LOCKPROF_CLOCKED(fn, type, kind, mode)                               \
  LOCKPROF_EXPORT int fn(type* l, clockid_t c, const timespec* t) noexcept { \
    LOCKPROF_DIRECT(fn, l, c, t);                                            \
    return lockprof::AcquireTimed<kind, mode>(l, true, c, t, SITE);          \
  }
#define LOCKPROF_RELEASE(fn, type, kind)     \
  LOCKPROF_EXPORT int fn(type* l) noexcept { \
    LOCKPROF_DIRECT(fn, l);                  \
    return lockprof::Release<kind>(l);       \
  }
// NOLINTEND(bugprone-macro-parentheses)

LOCKPROF_UNTIMED(pthread_mutex_lock, pthread_mutex_t, kMutex, kMutexMode, kLockOp)
LOCKPROF_UNTIMED(pthread_mutex_trylock, pthread_mutex_t, kMutex, kMutexMode, kTryOp)
LOCKPROF_TIMED(pthread_mutex_timedlock, pthread_mutex_t, kMutex, kMutexMode)
LOCKPROF_CLOCKED(pthread_mutex_clocklock, pthread_mutex_t, kMutex, kMutexMode)
LOCKPROF_RELEASE(pthread_mutex_unlock, pthread_mutex_t, kMutex)

LOCKPROF_UNTIMED(pthread_rwlock_rdlock, pthread_rwlock_t, kRwlock, kRead, kLockOp)
LOCKPROF_UNTIMED(pthread_rwlock_wrlock, pthread_rwlock_t, kRwlock, kWrite, kLockOp)
LOCKPROF_UNTIMED(pthread_rwlock_tryrdlock, pthread_rwlock_t, kRwlock, kRead, kTryOp)
LOCKPROF_UNTIMED(pthread_rwlock_trywrlock, pthread_rwlock_t, kRwlock, kWrite, kTryOp)
LOCKPROF_TIMED(pthread_rwlock_timedrdlock, pthread_rwlock_t, kRwlock, kRead)
LOCKPROF_TIMED(pthread_rwlock_timedwrlock, pthread_rwlock_t, kRwlock, kWrite)
LOCKPROF_CLOCKED(pthread_rwlock_clockrdlock, pthread_rwlock_t, kRwlock, kRead)
LOCKPROF_CLOCKED(pthread_rwlock_clockwrlock, pthread_rwlock_t, kRwlock, kWrite)
LOCKPROF_RELEASE(pthread_rwlock_unlock, pthread_rwlock_t, kRwlock)
#undef LOCKPROF_UNTIMED
#undef LOCKPROF_TIMED
#undef LOCKPROF_CLOCKED
#undef LOCKPROF_RELEASE

LOCKPROF_EXPORT int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  LOCKPROF_DIRECT(pthread_cond_wait, c, m);
  const Req q = Untimed(c, kCond, lockprof::kWait, kLockOp, SITE);
  return lockprof::CondWait(q, m);
}
LOCKPROF_EXPORT int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m,
                                           const timespec* t) {
  LOCKPROF_DIRECT(pthread_cond_timedwait, c, m, t);
  const Req q = Timed(c, kCond, lockprof::kWait, false, lockprof::CondClock(c), t, SITE);
  return lockprof::CondWait(q, m);
}
LOCKPROF_EXPORT int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m, clockid_t k,
                                           const timespec* t) {
  LOCKPROF_DIRECT(pthread_cond_clockwait, c, m, k, t);
  const Req q = Timed(c, kCond, lockprof::kWait, true, k, t, SITE);
  return lockprof::CondWait(q, m);
}
LOCKPROF_EXPORT int pthread_cond_signal(pthread_cond_t* c) noexcept {
  LOCKPROF_DIRECT(pthread_cond_signal, c);
  const Req q = Untimed(c, kCond, lockprof::kSignal, kLockOp, SITE);
  return lockprof::CondSignal(q, false);
}
LOCKPROF_EXPORT int pthread_cond_broadcast(pthread_cond_t* c) noexcept {
  LOCKPROF_DIRECT(pthread_cond_broadcast, c);
  const Req q = Untimed(c, kCond, lockprof::kBroadcast, kLockOp, SITE);
  return lockprof::CondSignal(q, true);
}

__attribute__((constructor)) static void LockprofInit() {
  lockprof::Configure();
  lockprof::TraceInit();
  lockprof::StartSwaps();
  lockprof::ChooseFastPaths();
  if (!lockprof::g_profiling) return;
  lockprof::StacksStart();
  lockprof::InstallSignalHandlers();
  pthread_atfork(nullptr, nullptr, lockprof::ChildAfterFork);
}

__attribute__((destructor)) static void LockprofFini() { lockprof::Dump("exit"); }
