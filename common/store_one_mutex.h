// main1's strategy: ONE mutex for the whole array.
//
// Thread safety: one Mutex (array_mu_: the lock of the table's single
// record) guards every slot; its values are GUARDED_BY it.
// Reads and writes are fully serialised, so with the lab's delay the array
// serves one access at a time (about 1.3 delays per request at 70% reads):
// simple, and the slowest.
#ifndef KV_COMMON_STORE_ONE_MUTEX_H_
#define KV_COMMON_STORE_ONE_MUTEX_H_

#include "common/mutex.h"
#include "common/store_lock_table.h"

namespace kv {

using OneMutexStore = LockedStore<WholeArray<Mutex>, "one-mutex">;

}  // namespace kv

#endif  // KV_COMMON_STORE_ONE_MUTEX_H_
