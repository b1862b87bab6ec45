// The pthread rwlock (glibc's default kind: reader-preferring, as
// std::shared_mutex) as a lock type for BravoRwLock and the guards of
// common/mutex.h, with the try operations BRAVO's base needs.
//
// An error from pthread (EDEADLK, EAGAIN: too many readers) ends the program
// with one line: the guards have no way to report it.
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

class CAPABILITY("shared_mutex") PthreadRwLock {
 public:
  PthreadRwLock() = default;
  ~PthreadRwLock() { pthread_rwlock_destroy(&rw_); }
  PthreadRwLock(const PthreadRwLock&) = delete;
  PthreadRwLock& operator=(const PthreadRwLock&) = delete;

  void Lock() ACQUIRE() { Check(pthread_rwlock_wrlock(&rw_), "pthread_rwlock_wrlock"); }
  bool TryLock() TRY_ACQUIRE(true) { return pthread_rwlock_trywrlock(&rw_) == 0; }
  void Unlock() RELEASE() { pthread_rwlock_unlock(&rw_); }
  void LockShared() ACQUIRE_SHARED() { Check(pthread_rwlock_rdlock(&rw_), "pthread_rwlock_rdlock"); }
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

}  // namespace kv

#endif  // KV_COMMON_PTHREAD_RWLOCK_H_
