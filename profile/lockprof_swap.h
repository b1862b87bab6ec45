// The swap locks: the lock types of common/ (the same code the servers and
// the microbenchmarks run), served to the preload's pthread wrappers, in the
// order and under the names of common/swap_locks.h.
//
// Where a lock's state lives: in the pthread object itself, in bytes that
// glibc's normal mutex and its rwlock use only inside their own lock calls
// (which a swapped object never reaches) and that pthread_*_init and the
// static initializers zero, which every lock type of common/ takes as
// unlocked. A lock that does not fit there (BRAVO, 32 bytes) keeps it in the
// object's record. In the object, a swap needs no lookup, and an object
// initialised again starts unlocked.
//
// What lives from a lock call to its unlock call: a queue lock's node (MCS),
// a CLH lock's node pointer, a BRAVO fast reader's slot. The guards of
// common/mutex.h keep such a Context on the acquirer's stack; here lock and
// unlock are two pthread calls, so each thread has a fixed pool of 64
// contexts in initial-exec TLS, the first taken while free, the others from a
// free mask (not by nesting depth, so locks released out of order free the
// right one), and found again at unlock by the lock's address. A context
// stays put from lock to unlock (an MCS predecessor writes into it), nothing
// is allocated, and a thread that exits holding none leaves nothing behind.
// CLH nodes migrate between threads, so they are not per thread: a static
// pool of 65536 (a Treiber stack of indices tagged against ABA, filled from
// never-used nodes on demand), a node out of it while its owner holds or
// waits, and one a thread keeps as its spare for its next acquisition until
// it exits.
//
// Thread safety: every operation is called by the thread that locks or
// unlocks; the pools are per thread (contexts) or lock-free (CLH nodes).
#ifndef LOCKBENCH_PROFILE_LOCKPROF_SWAP_H_
#define LOCKBENCH_PROFILE_LOCKPROF_SWAP_H_

#include <pthread.h>
#include <time.h>

#include <cstdint>

#include "common/swap_locks.h"
#include "profile/lockprof.h"

namespace lockprof {

// A lock's own entry points, with the pthread calls' signatures: where the preload's entry
// points jump when it swaps without profiling or tracing (chosen once, by the constructor).
// One instance per lock type, its calls inlined; an object it does not swap goes to libc.
// Null where the lock does not serve that kind (a rwlock-only lock's mutex entries).
struct SwapFast {
  int (*mutex_lock)(pthread_mutex_t*) noexcept;
  int (*mutex_trylock)(pthread_mutex_t*) noexcept;
  int (*mutex_unlock)(pthread_mutex_t*) noexcept;
  int (*rdlock)(pthread_rwlock_t*) noexcept;
  int (*wrlock)(pthread_rwlock_t*) noexcept;
  int (*tryrdlock)(pthread_rwlock_t*) noexcept;
  int (*trywrlock)(pthread_rwlock_t*) noexcept;
  int (*rwlock_unlock)(pthread_rwlock_t*) noexcept;
};

// The general path's calls (profiling, tracing, timed acquisitions, condition waits). r is
// the object's record; a lock kept in the object (in_place) ignores it and may get null.
struct SwapOps {
  const kv::SwapLockInfo* info;  // its name, and whether it is for rwlocks only
  bool in_place;                 // its state in the pthread object: no record needed
  // 0, EBUSY (held), or EAGAIN (this thread's contexts or the CLH pool ran out).
  int (*try_lock)(Rec* r, void* o, int mode);
  // 0 or EAGAIN.
  int (*lock)(Rec* r, void* o, int mode);
  // Until the absolute time abs on clk (valid, REALTIME or MONOTONIC): 0,
  // ETIMEDOUT or EAGAIN. Null: the caller tries until the deadline.
  int (*timed)(Rec* r, void* o, int mode, clockid_t clk, const timespec* abs);
  // 0, or EPERM (not locked, or not by this thread where the lock must know);
  // errno kept (the caller does not save it around an unlock).
  int (*unlock)(Rec* r, void* o);
  SwapFast fast;
  // Null, or what the constructor calls once when the lock is chosen.
  void (*start)();
};

// The lock called name, or null.
const SwapOps* SwapOpsNamed(const char* name);
// Its place in common/swap_locks.h (the record's impl is this + 1), and back.
uint32_t SwapIndex(const SwapOps* ops);
const SwapOps& SwapOpsAt(uint32_t index);
// pflock: what replaces rwlocks when only mutexes were named.
const SwapOps* PhaseFairOps();

}  // namespace lockprof

#endif  // LOCKBENCH_PROFILE_LOCKPROF_SWAP_H_
