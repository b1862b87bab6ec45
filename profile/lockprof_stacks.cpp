// What the profile sees of the locks beyond their counters, each only when asked for:
//
// Contended call stacks ($LOCKPROF_STACKS=N, ./lockbench profile --stacks N). An acquisition
// that is about to wait (its try failed) takes up to N return addresses of its caller's
// stack, and the wait, once over, is added to that stack's entry in a fixed table (count and
// nanoseconds waited). The stack is unwound by libgcc's _Unwind_Backtrace, which reads the
// unwind tables (.eh_frame) every object of an x86-64 process carries, so it goes through
// glibc and through programs built without frame pointers; libgcc_s is loaded (dlopen) and
// the unwinder run once by the constructor, never on the lock path, where it neither
// allocates nor locks (it finds an object's tables with _dl_find_object, glibc 2.35 and GCC
// 12 on; older pairs take the loader's lock in dl_iterate_phdr). Frames inside this library
// are left out: the first kept is the caller of the pthread function.
//
// The timeline ($LOCKPROF_TIMELINE=1, --timeline FILE): every wait (from the failed try to
// the acquisition) and every hold (from the acquisition to the unlock; with the timeline on,
// every hold is timed, not one in $LOCKPROF_HOLD_SAMPLE) is appended to a fixed buffer of
// kEventMax intervals per process, with the thread's id, in chunks of slots each thread claims.
//
// Both are bounded and never allocate: what does not fit (a stack table whose slots near the
// hash are taken, a full buffer) is counted, and the dump says how much. The dump writes them
// beside the lock records (lockprof_dump.cpp calls PutStacks and PutTimeline), with the
// executable segments of every loaded object, by which the reader names the frames.
#include <dlfcn.h>
#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>

#include <cstring>

#include "profile/lockprof.h"

namespace lockprof {

constinit int g_stack_depth;
constinit int g_timeline;

namespace {

constexpr uint32_t kStackSlots = 4096;
constexpr int kStackProbe = 64;
constexpr uint64_t kFilling = 1;  // a slot taken, its stack being written

struct Stack {
  uint64_t hash;  // 0 free, kFilling, else the hash of (call, pc[0..depth))
  uint32_t call, depth;
  uint64_t count, wait_ns;
  uintptr_t pc[kStackMax];
};
constinit Stack g_stacks[kStackSlots] = {};
uint64_t g_stacks_lost, g_stacks_lost_ns;

struct Event {
  uint64_t t0, t1;  // ticks of Now()
  uintptr_t o;
  uint32_t tid;
  char what;  // 0 not written yet, 'w' a wait, 'h' a hold
  char mode;  // 'm' mutex, 'r' read, 'w' write
};
constexpr uint32_t kEventMax = 1u << 18;
constexpr uint32_t kEventChunk = 256;  // slots a thread claims at once: one shared add per 256
static_assert(kEventMax % kEventChunk == 0);
constinit Event g_events[kEventMax] = {};
uint64_t g_events_next, g_events_lost;

LOCKPROF_TLS uint32_t t_tid;
LOCKPROF_TLS uint64_t t_event_next, t_event_end;  // this thread's claimed slots
LOCKPROF_TLS int t_unwinding;

using BacktraceFn = _Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void*);
using GetIpFn = _Unwind_Ptr (*)(_Unwind_Context*);
BacktraceFn g_backtrace;
GetIpFn g_get_ip;
uintptr_t g_self_lo, g_self_hi;  // this library's executable segment

constexpr const char* kCallNames[] = {
    "pthread_mutex_lock",    "pthread_mutex_timedlock",    "pthread_mutex_clocklock",
    "pthread_rwlock_rdlock", "pthread_rwlock_timedrdlock", "pthread_rwlock_clockrdlock",
    "pthread_rwlock_wrlock", "pthread_rwlock_timedwrlock", "pthread_rwlock_clockwrlock",
};

struct Walk {
  uintptr_t* pc;
  int n, max;
};

_Unwind_Reason_Code OnFrame(_Unwind_Context* c, void* arg) {
  auto* const w = static_cast<Walk*>(arg);
  const uintptr_t ip = g_get_ip(c);
  if (ip == 0) return _URC_END_OF_STACK;
  if (w->n == 0 && ip >= g_self_lo && ip < g_self_hi) return _URC_NO_REASON;  // ours
  w->pc[w->n++] = ip;
  return w->n < w->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

int FindSelf(dl_phdr_info* info, size_t, void* self) {
  const auto at = reinterpret_cast<uintptr_t>(self);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) != 0 && at >= lo && at < lo + ph.p_memsz) {
      g_self_lo = lo, g_self_hi = lo + ph.p_memsz;
      return 1;
    }
  }
  return 0;
}

