// main4's strategy: one read/write lock PER STRING.
//
// Thread safety: slot i's SharedMutex (slot_rw_[i]) guards slot i; reads take
// it shared, writes exclusive. Different slots never contend; reads of one
// slot run together. Reader-preferring like store_one_rwlock.h (glibc default
// rwlock). Each record holds the lock and the value it guards, padded to
// whole cache lines. Memory: 192 bytes per slot (56-byte rwlock + 100-byte
// value, rounded up to 3 lines).
#ifndef KV_COMMON_STORE_RWLOCK_PER_SLOT_H_
#define KV_COMMON_STORE_RWLOCK_PER_SLOT_H_

#include "common/mutex.h"
#include "common/store_lock_table.h"

namespace kv {

using RwLockPerSlotStore = LockedStore<PerSlot<SharedMutex>, "rwlock-per-slot">;

}  // namespace kv

#endif  // KV_COMMON_STORE_RWLOCK_PER_SLOT_H_
