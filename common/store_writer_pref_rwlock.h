// Writer-preferring reader/writer locks: one for the array, or one per string.
//
// How it works: like main3 (one-rwlock) and main4 (rwlock-per-slot), but the
// lock is a pthread_rwlock_t initialised with
// PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP. libstdc++'s std::shared_mutex
// is a default pthread_rwlock_t, which glibc makes reader-preferring: while
// readers keep overlapping, a waiting writer never gets in (writer
// starvation, glibc nptl/pthread_rwlock_common.c). With writer preference a
// waiting writer blocks NEW readers, so it gets the lock as soon as the
// readers already inside leave. (NONRECURSIVE: a thread must not take a read
// lock it already holds, or it deadlocks behind the waiting writer; the store
// never nests locks.)
//
// When it wins: read-heavy loads where writes must not wait unboundedly
// (writer latency tail; see bench/ writer-starvation benchmark). It costs
// read throughput: each waiting writer drains the readers and serialises them
// behind it, so at 95-100% reads it is close to the reader-preferring lock and
// at 50-70% reads it behaves more like a mutex.
//
// Thread safety: one lock guards every slot (one-rwlock-wpref), or slot i's
// lock guards slot i (rwlock-per-slot-wpref), as in main3 / main4: values
// GUARDED_BY their lock, reads shared, writes exclusive.
#ifndef KV_COMMON_STORE_WRITER_PREF_RWLOCK_H_
#define KV_COMMON_STORE_WRITER_PREF_RWLOCK_H_

#include <pthread.h>

#include "common/pthread_rwlock.h"
#include "common/store_lock_table.h"
#include "common/thread_annotations.h"

namespace kv {

// A writer-preferring pthread rwlock with SharedMutex's interface (a lock
// type for the lock table and the guards of common/mutex.h).
using WriterPreferringRwLock = BasicPthreadRwLock<PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP>;

using OneWriterPrefRwLockStore =
    LockedStore<WholeArray<WriterPreferringRwLock>, "one-rwlock-wpref">;
using WriterPrefRwLockPerSlotStore =
    LockedStore<PerSlot<WriterPreferringRwLock>, "rwlock-per-slot-wpref">;

}  // namespace kv

#endif  // KV_COMMON_STORE_WRITER_PREF_RWLOCK_H_
