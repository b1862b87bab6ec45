// The pthread rwlock as a lock type for the lock table, BravoRwLock and the
// guards of common/mutex.h, with the try operations BRAVO's base needs; of
// glibc's default kind (PthreadRwLock: reader-preferring, as
// std::shared_mutex) or another (WriterPreferringRwLock,
// store_writer_pref_rwlock.h).
//
// Only EDEADLK/EAGAIN can fail, both impossible without nesting or 2^31
// readers: they, and a failure to initialise (start-up only: the locks are
// built with their store), end the program with one line, as bugs.
//
// Thread safety: safe for any number of threads, as pthread_rwlock_t.
#ifndef KV_COMMON_PTHREAD_RWLOCK_H_
#define KV_COMMON_PTHREAD_RWLOCK_H_

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/thread_annotations.h"

namespace kv {

// kKind: a pthread_rwlockattr_setkind_np kind.
template <int kKind>
class CAPABILITY("shared_mutex") BasicPthreadRwLock {
 public:
  BasicPthreadRwLock() {
    if constexpr (kKind != PTHREAD_RWLOCK_DEFAULT_NP) {  // else the initializer's
      pthread_rwlockattr_t attr;
      Check(pthread_rwlockattr_init(&attr), "pthread_rwlockattr_init");
      Check(pthread_rwlockattr_setkind_np(&attr, kKind), "pthread_rwlockattr_setkind_np");
      Check(pthread_rwlock_init(&rw_, &attr), "pthread_rwlock_init");
      pthread_rwlockattr_destroy(&attr);
    }
  }
  ~BasicPthreadRwLock() { pthread_rwlock_destroy(&rw_); }
  BasicPthreadRwLock(const BasicPthreadRwLock&) = delete;
  BasicPthreadRwLock& operator=(const BasicPthreadRwLock&) = delete;

  void Lock() ACQUIRE() { Check(pthread_rwlock_wrlock(&rw_), "pthread_rwlock_wrlock"); }
  bool TryLock() TRY_ACQUIRE(true) { return pthread_rwlock_trywrlock(&rw_) == 0; }
  void Unlock() RELEASE() { pthread_rwlock_unlock(&rw_); }
  void LockShared() ACQUIRE_SHARED() {
    Check(pthread_rwlock_rdlock(&rw_), "pthread_rwlock_rdlock");
  }
  bool TryLockShared() TRY_ACQUIRE_SHARED(true) { return pthread_rwlock_tryrdlock(&rw_) == 0; }
  void UnlockShared() RELEASE_SHARED() { pthread_rwlock_unlock(&rw_); }

 private:
  static void Check(int rc, const char* what) {
    if (rc == 0) return;
    std::fprintf(stderr, "%s: %s\n", what, std::strerror(rc));
    std::abort();
  }

  pthread_rwlock_t rw_ = PTHREAD_RWLOCK_INITIALIZER;
};

using PthreadRwLock = BasicPthreadRwLock<PTHREAD_RWLOCK_DEFAULT_NP>;

}  // namespace kv

#endif  // KV_COMMON_PTHREAD_RWLOCK_H_