uint64_t StackHash(const uintptr_t* pc, int depth, uint32_t call) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ call;
  for (int i = 0; i < depth; i++) h = (h ^ pc[i]) * 0xff51afd7ed558ccdull, h ^= h >> 29;
  return h > kFilling ? h : h + 2;
}

bool SameStack(const Stack& s, const uintptr_t* pc, int depth, uint32_t call) {
  return s.call == call && s.depth == static_cast<uint32_t>(depth) &&
         memcmp(s.pc, pc, sizeof *pc * static_cast<size_t>(depth)) == 0;
}

LOCKPROF_INLINE void Charge(Stack* s, uint64_t ns) {
  AtomicAdd(&s->count, 1);
  AtomicAdd(&s->wait_ns, ns);
}

}  // namespace

void StacksStart() {
  if (g_stack_depth == 0) return;
  void* const gcc = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
  auto* const bt = reinterpret_cast<BacktraceFn>(gcc ? dlsym(gcc, "_Unwind_Backtrace") : nullptr);
  auto* const ip = reinterpret_cast<GetIpFn>(gcc ? dlsym(gcc, "_Unwind_GetIP") : nullptr);
  dl_iterate_phdr(FindSelf, reinterpret_cast<void*>(&StacksStart));
  if (bt == nullptr || ip == nullptr || g_self_hi == 0) {
    Say("lockprof: LOCKPROF_STACKS", ": no unwinder (libgcc_s.so.1); no stacks taken\n");
    return;
  }
  g_get_ip = ip;
  uintptr_t pc[kStackMax] = {};
  Walk w{pc, 0, kStackMax};
  bt(OnFrame, &w);  // its one-time set-up, here rather than on a lock path
  __atomic_store_n(&g_backtrace, bt, __ATOMIC_RELEASE);
}

int TakeStack(uintptr_t* pc) {
  const BacktraceFn bt = __atomic_load_n(&g_backtrace, __ATOMIC_ACQUIRE);
  if (bt == nullptr || t_unwinding) return 0;  // not set up yet, or a lock taken inside it
  t_unwinding = 1;
  Walk w{pc, 0, g_stack_depth};
  bt(OnFrame, &w);
  t_unwinding = 0;
  return w.n;
}

uint32_t CallIndex(int kind, int mode, int op, bool clocked) {
  const uint32_t side = kind == kMutex ? 0 : mode == kRead ? 3 : 6;
  return side + (op != kTimedOp ? 0 : clocked ? 2 : 1);
}

