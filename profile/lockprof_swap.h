// The swap locks: the lock types of common/ (the same code the servers and
// the microbenchmarks run), served to the preload's pthread wrappers, in the
// order and under the names of common/swap_locks.h.
//
// What lives from a lock call to its unlock call: a queue lock's node (MCS),
// a CLH lock's node pointer, a BRAVO fast reader's slot. The guards of
// common/mutex.h keep such a Context on the acquirer's stack; here lock and
// unlock are two pthread calls, so each thread has a fixed pool of 64
// contexts in initial-exec TLS, taken from a free mask (not by nesting
// depth, so locks released out of order free the right one) and found again
// at unlock by the lock's address. A context stays put from lock to unlock
// (an MCS predecessor writes into it), nothing is allocated, and a thread
// that exits holding none leaves nothing behind. CLH nodes migrate between
// threads, so they are not per thread: a static pool of 65536 (a Treiber
// stack of indices tagged against ABA, filled from never-used nodes on
// demand), a node out of it exactly while its owner holds or waits.
//
// Thread safety: every operation is called by the thread that locks or
// unlocks; the pools are per thread (contexts) or lock-free (CLH nodes).
#ifndef LOCKBENCH_PROFILE_LOCKPROF_SWAP_H_
#define LOCKBENCH_PROFILE_LOCKPROF_SWAP_H_

#include <time.h>

#include <cstdint>

#include "common/swap_locks.h"
#include "profile/lockprof.h"

namespace lockprof {

struct SwapOps {
  const kv::SwapLockInfo* info;  // its name, and whether it is for rwlocks only
  // 0, EBUSY (held), or EAGAIN (this thread's contexts or the CLH pool ran out).
  int (*try_lock)(Rec* r, const void* o, int mode);
  // 0 or EAGAIN.
  int (*lock)(Rec* r, const void* o, int mode);
  // Until the absolute time abs on clk (valid, REALTIME or MONOTONIC): 0,
  // ETIMEDOUT or EAGAIN. Null: the caller tries until the deadline.
  int (*timed)(Rec* r, const void* o, int mode, clockid_t clk, const timespec* abs);
  // 0, or EPERM (not locked, or not by this thread where the lock must know);
  // errno kept (the caller does not save it around an unlock).
  int (*unlock)(Rec* r, const void* o);
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
