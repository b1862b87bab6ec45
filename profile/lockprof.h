// What the pieces of liblockprof share: the record of a lock object, the
// record table, the clock, the configuration. The library as a whole is
// described in lockprof.cpp and docs/profile.md.
//
// Everything here runs inside someone else's program, on its lock path: no
// allocation, no lock of ours, no exception, no libstdc++ runtime (only
// header-only facilities), errno kept by the callers.
//
// Thread safety: the table's keys are inserted by compare-and-swap, every
// counter is a relaxed atomic add; per-thread state is initial-exec TLS.
#ifndef LOCKBENCH_PROFILE_LOCKPROF_H_
#define LOCKBENCH_PROFILE_LOCKPROF_H_

#include <pthread.h>
#include <time.h>

#include <cstddef>
#include <cstdint>

// Thread-local without __tls_get_addr, which may allocate.
#define LOCKPROF_TLS __thread __attribute__((tls_model("initial-exec")))
#define LOCKPROF_EXPORT extern "C" __attribute__((visibility("default")))
// The lock path's pieces, inlined into each entry point's instance so that its kind, mode and
// op are constants there.
#define LOCKPROF_INLINE __attribute__((always_inline)) inline

namespace lockprof {

inline constexpr unsigned kTableBits = 16;
inline constexpr uint32_t kTableSize = 1u << kTableBits;
inline constexpr int kMaxProbe =
    256;  // a key is found within this many slots of its hash, or never
inline constexpr unsigned kBuckets = 40;  // 0 ns, then [2^(k-1), 2^k) ns: the last from 2^38 ns up

enum Kind { kMutex = 1, kRwlock = 2, kCond = 3 };
// Counter slots: a mutex uses the first, an rwlock read and write, a condvar all three.
enum Mode { kMutexMode = 0, kRead = 1, kWrite = 2, kWait = 0, kSignal = 1, kBroadcast = 2 };
enum Op { kLockOp, kTryOp, kTimedOp };

// The state of a swapped lock too large for the pthread object (BRAVO; the
// others live in the object: lockprof_swap.h): one of the lock types of
// common/ (which all take all-zero bytes as unlocked, so a new record needs
// no set-up), and which thread holds it for writing (pthread_rwlock_unlock
// does not say which side it leaves). A condition variable's record uses
// cond instead.
struct SwapState {
  alignas(16) unsigned char lock[48];
  uintptr_t writer;
};
struct CondState {
  uint32_t seq, waiters;
};

struct Hist {
  uint64_t count[kBuckets], total, max;
};

union LockState {
  SwapState swap;
  CondState cond;
};

struct Rec {
  alignas(64) LockState s;  // a line of its own: waiters spin on it
  alignas(64) uintptr_t site;
  uint32_t impl;  // 1 + the index in kSwapLocks of the lock that served it; 0 pthread
  uint64_t acq[3], contended, busy;
  uint64_t fast_reads;  // BRAVO: reads that took the fast path (counted when profiling)
  Hist wait, hold;
};

// The globals below are only declared here, so the header initializes nothing, and
// constinit has the compiler prove each definition constant-initialized (the lock path
// may run before our constructor). bugprone-dynamic-static-initializers, on under
// -fno-threadsafe-statics, flags every such declaration all the same.
// NOLINTBEGIN(bugprone-dynamic-static-initializers)

// The record table (lockprof.cpp): keys apart from the records, so that
// probing reads 8 bytes a slot and the dump scans 512 KiB instead of touching
// every record's pages. key = address << 2 | kind, 0 = free.
extern constinit uintptr_t g_keys[kTableSize];
extern constinit Rec g_recs[kTableSize];
extern constinit uint64_t g_untracked_ops, g_holds_lost;

// The record of (o, kind), inserted on first sight; null when the table has
// no room for it near its hash (then never: it is left to pthread). Slots never
// empty, so an object that found no slot finds none ever after.
LOCKPROF_INLINE Rec* FindRec(const void* o, int kind) {
  const uintptr_t key = reinterpret_cast<uintptr_t>(o) << 2 | static_cast<uintptr_t>(kind);
  uint32_t i = static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - kTableBits));
  for (int probe = 0; probe < kMaxProbe; probe++, i = (i + 1) & (kTableSize - 1)) {
    uintptr_t k = __atomic_load_n(&g_keys[i], __ATOMIC_ACQUIRE);
    if (k == 0 && __atomic_compare_exchange_n(&g_keys[i], &k, key, false, __ATOMIC_ACQ_REL,
                                              __ATOMIC_ACQUIRE)) {
      return &g_recs[i];
    }
    if (k == key) return &g_recs[i];
  }
  __atomic_fetch_add(&g_untracked_ops, 1, __ATOMIC_RELAXED);
  return nullptr;
}

// Whether a swap serves the object: only what behaves like a plain lock, glibc's normal and
// adaptive private mutexes and its private rwlocks. Recursive, error-checking, robust,
// priority and process-shared mutexes and process-shared rwlocks keep pthread's semantics
// (the kind is in glibc's public struct __pthread_mutex_s, __shared in its rwlock's).
inline bool MutexSwappable(const void* o) {
  const int k = static_cast<const pthread_mutex_t*>(o)->__data.__kind;
  const int type = k & 3;
  return (type == PTHREAD_MUTEX_NORMAL || type == PTHREAD_MUTEX_ADAPTIVE_NP) && (k & 0xf0) == 0;
}
inline bool RwlockSwappable(const void* o) {
  return static_cast<const pthread_rwlock_t*>(o)->__data.__shared == 0;
}