void StackAdd(const uintptr_t* pc, int depth, uint32_t call, uint64_t ns) {
  const uint64_t h = StackHash(pc, depth, call);
  uint32_t i = static_cast<uint32_t>(h >> 40) & (kStackSlots - 1);
  for (int probe = 0; probe < kStackProbe; probe++, i = (i + 1) & (kStackSlots - 1)) {
    Stack* const s = &g_stacks[i];
    uint64_t seen = __atomic_load_n(&s->hash, __ATOMIC_ACQUIRE);
    if (seen == h && SameStack(*s, pc, depth, call)) return Charge(s, ns);
    if (seen != 0 || !__atomic_compare_exchange_n(&s->hash, &seen, kFilling, false,
                                                  __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      continue;  // another stack's, or one being written (the same stack may then take two)
    memcpy(s->pc, pc, sizeof *pc * static_cast<size_t>(depth));
    s->call = call, s->depth = static_cast<uint32_t>(depth);
    Charge(s, ns);
    __atomic_store_n(&s->hash, h, __ATOMIC_RELEASE);
    return;
  }
  AtomicAdd(&g_stacks_lost, 1);
  AtomicAdd(&g_stacks_lost_ns, ns);
}

// Each thread fills a chunk of slots of its own, so that threads do not take turns on one
// counter's line at every unlock; a chunk it leaves part empty is skipped by the dump.
void TimelineAdd(char what, char mode, const void* o, uint64_t t0, uint64_t t1) {
  uint64_t i = t_event_next;
  if (i >= t_event_end) {
    i = AtomicLoad(&g_events_next) < kEventMax
            ? __atomic_fetch_add(&g_events_next, kEventChunk, __ATOMIC_RELAXED)
            : kEventMax;
    if (i >= kEventMax) {
      AtomicAdd(&g_events_lost, 1);
      return;
    }
    t_event_end = i + kEventChunk;
  }
  t_event_next = i + 1;
  if (t_tid == 0) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  Event* const e = &g_events[i];
  e->t0 = t0, e->t1 = t1, e->o = reinterpret_cast<uintptr_t>(o), e->tid = t_tid, e->mode = mode;
  __atomic_store_n(&e->what, what, __ATOMIC_RELEASE);
}

// A forked child reports only its own: the parent's stacks and intervals are dropped, and
// its one thread has an id of its own.
void StacksAfterFork() {
  t_tid = 0;
  t_event_next = t_event_end = 0;
  if (g_stack_depth != 0) memset(g_stacks, 0, sizeof g_stacks);
  const uint64_t n = g_events_next < kEventMax ? g_events_next : kEventMax;
  for (uint64_t i = 0; i < n; i++) g_events[i].what = 0;
  g_events_next = g_events_lost = g_stacks_lost = g_stacks_lost_ns = 0;
}

// ------------------------------------------------------------------ the dump's sections

namespace {

void PutHex(uint64_t v) {
  char s[24];
  Put("\""), Put(FormatNumber(s, v, 16) + 2), Put("\"");
}

int PutObject(dl_phdr_info* info, size_t, void* first) {
  auto* const n = static_cast<int*>(first);
  const char* name =
      info->dlpi_name != nullptr && info->dlpi_name[0] != 0 ? info->dlpi_name : ExePath();
  Put(*n != 0 ? ",\n  {" : "\n  {");
  ++*n;
  PutKey("path"), PutStr(name), Put(", "), PutKey("base"), PutHex(info->dlpi_addr);
  Put(", \"text\": [");
  for (int i = 0, k = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    Put(k++ != 0 ? ", [" : "["), PutHex(info->dlpi_addr + ph.p_vaddr), Put(", ");
    PutHex(info->dlpi_addr + ph.p_vaddr + ph.p_memsz), Put("]");
  }
  Put("]}");
  return 0;
}

void PutStack(const Stack& s, bool first) {
  Put(first ? "\n  {" : ",\n  {");
  PutKey("call"), PutStr(kCallNames[s.call < 9 ? s.call : 0]);
  Put(", \"count\": "), PutNum(AtomicLoad(&s.count), 10);
  Put(", \"wait_ns\": "), PutNum(AtomicLoad(&s.wait_ns), 10);
  Put(", \"frames\": [");
  for (uint32_t i = 0; i < s.depth && i < kStackMax; i++) {
    if (i != 0) Put(", ");
    PutHex(s.pc[i]);
  }
  Put("]}");
}

}  // namespace

void PutStacks() {
  if (g_stack_depth == 0) return;
  Put(",\n\"stacks\": {\"depth\": "), PutNum(static_cast<uint64_t>(g_stack_depth), 10);
  Put(", \"unwinder\": "), PutStr(g_backtrace != nullptr ? "_Unwind_Backtrace" : "none");
  Put(", \"slots\": "), PutNum(kStackSlots, 10);
  Put(", \"lost\": "), PutNum(AtomicLoad(&g_stacks_lost), 10);
  Put(", \"lost_wait_ns\": "), PutNum(AtomicLoad(&g_stacks_lost_ns), 10);
  Put(", \"list\": [");
  bool first = true;
  for (const Stack& s : g_stacks) {
    if (__atomic_load_n(&s.hash, __ATOMIC_ACQUIRE) <= kFilling) continue;
    PutStack(s, first);
    first = false;
  }
  Put("]},\n\"objects\": [");
  int n = 0;
  dl_iterate_phdr(PutObject, &n);
  Put("]");
}

// Times as CLOCK_MONOTONIC nanoseconds, so that the processes of one run share one axis.
void PutTimeline() {
  if (!g_timeline) return;
  const uint64_t n = AtomicLoad(&g_events_next);
  Put(",\n\"timeline\": {\"capacity\": "), PutNum(kEventMax, 10);
  Put(", \"lost\": "), PutNum(AtomicLoad(&g_events_lost), 10);
  Put(", \"events\": [");
  bool first = true;
  for (uint64_t i = 0; i < n && i < kEventMax; i++) {
    const Event& e = g_events[i];
    const char what = __atomic_load_n(&e.what, __ATOMIC_ACQUIRE);
    if (what == 0) continue;  // still being written
    const char code[] = {'"', what, '"', ',', ' ', '"', e.mode, '"', ',', ' ', 0};
    Put(first ? "\n  [" : ",\n  ["), Put(code), PutHex(e.o);
    Put(", "), PutNum(e.tid, 10), Put(", "), PutNum(MonotonicNs(e.t0), 10);
    Put(", "), PutNum(e.t1 > e.t0 ? ToNs(e.t1 - e.t0) : 0, 10), Put("]");
    first = false;
  }
  Put("]}");
}

}  // namespace lockprof
