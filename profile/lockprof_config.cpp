// lockprof's configuration, read once from the environment by the first call (Configure):
// where the dump goes (profiling), the swap locks, the hold sampling, the contended stacks
// and the timeline, and the TSC's calibration against CLOCK_MONOTONIC. getenv neither locks
// nor allocates, so the first lock call of any library may read it.
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/spin_wait.h"
#include "profile/lockprof.h"
#include "profile/lockprof_swap.h"
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace lockprof {
namespace {

constexpr uint32_t kHoldSampleMax = 1024;

// The lock called name, or null (pthread's), said on stderr when the name is not ours.
const SwapOps* SwapNamed(const char* name, const char* var) {
  if (name == nullptr || *name == 0 || strcmp(name, "pthread") == 0 || strcmp(name, "none") == 0)
    return nullptr;
  if (const SwapOps* ops = SwapOpsNamed(name); ops != nullptr) return ops;
  if (strcmp(name, "flat-combining") == 0) {
    Say(var,
        ": flat combining cannot replace a pthread lock (the critical section is the "
        "caller's own code, which no combiner can run for it); kept pthread's\n");
  } else {
    Say(var, ": unknown lock; kept pthread's\n");
  }
  return nullptr;
}

#if defined(__x86_64__)
// A clock reading and the TSC at that moment (the middle of two reads around it), retried
// when something came between them.
void TscPair(uint64_t* tsc, uint64_t* ns) {
  for (int i = 0; i < 16; i++) {
    const uint64_t a = __rdtsc();
    *ns = ClockNs();
    const uint64_t b = __rdtsc();
    *tsc = a + (b - a) / 2;
    if (b - a < 10000) return;
  }
}

// The TSC's rate against CLOCK_MONOTONIC over 1 ms, once, in the first call: 1 ms of the
// program's start for a rate good to some 1e-4 (log2 buckets need far less).
void Calibrate() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  const char* force = getenv("LOCKPROF_CLOCK");
  if ((force != nullptr && strcmp(force, "monotonic") == 0) ||
      !__get_cpuid(0x80000007, &a, &b, &c, &d) || (d & (1u << 8)) == 0)
    return;
  uint64_t t0 = 0, n0 = 0, t1 = 0, n1 = 0;
  TscPair(&t0, &n0);
  do TscPair(&t1, &n1);
  while (n1 - n0 < 1000000);
  if (t1 <= t0) return;
  g_tick_mult = static_cast<uint64_t>((static_cast<unsigned __int128>(n1 - n0) << 32) / (t1 - t0));
  g_tick_origin = t1, g_ns_origin = n1;
  g_use_tsc = 1;
}
#else
void Calibrate() {}
#endif

// $var as a whole number from 1 to max, or 0 when it is unset; when it is set and not one,
// `otherwise` is said on stderr and 0 returned.
long Count(const char* var, long max, const char* otherwise) {
  const char* n = getenv(var);
  if (n == nullptr || *n == 0) return 0;
  char* end = nullptr;
  const long v = strtol(n, &end, 10);
  if (*end == 0 && v >= 1 && v <= max) return v;
  Say("lockprof: ", var);
  Say(": ", otherwise);
  return 0;
}

// $LOCKPROF_STACKS (return addresses per contended acquisition, 1 to kStackMax) and
// $LOCKPROF_TIMELINE (1: every wait and hold, which times every hold), read when profiling.
void ReadSeeing() {
  if (const long v = Count("LOCKPROF_STACKS", kStackMax,
                           "not a whole number from 1 to 64; "
                           "no stacks taken\n")) {
    g_stack_depth = static_cast<int>(v);
  }
  if (const char* t = getenv("LOCKPROF_TIMELINE"); t != nullptr && strcmp(t, "1") == 0) {
    g_timeline = 1;
    g_hold_sample = 1;
  }
}

void ReadConfig() {
  const char* f = getenv("LOCKPROF_FILE");
  const char* m = getenv("LOCKPROF_SWAP");
  const char* rw = getenv("LOCKPROF_SWAP_RW");
  if (f != nullptr && *f != 0 && strlen(f) < PATH_MAX - 32) {
    memcpy(g_out_path, f, strlen(f) + 1);
    g_profiling = 1;
    Calibrate();
  }
  if (const long v = Count("LOCKPROF_HOLD_SAMPLE", kHoldSampleMax,
                           "not a whole number from 1 to 1024; kept 16\n")) {
    g_hold_sample = static_cast<uint32_t>(v);
  }
  if (g_profiling) ReadSeeing();
  const SwapOps* ops = SwapNamed(m, "lockprof: LOCKPROF_SWAP");
  if (ops != nullptr && ops->info->rwlock_only) {
    g_rw_swap = ops;  // a rwlock swap alone: mutexes stay pthread's
  } else {
    g_mutex_swap = ops;
    g_rw_swap = ops != nullptr ? PhaseFairOps() : nullptr;
  }
  if (rw != nullptr && *rw != 0) g_rw_swap = SwapNamed(rw, "lockprof: LOCKPROF_SWAP_RW");
}

}  // namespace

// Read once, by whichever call comes first (a constructor of another library may lock
// before ours runs); getenv neither locks nor allocates.
void Configure() {
  int st = __atomic_load_n(&g_config_state, __ATOMIC_ACQUIRE);
  int zero = 0;
  if (st == 2) return;
  if (st == 0 && __atomic_compare_exchange_n(&g_config_state, &zero, 1, false, __ATOMIC_ACQUIRE,
                                             __ATOMIC_RELAXED)) {
    ReadConfig();
    __atomic_store_n(&g_config_state, 2, __ATOMIC_RELEASE);
    return;
  }
  kv::SpinUntil([] { return __atomic_load_n(&g_config_state, __ATOMIC_ACQUIRE) == 2; });
}

const char* MutexSwapName() {
  return g_mutex_swap != nullptr ? g_mutex_swap->info->name : "pthread";
}
const char* RwlockSwapName() { return g_rw_swap != nullptr ? g_rw_swap->info->name : "pthread"; }

// From the record, never from the object: it may be gone by now.
const char* ImplName(uintptr_t key, const Rec* r) {
  const uint32_t i = __atomic_load_n(&r->impl, __ATOMIC_RELAXED);
  if ((key & 3) == kCond) return g_mutex_swap != nullptr ? "futex" : "pthread";
  return i != 0 ? SwapOpsAt(i - 1).info->name : "pthread";
}

}  // namespace lockprof
