// The swap locks over the lock types of common/ (lockprof_swap.h says where their state and
// their contexts live), and their fast paths.
#include "profile/lockprof_swap.h"

#include <pthread.h>

#include <cerrno>
#include <cstddef>
#include <new>

#include "common/bravo_rwlock.h"
#include "common/clh_lock.h"
#include "common/futex_mutex.h"
#include "common/mcs_lock.h"
#include "common/pflock.h"
#include "common/swap_locks.h"
#include "common/ticket_lock.h"
#include "profile/lockprof_clh_pool.inc"
#include "common/ttas_backoff_lock.h"

namespace lockprof {
namespace {

// errno's address, fixed for a thread's life, kept: saving errno then costs no call.
LOCKPROF_TLS int* t_errno;
LOCKPROF_INLINE int* Errno() {
  int* e = t_errno;
  if (__builtin_expect(e == nullptr, 0)) t_errno = e = &errno;
  return e;
}

// ------------------------------------------------------------------ contexts, per thread

constexpr int kContexts = 64;
struct ContextSlot {
  const void* lock;
  alignas(16) unsigned char bytes[16];
};
LOCKPROF_TLS ContextSlot t_contexts[kContexts];
// The others' free mask. Slot 0 is taken first and is told free by its lock alone (null; its
// bit stays set), so a thread that holds one such lock at a time, as most do, never searches.
LOCKPROF_TLS uint64_t t_contexts_used = 1;

// A fresh Ctx in a slot's bytes: constructed, except where a context the lock leaves at rest
// can be taken as it is. An MCS node needs only its link null before the swap (its flag is
// set after, by a thread that waits): a store just before a locked instruction makes it wait
// for the store buffer, so the link is stored only when a context of another kind left the
// bytes dirty (a bravo rwlock's, in the same slots). A CLH context's one field is set by Fill.
template <typename Ctx>
LOCKPROF_INLINE Ctx* Fresh(unsigned char* bytes) {
  return new (bytes) Ctx();
}
template <>
LOCKPROF_INLINE kv::McsLock::Context* Fresh(unsigned char* bytes) {
  auto* const ctx = std::launder(reinterpret_cast<kv::McsLock::Context*>(bytes));
  if (__builtin_expect(ctx->next.load(std::memory_order_relaxed) != nullptr, 0)) {
    ctx->next.store(nullptr, std::memory_order_relaxed);
  }
  return ctx;
}

// A fresh Ctx for lock o, or null when kContexts are in use. The mask is read
// once and checked: a signal handler that locks (not allowed, but done) may
// take one in between; entries may then be wrong, never outside the array.
template <typename Ctx>
LOCKPROF_INLINE Ctx* NewContext(const void* o) {
  static_assert(sizeof(Ctx) <= sizeof(ContextSlot::bytes) && alignof(Ctx) <= 16);
  int i = 0;
  if (__builtin_expect(t_contexts[0].lock != nullptr, 0)) {
    const uint64_t used = t_contexts_used | 1;
    if (used == ~0ull) return nullptr;
    i = __builtin_ctzll(~used);
    t_contexts_used = used | 1ull << i;
  }
  t_contexts[i].lock = o;
  return Fresh<Ctx>(t_contexts[i].bytes);
}

// This thread's context for lock o, or null.
template <typename Ctx>
LOCKPROF_INLINE Ctx* ContextOf(const void* o) {
  if (__builtin_expect(t_contexts[0].lock == o, 1))
    return std::launder(reinterpret_cast<Ctx*>(t_contexts[0].bytes));
  for (uint64_t m = t_contexts_used & ~1ull; m != 0; m &= m - 1) {
    const int i = __builtin_ctzll(m);
    if (t_contexts[i].lock == o) return std::launder(reinterpret_cast<Ctx*>(t_contexts[i].bytes));
  }
  return nullptr;
}

LOCKPROF_INLINE void FreeContext(const void* ctx) {
  const auto at = reinterpret_cast<uintptr_t>(ctx) - reinterpret_cast<uintptr_t>(&t_contexts[0]);
  const uintptr_t i = at / sizeof(ContextSlot);
  if (__builtin_expect(i == 0, 1)) {
    t_contexts[0].lock = nullptr;
  } else {
    t_contexts_used &= ~(1ull << i);
  }
}

// This thread, unique among live threads: an rwlock's writer is named by it.
LOCKPROF_INLINE uintptr_t Me() { return reinterpret_cast<uintptr_t>(&t_contexts_used); }

using PoolClhLock = kv::BasicClhLock<ClhPoolNodes>;
using PfBravo = kv::BravoRwLock<kv::PhaseFairRwLock>;

// What a context needs before the lock call: a CLH node from the pool (its
// exhaustion is EAGAIN here, not a failure inside the lock).
bool Fill(kv::McsLock::Context* /*ctx*/) { return true; }
bool Fill(PoolClhLock::Context* ctx) {
  ctx->mine = ClhPoolNodes::Take();
  return ctx->mine != nullptr;
}

// ------------------------------------------------------------------ where a lock's state is

// The bytes of a pthread object a lock may keep its state in: a mutex's before __nusers
// (which pthread_mutex_destroy reads) and __kind (which says whether the mutex is swapped), a
// rwlock's before __cur_writer, __shared (which says whether it is swapped) and __flags. A
// lock that serves both kinds fits the smaller.
constexpr std::size_t Least(std::size_t a, std::size_t b) { return a < b ? a : b; }
constexpr std::size_t kMutexBytes =
    Least(offsetof(__pthread_mutex_s, __nusers), offsetof(__pthread_mutex_s, __kind));
constexpr std::size_t kRwlockBytes = Least(Least(offsetof(__pthread_rwlock_arch_t, __cur_writer),
                                                 offsetof(__pthread_rwlock_arch_t, __shared)),
                                           offsetof(__pthread_rwlock_arch_t, __flags));
static_assert(kMutexBytes <= kRwlockBytes, "a mutex's bytes are what both kinds have");

// Lock type L in the pthread object o, in its first kBytes bytes: zero bytes are an unlocked
// L (every lock type of common/ promises it; lock_types_test.cpp checks it), which is what
// PTHREAD_MUTEX_INITIALIZER, PTHREAD_RWLOCK_INITIALIZER and pthread_*_init leave there.
template <typename L, std::size_t kBytes>
LOCKPROF_INLINE L& InObject(void* o) {
  static_assert(sizeof(L) <= kBytes && alignof(L) <= alignof(pthread_mutex_t) &&
                alignof(L) <= alignof(pthread_rwlock_t));
  return *std::launder(reinterpret_cast<L*>(o));
}

// Lock type L in the record's state (a lock too large for the object).
template <typename L>
LOCKPROF_INLINE L& InRecord(Rec* r) {
  static_assert(sizeof(L) <= sizeof(SwapState::lock) && alignof(L) <= alignof(SwapState));
  return *std::launder(reinterpret_cast<L*>(r->s.swap.lock));
}

// The writer's name beside a rwlock: its unlock tells the sides apart by it.
LOCKPROF_INLINE void MarkWriter(uintptr_t* writer) {
  __atomic_store_n(writer, Me(), __ATOMIC_RELAXED);
}
LOCKPROF_INLINE bool TakeWriter(uintptr_t* writer) {
  if (__atomic_load_n(writer, __ATOMIC_RELAXED) != Me()) return false;
  __atomic_store_n(writer, 0, __ATOMIC_RELAXED);
  return true;
}

// ------------------------------------------------------------------ the locks

// A mutex without a context (ticket, TTAS, futex), in the object; an rwlock's readers take
// it exclusively. IsLocked, where the lock has it, refuses an unlock of a free lock
// (pthread's EPERM), which would otherwise corrupt it.
template <typename L>
struct PlainOps {
  static constexpr bool kInPlace = true, kServesMutexes = true;
  LOCKPROF_INLINE static L& Of(void* o) { return InObject<L, kMutexBytes>(o); }
  LOCKPROF_INLINE static int Try(Rec* /*r*/, void* o, int /*mode*/) {
    return Of(o).TryLock() ? 0 : EBUSY;
  }
  static int Lock(Rec* /*r*/, void* o, int /*mode*/) {
    Of(o).Lock();
    return 0;
  }
  LOCKPROF_INLINE static int Unlock(Rec* /*r*/, void* o) {
    L& lock = Of(o);
    if constexpr (requires { lock.IsLocked(); }) {
      if (!lock.IsLocked()) return EPERM;
    }
    lock.Unlock();
    return 0;
  }
};

// The futex mutex sleeps until a timed acquisition's deadline; its unlock is the only one
// that may make a system call (a wake-up), which may set errno.
struct FutexOps : PlainOps<kv::FutexMutex> {
  // Hides PlainOps's on purpose: the ops are chosen by type, never through the base.
  // cppcheck-suppress duplInheritedMember
  LOCKPROF_INLINE static int Unlock(Rec* r, void* o) {
    int* const e = Errno();
    const int saved = *e;
    const int rc = PlainOps::Unlock(r, o);
    *e = saved;
    return rc;
  }
  static int Timed(Rec* /*r*/, void* o, int /*mode*/, clockid_t clk, const timespec* abs) {
    return Of(o).LockUntil(clk, *abs) ? 0 : ETIMEDOUT;
  }
};

// Whether a context may be copied out of its slot for the unlock: CLH's names the thread's
// own node, which nobody reaches through the context; an MCS predecessor writes into its
// successor's context, which must stay put.
template <typename Ctx>
constexpr bool kMovable = false;
template <>
constexpr bool kMovable<PoolClhLock::Context> = true;

// A queue lock (MCS, CLH) in the object: its context from this thread's pool, from the lock
// to the unlock; an unlock by a thread that has none is refused.
template <typename L>
struct QueuedOps {
  static constexpr bool kInPlace = true, kServesMutexes = true;
  using Ctx = typename L::Context;
  LOCKPROF_INLINE static L& Of(void* o) { return InObject<L, kMutexBytes>(o); }
  LOCKPROF_INLINE static Ctx* Prepared(const void* o) {
    Ctx* const ctx = NewContext<Ctx>(o);
    if (ctx != nullptr && !Fill(ctx)) {
      FreeContext(ctx);
      return nullptr;
    }
    return ctx;
  }
  LOCKPROF_INLINE static int Try(Rec* /*r*/, void* o, int /*mode*/) {
    Ctx* const ctx = Prepared(o);
    if (ctx == nullptr) return EAGAIN;
    if (Of(o).TryLock(ctx)) return 0;
    FreeContext(ctx);
    return EBUSY;
  }
  static int Lock(Rec* /*r*/, void* o, int /*mode*/) {
    Ctx* const ctx = Prepared(o);
    if (ctx == nullptr) return EAGAIN;
    Of(o).Lock(ctx);
    return 0;
  }
  LOCKPROF_INLINE static int Unlock(Rec* /*r*/, void* o) {
    Ctx* const ctx = ContextOf<Ctx>(o);
    if (ctx == nullptr) return EPERM;
    if constexpr (kMovable<Ctx>) {
      // Nobody else holds a pointer to the context: freed first, nothing is left to do after
      // the unlock (whose rare paths call out), so the common one needs no registers saved.
      Ctx mine = *ctx;
      FreeContext(ctx);
      Of(o).Unlock(&mine);
    } else {
      Of(o).Unlock(ctx);
      FreeContext(ctx);
    }
    return 0;
  }
};

// The phase-fair rwlock and its writer's name, in the object; a read unlock when nobody
// reads is refused.
struct PfState {
  kv::PhaseFairRwLock lock;
  uintptr_t writer;
};
struct PfOps {
  static constexpr bool kInPlace = true, kServesMutexes = false;
  LOCKPROF_INLINE static PfState& Of(void* o) { return InObject<PfState, kRwlockBytes>(o); }
  LOCKPROF_INLINE static int Try(Rec* /*r*/, void* o, int mode) {
    PfState& s = Of(o);
    if (mode == kRead) return s.lock.TryLockShared() ? 0 : EBUSY;
    if (!s.lock.TryLock()) return EBUSY;
    MarkWriter(&s.writer);
    return 0;
  }
  static int Lock(Rec* /*r*/, void* o, int mode) {
    PfState& s = Of(o);
    if (mode == kRead) {
      s.lock.LockShared();
      return 0;
    }
    s.lock.Lock();
    MarkWriter(&s.writer);
    return 0;
  }
  LOCKPROF_INLINE static int Unlock(Rec* /*r*/, void* o) {
    PfState& s = Of(o);
    if (TakeWriter(&s.writer)) {
      s.lock.Unlock();
    } else if (s.lock.HasReaders()) {
      s.lock.UnlockShared();
    } else {
      return EPERM;
    }
    return 0;
  }
};

// BRAVO over the phase-fair lock, in the record (32 bytes: more than the object has free),
// its writer's name beside it: a fast read keeps its slot and the record in a context until
// its unlock, which then needs no lookup; a slow read and a write need none.
struct BravoCtx {
  PfBravo::Context read;
  Rec* r;
};
struct BravoOps {
  static constexpr bool kInPlace = false, kServesMutexes = false;
  template <typename Take>
  LOCKPROF_INLINE static int Read(Rec* r, const void* o, Take take) {
    BravoCtx* const ctx = NewContext<BravoCtx>(o);
    if (ctx == nullptr) return EAGAIN;
    if (!take(&ctx->read)) {
      FreeContext(ctx);
      return EBUSY;
    }
    if (ctx->read.slot == nullptr) {
      FreeContext(ctx);
      return 0;
    }
    ctx->r = r;
    if (g_profiling) AtomicAdd(&r->fast_reads, 1);
    return 0;
  }
  LOCKPROF_INLINE static int Try(Rec* r, void* o, int mode) {
    PfBravo& lock = InRecord<PfBravo>(r);
    if (mode == kRead)
      return Read(r, o, [&](PfBravo::Context* c) { return lock.TryLockShared(c); });
    PfBravo::Context none;
    if (!lock.TryLock(&none)) return EBUSY;
    MarkWriter(&r->s.swap.writer);
    return 0;
  }
  static int Lock(Rec* r, void* o, int mode) {
    PfBravo& lock = InRecord<PfBravo>(r);
    if (mode == kRead) {
      return Read(r, o, [&](PfBravo::Context* c) {
        lock.LockShared(c);
        return true;
      });
    }
    PfBravo::Context none;
    lock.Lock(&none);
    MarkWriter(&r->s.swap.writer);
    return 0;
  }
  // The unlock of a fast read of o by this thread, if it holds one.
  LOCKPROF_INLINE static bool UnlockFastRead(const void* o) {
    BravoCtx* const fast = ContextOf<BravoCtx>(o);
    if (fast == nullptr) return false;
    InRecord<PfBravo>(fast->r).UnlockShared(&fast->read);
    FreeContext(fast);
    return true;
  }
  // The unlock of anything else: a write, or a read that took the phase-fair lock.
  LOCKPROF_INLINE static int UnlockRest(Rec* r, void* /*o*/) {
    PfBravo& lock = InRecord<PfBravo>(r);
    PfBravo::Context none;
    if (TakeWriter(&r->s.swap.writer)) {
      lock.Unlock(&none);
    } else if (lock.base().HasReaders()) {
      lock.UnlockShared(&none);
    } else {
      return EPERM;
    }
    return 0;
  }
  LOCKPROF_INLINE static int Unlock(Rec* r, void* o) {
    return UnlockFastRead(o) ? 0 : UnlockRest(r, o);
  }
};

// ------------------------------------------------------------------ the fast paths

// After a failed try, the blocking call: the only part of an acquisition that may sleep or
// yield, so the only one that saves errno. Out of line, so the fast path needs no frame.
template <typename Ops>
__attribute__((noinline)) int Blocking(Rec* r, void* o, int mode) {
  int* const e = Errno();
  const int saved = *e;
  const int rc = Ops::Lock(r, o, mode);
  *e = saved;
  return rc;
}

// The rwlock this thread found a record for last, and that record: an object's record never
// changes (slots never empty), so a thread that takes one rwlock again and again looks it
// up once.
LOCKPROF_TLS const void* t_last_rwlock;
LOCKPROF_TLS Rec* t_last_rwlock_rec;

LOCKPROF_INLINE Rec* RwlockRec(const void* l) {
  if (__builtin_expect(t_last_rwlock == l, 1)) return t_last_rwlock_rec;
  Rec* const r = FindRec(l, kRwlock);
  if (r != nullptr) t_last_rwlock = l, t_last_rwlock_rec = r;
  return r;
}

// Whether the swap serves rwlock l, and the record it keeps its state in (none in the object);
// a record-kept lock of an object the full table has no room for is pthread's.
template <typename Ops>
LOCKPROF_INLINE bool ServedRw(pthread_rwlock_t* l, Rec** r) {
  if (__builtin_expect(!RwlockSwappable(l), 0)) return false;
  if constexpr (!Ops::kInPlace) {
    *r = RwlockRec(l);
    return *r != nullptr;
  }
  return true;
}

template <typename Ops>
int MutexLock(pthread_mutex_t* m) noexcept {
  static_assert(Ops::kInPlace, "a mutex swap needs no record");
  if (__builtin_expect(!MutexSwappable(m), 0)) return PthreadMutexLock(m);
  const int rc = Ops::Try(nullptr, m, kMutexMode);
  return __builtin_expect(rc != EBUSY, 1) ? rc : Blocking<Ops>(nullptr, m, kMutexMode);
}
template <typename Ops>
int MutexTrylock(pthread_mutex_t* m) noexcept {
  if (__builtin_expect(!MutexSwappable(m), 0)) return PthreadMutexTrylock(m);
  return Ops::Try(nullptr, m, kMutexMode);
}
template <typename Ops>
int MutexUnlock(pthread_mutex_t* m) noexcept {
  if (__builtin_expect(!MutexSwappable(m), 0)) return PthreadMutexUnlock(m);
  return Ops::Unlock(nullptr, m);
}

template <typename Ops, int kMode>
int RwLock(pthread_rwlock_t* l) noexcept {
  Rec* r = nullptr;
  if (__builtin_expect(!ServedRw<Ops>(l, &r), 0))
    return kMode == kRead ? PthreadRdlock(l) : PthreadWrlock(l);
  const int rc = Ops::Try(r, l, kMode);
  return __builtin_expect(rc != EBUSY, 1) ? rc : Blocking<Ops>(r, l, kMode);
}
template <typename Ops, int kMode>
int RwTrylock(pthread_rwlock_t* l) noexcept {
  Rec* r = nullptr;
  if (__builtin_expect(!ServedRw<Ops>(l, &r), 0))
    return kMode == kRead ? PthreadTryrdlock(l) : PthreadTrywrlock(l);
  return Ops::Try(r, l, kMode);
}
template <typename Ops>
int RwUnlock(pthread_rwlock_t* l) noexcept {
  if constexpr (requires { &Ops::UnlockFastRead; }) {
    if (RwlockSwappable(l) && Ops::UnlockFastRead(l)) return 0;
    Rec* r = nullptr;
    if (!ServedRw<Ops>(l, &r)) return PthreadRwlockUnlock(l);
    return Ops::UnlockRest(r, l);
  } else {
    Rec* r = nullptr;
    if (__builtin_expect(!ServedRw<Ops>(l, &r), 0)) return PthreadRwlockUnlock(l);
    return Ops::Unlock(r, l);
  }
}

// ------------------------------------------------------------------ the list

constexpr bool SameText(const char* a, const char* b) {
  while (*a != 0 && *a == *b) ++a, ++b;
  return *a == *b;
}

// The list's entry called name; null if it has none (refused below).
constexpr const kv::SwapLockInfo* Listed(const char* name) {
  for (const kv::SwapLockInfo& lock : kv::kSwapLocks) {
    if (SameText(lock.name, name)) return &lock;
  }
  return nullptr;
}

template <typename Ops>
constexpr SwapOps Entry(const char* name) {
  SwapOps ops{Listed(name), Ops::kInPlace, Ops::Try, Ops::Lock, nullptr, Ops::Unlock, {}, nullptr};
  if constexpr (requires { &Ops::Timed; }) ops.timed = Ops::Timed;
  if constexpr (Ops::kServesMutexes) {
    ops.fast.mutex_lock = MutexLock<Ops>;
    ops.fast.mutex_trylock = MutexTrylock<Ops>;
    ops.fast.mutex_unlock = MutexUnlock<Ops>;
  }
  ops.fast.rdlock = RwLock<Ops, kRead>;
  ops.fast.wrlock = RwLock<Ops, kWrite>;
  ops.fast.tryrdlock = RwTrylock<Ops, kRead>;
  ops.fast.trywrlock = RwTrylock<Ops, kWrite>;
  ops.fast.rwlock_unlock = RwUnlock<Ops>;
  return ops;
}

constexpr SwapOps WithStart(SwapOps ops, void (*start)()) {
  ops.start = start;
  return ops;
}

// Every lock of common/swap_locks.h, in its order (checked below).
constexpr SwapOps kOps[] = {
    Entry<PlainOps<kv::TicketLock>>("ticketlock"),
    Entry<QueuedOps<kv::McsLock>>("mcs"),
    Entry<PlainOps<kv::TtasBackoffLock>>("ttas-backoff"),
    WithStart(Entry<QueuedOps<PoolClhLock>>("clh"), ClhStart),
    Entry<FutexOps>("futex-mutex"),
    Entry<PfOps>("pflock"),
    Entry<BravoOps>("bravo-pflock"),
};

constexpr bool FollowsTheList() {
  if (sizeof(kOps) / sizeof(kOps[0]) != kv::kSwapLockCount) return false;
  for (std::size_t i = 0; i < kv::kSwapLockCount; ++i) {
    if (kOps[i].info != &kv::kSwapLocks[i]) return false;
  }
  return true;
}
static_assert(FollowsTheList(), "kOps must have every lock of common/swap_locks.h, in order");

}  // namespace

const SwapOps* SwapOpsNamed(const char* name) {
  for (const SwapOps& ops : kOps) {
    if (SameText(ops.info->name, name)) return &ops;
  }
  return nullptr;
}

uint32_t SwapIndex(const SwapOps* ops) { return static_cast<uint32_t>(ops - kOps); }
const SwapOps& SwapOpsAt(uint32_t index) { return kOps[index]; }
const SwapOps* PhaseFairOps() { return SwapOpsNamed("pflock"); }

}  // namespace lockprof
