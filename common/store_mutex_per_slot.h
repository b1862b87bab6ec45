// main2's strategy: one mutex PER STRING.
//
// Thread safety: slot i's Mutex (slot_mu_[i]) guards slot i only; each
// record holds the mutex and the value it guards (GUARDED_BY), padded to
// whole cache lines. Accesses to different slots run in parallel; accesses to
// one slot (reads included) are serialised. Neighbouring slots never share a
// line (no false sharing), and one access touches one record. Memory: 192
// bytes per slot (40-byte mutex + 100-byte value, rounded up to 3 lines).
#ifndef KV_COMMON_STORE_MUTEX_PER_SLOT_H_
#define KV_COMMON_STORE_MUTEX_PER_SLOT_H_

#include "common/mutex.h"
#include "common/store_lock_table.h"

namespace kv {

using MutexPerSlotStore = LockedStore<PerSlot<Mutex>, "mutex-per-slot">;

}  // namespace kv

#endif  // KV_COMMON_STORE_MUTEX_PER_SLOT_H_
