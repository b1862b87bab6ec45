// main3's strategy: ONE read/write lock for the whole array.
//
// Thread safety: one SharedMutex (array_rw_) guards every slot; reads take it
// shared, writes exclusive. Any number of reads proceed together; a write
// excludes all.
// Preference: libstdc++'s std::shared_mutex is a default pthread_rwlock_t,
// which glibc makes READER-preferring: a steady stream of readers can starve a
// writer. Writer preference needs PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP
// (store_writer_pref_rwlock.h).
#ifndef KV_COMMON_STORE_ONE_RWLOCK_H_
#define KV_COMMON_STORE_ONE_RWLOCK_H_

#include "common/mutex.h"
#include "common/store_lock_table.h"

namespace kv {

using OneRwLockStore = LockedStore<WholeArray<SharedMutex>, "one-rwlock">;

}  // namespace kv

#endif  // KV_COMMON_STORE_ONE_RWLOCK_H_