// Configuration, read once by the first call (Configure, lockprof_config.cpp): what serves
// mutexes and rwlocks (null: pthread's), its state (0 unread, 1 being read, 2 read), the
// hold sampling.
extern constinit int g_profiling;
extern constinit char g_out_path[];
struct SwapOps;
extern constinit const SwapOps *g_mutex_swap, *g_rw_swap;
extern constinit int g_config_state;
extern constinit uint32_t g_hold_sample;
void Configure();

// The clock of every wait and hold (TSC or CLOCK_MONOTONIC) and its rate.
extern constinit int g_use_tsc;
// One uncontended hold in this many is timed (every contended one is): the dump says so.
uint32_t HoldSample();
extern constinit uint64_t g_tick_mult, g_tick_origin, g_ns_origin;
uint64_t Now();
uint64_t ToNs(uint64_t ticks);
uint64_t ClockNs();

// This thread, unique among live threads.
uintptr_t Self();

// Two strings on stderr, by a raw write.
void Say(const char* a, const char* b);

// v in decimal, or in hex with 0x; s has room for 24 characters.
char* FormatNumber(char* s, uint64_t v, unsigned base);

inline uint64_t AtomicLoad(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline void AtomicAdd(uint64_t* p, uint64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }

// libc's lock functions, found by the constructor before any fast path of the swap is
// chosen (lockprof.cpp): those fast paths hand them every object they do not swap.
int PthreadMutexLock(pthread_mutex_t* m);
int PthreadMutexTrylock(pthread_mutex_t* m);
int PthreadMutexUnlock(pthread_mutex_t* m);
int PthreadRdlock(pthread_rwlock_t* l);
int PthreadWrlock(pthread_rwlock_t* l);
int PthreadTryrdlock(pthread_rwlock_t* l);
int PthreadTrywrlock(pthread_rwlock_t* l);
int PthreadRwlockUnlock(pthread_rwlock_t* l);

// The names of what serves mutexes and rwlocks now ("pthread" when nothing is
// swapped), and of what served a record.
const char* MutexSwapName();
const char* RwlockSwapName();
const char* ImplName(uintptr_t key, const Rec* r);

// The real function called name (of that symbol version when not null),
// found on first use and kept in *slot; null while this thread is inside
// dlsym, which may call back into a wrapper (through an allocator).
void* Sym(void** slot, const char* name, const char* version);
// True while this thread is inside dlsym: a lock is then a no-op.
bool Resolving();

// real_fn(): the function fn of the next object after us (libc's), kept in
// g_real_fn once found (the constructor finds the lock functions at load).
#define LOCKPROF_REAL(fn, version)                                              \
  void* g_real_##fn;                                                            \
  inline decltype(&::fn) real_##fn() {                                          \
    void* p = __atomic_load_n(&g_real_##fn, __ATOMIC_ACQUIRE);                  \
    if (__builtin_expect(p == nullptr, 0)) p = Sym(&g_real_##fn, #fn, version); \
    return reinterpret_cast<decltype(&::fn)>(p);                                \
  }

// The dump (lockprof_dump.cpp): at exit, on SIGINT/SIGTERM where the program
// left the default action, and a forked child's counters zeroed.
void Dump(const char* reason);
void InstallSignalHandlers();
void ChildAfterFork();

// The grader's per-request trace (lockprof_trace.cpp).
extern constinit int g_trace_fd;  // >= 0: trace mode, set once by the constructor

// Contended call stacks and the timeline of waits and holds (lockprof_stacks.cpp), set by
// Configure when profiling: the return addresses a waiting acquisition keeps (0: none), and
// whether every wait and hold is recorded with its thread and times.
inline constexpr int kStackMax = 64;
extern constinit int g_stack_depth;
extern constinit int g_timeline;
// NOLINTEND(bugprone-dynamic-static-initializers)
void TraceInit();
void TraceNote(const void* o, char kind, bool count_held);
void TraceReleased();

void StacksStart();            // the unwinder loaded and run once (the constructor)
int TakeStack(uintptr_t* pc);  // up to g_stack_depth return addresses of the caller's stack
uint32_t CallIndex(int kind, int mode, int op, bool clocked);  // the pthread function waited in
void StackAdd(const uintptr_t* pc, int depth, uint32_t call, uint64_t ns);
void TimelineAdd(char what, char mode, const void* o, uint64_t t0, uint64_t t1);
void StacksAfterFork();
// Now()'s ticks as CLOCK_MONOTONIC nanoseconds.
uint64_t MonotonicNs(uint64_t ticks);

// The dump's writer (lockprof_dump.cpp): text into its buffer, a number, a JSON string, a
// key; the program's path. The sections of lockprof_stacks.cpp, written only when asked for.
void Put(const char* s);
void PutNum(uint64_t v, unsigned base);
void PutStr(const char* s);
void PutKey(const char* k);
const char* ExePath();
void PutStacks();
void PutTimeline();

}  // namespace lockprof

#endif  // LOCKBENCH_PROFILE_LOCKPROF_H_
