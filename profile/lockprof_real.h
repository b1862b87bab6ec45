// The real pthread functions (libc's, found with dlsym on first use) and how one request
// reaches them: what was asked (Req), its try, its blocking or timed call, its unlock. Part of
// lockprof.cpp, which alone includes it (its functions inline into that file's lock path).
#ifndef KV_PROFILE_LOCKPROF_REAL_H_
#define KV_PROFILE_LOCKPROF_REAL_H_

#include <dlfcn.h>
#include <pthread.h>

#include "profile/lockprof.h"

namespace lockprof {
namespace {

LOCKPROF_TLS int t_resolving;  // this thread is inside dlsym: real functions answer 0

bool TimeValid(const timespec* t) {
  return t != nullptr && t->tv_nsec >= 0 && t->tv_nsec < 1000000000;
}

}  // namespace

// Plain dlsym may hand back the pre-2.3.2 condition variable ABI, hence the version.
void* Sym(void** slot, const char* name, const char* version) {
  void* p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (p != nullptr || t_resolving) return p;
  t_resolving = 1;
  if (version != nullptr) p = dlvsym(RTLD_NEXT, name, version);
  if (p == nullptr) p = dlsym(RTLD_NEXT, name);
  t_resolving = 0;
  __atomic_store_n(slot, p, __ATOMIC_RELEASE);
  return p;
}

bool Resolving() { return t_resolving != 0; }

namespace {

LOCKPROF_REAL(pthread_mutex_lock, nullptr)
LOCKPROF_REAL(pthread_mutex_trylock, nullptr)
LOCKPROF_REAL(pthread_mutex_timedlock, nullptr)
LOCKPROF_REAL(pthread_mutex_clocklock, nullptr)
LOCKPROF_REAL(pthread_mutex_unlock, nullptr)
LOCKPROF_REAL(pthread_rwlock_rdlock, nullptr)
LOCKPROF_REAL(pthread_rwlock_wrlock, nullptr)
LOCKPROF_REAL(pthread_rwlock_tryrdlock, nullptr)
LOCKPROF_REAL(pthread_rwlock_trywrlock, nullptr)
LOCKPROF_REAL(pthread_rwlock_timedrdlock, nullptr)
LOCKPROF_REAL(pthread_rwlock_timedwrlock, nullptr)
LOCKPROF_REAL(pthread_rwlock_clockrdlock, nullptr)
LOCKPROF_REAL(pthread_rwlock_clockwrlock, nullptr)
LOCKPROF_REAL(pthread_rwlock_unlock, nullptr)
LOCKPROF_REAL(pthread_cond_wait, "GLIBC_2.3.2")
LOCKPROF_REAL(pthread_cond_timedwait, "GLIBC_2.3.2")
LOCKPROF_REAL(pthread_cond_clockwait, nullptr)
LOCKPROF_REAL(pthread_cond_signal, "GLIBC_2.3.2")
LOCKPROF_REAL(pthread_cond_broadcast, "GLIBC_2.3.2")

// Every real lock function, found now; false if libc lacks one (or this thread is inside
// dlsym).
bool ResolveAll() {
  const bool found[] = {
      real_pthread_mutex_lock() != nullptr,         real_pthread_mutex_trylock() != nullptr,
      real_pthread_mutex_timedlock() != nullptr,    real_pthread_mutex_clocklock() != nullptr,
      real_pthread_mutex_unlock() != nullptr,       real_pthread_rwlock_rdlock() != nullptr,
      real_pthread_rwlock_wrlock() != nullptr,      real_pthread_rwlock_tryrdlock() != nullptr,
      real_pthread_rwlock_trywrlock() != nullptr,   real_pthread_rwlock_timedrdlock() != nullptr,
      real_pthread_rwlock_timedwrlock() != nullptr, real_pthread_rwlock_clockrdlock() != nullptr,
      real_pthread_rwlock_clockwrlock() != nullptr, real_pthread_rwlock_unlock() != nullptr,
      real_pthread_cond_wait() != nullptr,          real_pthread_cond_timedwait() != nullptr,
      real_pthread_cond_clockwait() != nullptr,     real_pthread_cond_signal() != nullptr,
      real_pthread_cond_broadcast() != nullptr,
  };
  for (const bool f : found) {
    if (!f) return false;
  }
  return true;
}

// The real fn called with the arguments; 0 (a no-op) while this thread is inside dlsym.
#define CALL(fn, ...) (real_##fn() != nullptr ? real_##fn()(__VA_ARGS__) : 0)

}  // namespace

int PthreadMutexLock(pthread_mutex_t* m) { return CALL(pthread_mutex_lock, m); }
int PthreadMutexTrylock(pthread_mutex_t* m) { return CALL(pthread_mutex_trylock, m); }
int PthreadMutexUnlock(pthread_mutex_t* m) { return CALL(pthread_mutex_unlock, m); }
int PthreadRdlock(pthread_rwlock_t* l) { return CALL(pthread_rwlock_rdlock, l); }
int PthreadWrlock(pthread_rwlock_t* l) { return CALL(pthread_rwlock_wrlock, l); }
int PthreadTryrdlock(pthread_rwlock_t* l) { return CALL(pthread_rwlock_tryrdlock, l); }
int PthreadTrywrlock(pthread_rwlock_t* l) { return CALL(pthread_rwlock_trywrlock, l); }
int PthreadRwlockUnlock(pthread_rwlock_t* l) { return CALL(pthread_rwlock_unlock, l); }

namespace {

// One acquisition as asked: what, which side, blocking or try or timed (against clk).
struct Req {
  void* o;
  int kind, mode, op;
  bool clocked;  // the caller named the clock (clocklock, clockwait)
  clockid_t clk;
  const timespec* abs;
  const void* site;
};

LOCKPROF_INLINE Req Untimed(void* o, int kind, int mode, int op, const void* site) {
  return Req{o, kind, mode, op, false, CLOCK_REALTIME, nullptr, site};
}

LOCKPROF_INLINE Req Timed(void* o, int kind, int mode, bool clocked, clockid_t clk,
                          const timespec* abs, const void* site) {
  return Req{o, kind, mode, kTimedOp, clocked, clk, abs, site};
}

LOCKPROF_INLINE pthread_mutex_t* AsMutex(const Req q) { return static_cast<pthread_mutex_t*>(q.o); }
LOCKPROF_INLINE pthread_rwlock_t* AsRwlock(const Req q) {
  return static_cast<pthread_rwlock_t*>(q.o);
}

LOCKPROF_INLINE int RealTry(const Req q) {
  if (q.kind == kMutex) return CALL(pthread_mutex_trylock, AsMutex(q));
  if (q.mode == kRead) return CALL(pthread_rwlock_tryrdlock, AsRwlock(q));
  return CALL(pthread_rwlock_trywrlock, AsRwlock(q));
}

int RealTimed(const Req q) {
  if (q.kind == kMutex) {
    return q.clocked ? CALL(pthread_mutex_clocklock, AsMutex(q), q.clk, q.abs)
                     : CALL(pthread_mutex_timedlock, AsMutex(q), q.abs);
  }
  if (q.mode == kRead) {
    return q.clocked ? CALL(pthread_rwlock_clockrdlock, AsRwlock(q), q.clk, q.abs)
                     : CALL(pthread_rwlock_timedrdlock, AsRwlock(q), q.abs);
  }
  return q.clocked ? CALL(pthread_rwlock_clockwrlock, AsRwlock(q), q.clk, q.abs)
                   : CALL(pthread_rwlock_timedwrlock, AsRwlock(q), q.abs);
}

LOCKPROF_INLINE int RealBlock(const Req q) {
  if (q.op == kTimedOp) return RealTimed(q);
  if (q.kind == kMutex) return CALL(pthread_mutex_lock, AsMutex(q));
  if (q.mode == kRead) return CALL(pthread_rwlock_rdlock, AsRwlock(q));
  return CALL(pthread_rwlock_wrlock, AsRwlock(q));
}

LOCKPROF_INLINE int RealUnlock(void* o, int kind) {
  return kind == kMutex ? CALL(pthread_mutex_unlock, static_cast<pthread_mutex_t*>(o))
                        : CALL(pthread_rwlock_unlock, static_cast<pthread_rwlock_t*>(o));
}

bool BadDeadline(const Req q) {
  return !TimeValid(q.abs) || (q.clk != CLOCK_REALTIME && q.clk != CLOCK_MONOTONIC);
}

}  // namespace
}  // namespace lockprof

#endif  // KV_PROFILE_LOCKPROF_REAL_H_
