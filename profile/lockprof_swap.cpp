// The swap locks over the lock types of common/ (lockprof_swap.h says how
// their contexts live).
#include "profile/lockprof_swap.h"

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
#include "common/ttas_backoff_lock.h"

namespace lockprof {
namespace {

// ------------------------------------------------------------------ contexts, per thread

constexpr int kContexts = 64;
struct ContextSlot {
  const void* lock;
  alignas(16) unsigned char bytes[16];
};
LOCKPROF_TLS ContextSlot t_contexts[kContexts];
LOCKPROF_TLS uint64_t t_contexts_used;

// A fresh Ctx for lock o, or null when kContexts are in use. The mask is read
// once and checked: a signal handler that locks (not allowed, but done) may
// take one in between; entries may then be wrong, never outside the array.
template <typename Ctx>
Ctx* NewContext(const void* o) {
  static_assert(sizeof(Ctx) <= sizeof(ContextSlot::bytes) && alignof(Ctx) <= 16);
  const uint64_t used = t_contexts_used;
  if (used == ~0ull) return nullptr;
  const int i = __builtin_ctzll(~used);
  t_contexts_used = used | 1ull << i;
  t_contexts[i].lock = o;
  return new (t_contexts[i].bytes) Ctx();
}

// This thread's context for lock o, or null.
template <typename Ctx>
Ctx* ContextOf(const void* o) {
  for (uint64_t m = t_contexts_used; m != 0; m &= m - 1) {
    const int i = __builtin_ctzll(m);
    if (t_contexts[i].lock == o) return std::launder(reinterpret_cast<Ctx*>(t_contexts[i].bytes));
  }
  return nullptr;
}

void FreeContext(const void* ctx) {
  const auto at = reinterpret_cast<uintptr_t>(ctx) - reinterpret_cast<uintptr_t>(&t_contexts[0]);
  t_contexts_used &= ~(1ull << (at / sizeof(ContextSlot)));
}

// ------------------------------------------------------------------ CLH nodes, per process

constexpr uint32_t kClhPool = 65536;
kv::ClhNode g_clh_pool[kClhPool];
uint64_t g_clh_free;   // generation << 32 | (index + 1) of the first free node; 0: none
uint32_t g_clh_fresh;  // g_clh_pool[g_clh_fresh..] never used yet

struct ClhPoolNodes {
  // A free node, or null when kClhPool acquisitions are under way at once.
  static kv::ClhNode* Take() {
    uint64_t h = __atomic_load_n(&g_clh_free, __ATOMIC_ACQUIRE);
    while (static_cast<uint32_t>(h) != 0) {
      kv::ClhNode* const n = &g_clh_pool[static_cast<uint32_t>(h) - 1];
      const uint64_t next =
          ((h >> 32) + 1) << 32 | __atomic_load_n(&n->pool_link, __ATOMIC_RELAXED);
      if (__atomic_compare_exchange_n(&g_clh_free, &h, next, true, __ATOMIC_ACQUIRE,
                                      __ATOMIC_ACQUIRE)) {
        return n;
      }
    }
    uint32_t i = __atomic_load_n(&g_clh_fresh, __ATOMIC_RELAXED);
    while (i < kClhPool) {
      if (__atomic_compare_exchange_n(&g_clh_fresh, &i, i + 1, true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
        return &g_clh_pool[i];
      }
    }
    return nullptr;
  }
  static void Give(kv::ClhNode* n) {
    const uint64_t mine = static_cast<uint64_t>(n - g_clh_pool) + 1;
    uint64_t h = __atomic_load_n(&g_clh_free, __ATOMIC_RELAXED);
    uint64_t next = 0;
    do {
      __atomic_store_n(&n->pool_link, static_cast<uint32_t>(h), __ATOMIC_RELAXED);
      next = ((h >> 32) + 1) << 32 | mine;
    } while (!__atomic_compare_exchange_n(&g_clh_free, &h, next, true, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
  }
};

using PoolClhLock = kv::BasicClhLock<ClhPoolNodes>;
using PfBravo = kv::BravoRwLock<kv::PhaseFairRwLock>;

// What a context needs before the lock call: a CLH node from the pool (its
// exhaustion is EAGAIN here, not a failure inside the lock).
bool Fill(kv::McsLock::Context* /*ctx*/) { return true; }
bool Fill(PoolClhLock::Context* ctx) {
  ctx->mine = ClhPoolNodes::Take();
  return ctx->mine != nullptr;
}

// ------------------------------------------------------------------ the lock in a record

// The record's state as lock type L: all-zero bytes are an unlocked L (every
// lock type of common/ promises it; lock_types_test.cpp checks it).
template <typename L>
L& LockIn(Rec* r) {
  static_assert(sizeof(L) <= sizeof(SwapState::lock) && alignof(L) <= alignof(SwapState));
  return *std::launder(reinterpret_cast<L*>(r->s.swap.lock));
}

// The writer's name in the record: an rwlock unlock tells the sides apart by it.
void MarkWriter(Rec* r) { __atomic_store_n(&r->s.swap.writer, Self(), __ATOMIC_RELAXED); }
bool TakeWriter(Rec* r) {
  if (__atomic_load_n(&r->s.swap.writer, __ATOMIC_RELAXED) != Self()) return false;
  __atomic_store_n(&r->s.swap.writer, 0, __ATOMIC_RELAXED);
  return true;
}

// A mutex without a context (ticket, TTAS, futex); an rwlock's readers take
// it exclusively. IsLocked, where the lock has it, refuses an unlock of a
// free lock (pthread's EPERM), which would otherwise corrupt it.
template <typename L>
struct PlainOps {
  static int Try(Rec* r, const void* /*o*/, int /*mode*/) {
    return LockIn<L>(r).TryLock() ? 0 : EBUSY;
  }
  static int Lock(Rec* r, const void* /*o*/, int /*mode*/) {
    LockIn<L>(r).Lock();
    return 0;
  }
  static int Unlock(Rec* r, const void* /*o*/) {
    L& lock = LockIn<L>(r);
    if constexpr (requires { lock.IsLocked(); }) {
      if (!lock.IsLocked()) return EPERM;
    }
    lock.Unlock();
    return 0;
  }
};

// The only unlock that may make a system call (a wake-up), which may set errno.
int FutexUnlock(Rec* r, const void* o) {
  const int saved = errno;
  const int rc = PlainOps<kv::FutexMutex>::Unlock(r, o);
  errno = saved;
  return rc;
}

int FutexTimed(Rec* r, const void* /*o*/, int /*mode*/, clockid_t clk, const timespec* abs) {
  return LockIn<kv::FutexMutex>(r).LockUntil(clk, *abs) ? 0 : ETIMEDOUT;
}

// A queue lock (MCS, CLH): its context from this thread's pool, from the lock
// to the unlock; an unlock by a thread that has none is refused.
template <typename L>
struct QueuedOps {
  using Ctx = typename L::Context;
  static Ctx* Prepared(const void* o) {
    Ctx* const ctx = NewContext<Ctx>(o);
    if (ctx != nullptr && !Fill(ctx)) {
      FreeContext(ctx);
      return nullptr;
    }
    return ctx;
  }
  static int Try(Rec* r, const void* o, int /*mode*/) {
    Ctx* const ctx = Prepared(o);
    if (ctx == nullptr) return EAGAIN;
    if (LockIn<L>(r).TryLock(ctx)) return 0;
    FreeContext(ctx);
    return EBUSY;
  }
  static int Lock(Rec* r, const void* o, int /*mode*/) {
    Ctx* const ctx = Prepared(o);
    if (ctx == nullptr) return EAGAIN;
    LockIn<L>(r).Lock(ctx);
    return 0;
  }
  static int Unlock(Rec* r, const void* o) {
    Ctx* const ctx = ContextOf<Ctx>(o);
    if (ctx == nullptr) return EPERM;
    LockIn<L>(r).Unlock(ctx);
    FreeContext(ctx);
    return 0;
  }
};

// The phase-fair rwlock; a read unlock when nobody reads is refused.
struct PfOps {
  using L = kv::PhaseFairRwLock;
  static int Try(Rec* r, const void* /*o*/, int mode) {
    if (mode == kRead) return LockIn<L>(r).TryLockShared() ? 0 : EBUSY;
    if (!LockIn<L>(r).TryLock()) return EBUSY;
    MarkWriter(r);
    return 0;
  }
  static int Lock(Rec* r, const void* /*o*/, int mode) {
    if (mode == kRead) {
      LockIn<L>(r).LockShared();
      return 0;
    }
    LockIn<L>(r).Lock();
    MarkWriter(r);
    return 0;
  }
  static int Unlock(Rec* r, const void* /*o*/) {
    L& lock = LockIn<L>(r);
    if (TakeWriter(r)) {
      lock.Unlock();
    } else if (lock.HasReaders()) {
      lock.UnlockShared();
    } else {
      return EPERM;
    }
    return 0;
  }
};

// BRAVO over the phase-fair lock: a fast read keeps its slot in a context
// until its unlock; a slow read and a write need none.
struct BravoOps {
  using Ctx = PfBravo::Context;
  template <typename Take>
  static int Read(Rec* r, const void* o, Take take) {
    Ctx* const ctx = NewContext<Ctx>(o);
    if (ctx == nullptr) return EAGAIN;
    if (!take(ctx)) {
      FreeContext(ctx);
      return EBUSY;
    }
    if (ctx->slot == nullptr) {
      FreeContext(ctx);
    } else if (g_profiling) {
      AtomicAdd(&r->fast_reads, 1);
    }
    return 0;
  }
  static int Try(Rec* r, const void* o, int mode) {
    PfBravo& lock = LockIn<PfBravo>(r);
    if (mode == kRead) return Read(r, o, [&](Ctx* ctx) { return lock.TryLockShared(ctx); });
    Ctx none;
    if (!lock.TryLock(&none)) return EBUSY;
    MarkWriter(r);
    return 0;
  }
  static int Lock(Rec* r, const void* o, int mode) {
    PfBravo& lock = LockIn<PfBravo>(r);
    if (mode == kRead) {
      return Read(r, o, [&](Ctx* ctx) {
        lock.LockShared(ctx);
        return true;
      });
    }
    Ctx none;
    lock.Lock(&none);
    MarkWriter(r);
    return 0;
  }
  static int Unlock(Rec* r, const void* o) {
    PfBravo& lock = LockIn<PfBravo>(r);
    Ctx none;
    if (Ctx* const fast = ContextOf<Ctx>(o); fast != nullptr) {
      lock.UnlockShared(fast);
      FreeContext(fast);
    } else if (TakeWriter(r)) {
      lock.Unlock(&none);
    } else if (lock.base().HasReaders()) {
      lock.UnlockShared(&none);
    } else {
      return EPERM;
    }
    return 0;
  }
};

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
  return {Listed(name), Ops::Try, Ops::Lock, nullptr, Ops::Unlock};
}

constexpr SwapOps WithTimed(SwapOps ops,
                            int (*timed)(Rec*, const void*, int, clockid_t, const timespec*),
                            int (*unlock)(Rec*, const void*)) {
  ops.timed = timed;
  ops.unlock = unlock;
  return ops;
}

// Every lock of common/swap_locks.h, in its order (checked below).
constexpr SwapOps kOps[] = {
    Entry<PlainOps<kv::TicketLock>>("ticketlock"),
    Entry<QueuedOps<kv::McsLock>>("mcs"),
    Entry<PlainOps<kv::TtasBackoffLock>>("ttas-backoff"),
    Entry<QueuedOps<PoolClhLock>>("clh"),
    WithTimed(Entry<PlainOps<kv::FutexMutex>>("futex-mutex"), FutexTimed, FutexUnlock),
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
