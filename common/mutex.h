// Locks the thread-safety analysis can see, and their RAII guards.
//
// libstdc++'s std::mutex and std::shared_mutex carry no annotations, so clang
// cannot tell that std::lock_guard holds one. These thin wrappers (as
// LevelDB's port::Mutex and MutexLock, port/port_stdcxx.h and
// util/mutexlock.h) are marked CAPABILITY and cost nothing: every member is
// an inline call to the std:: lock.
//
//   Mutex mu_;
//   int count_ GUARDED_BY(mu_);
//   void Add() EXCLUDES(mu_) { MutexLock guard(&mu_); ++count_; }
//
// Any class with Lock()/Unlock() (and optionally LockShared()/UnlockShared())
// annotated ACQUIRE/RELEASE is a lock the guards and the lock-table template
// (store_lock_table.h) accept: see SpinLock, WriterPreferringRwLock.
//
// A lock that needs state from its lock call to its unlock call (a queue
// node, a slot it took) declares `struct Context`, and then takes a
// Context* in all four calls. The guard holds that Context, so it lives on
// the acquirer's stack exactly from lock to unlock, and a thread holding
// several such locks has one Context per lock: McsLock's queue node
// (mcs_lock.h), ClhLock's node, BravoRwLock's reader slot.
//
// None of them is copyable or movable (their std:: members are not), so a
// lock keeps its address while anyone may hold it.
//
// Thread safety: each lock is safe for concurrent use, as its std::
// counterpart; a guard belongs to the thread that made it. Lock()/Unlock()
// exist for the guards: code takes locks through guards only.
#ifndef KV_COMMON_MUTEX_H_
#define KV_COMMON_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "common/thread_annotations.h"

namespace kv {

// An exclusive lock: std::mutex (a futex; waiters sleep in the kernel).
class CAPABILITY("mutex") Mutex {
 public:
  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis mu is held where it cannot see why (no run-time check).
  void AssertHeld() ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// A condition variable used with a Mutex (LevelDB's port::CondVar, with the
// mutex passed to the wait so the analysis can check it is held). The wait
// takes the mutex held, releases it while blocked and holds it again on
// return.
class CondVar {
 public:
  // Waits until notified (or a spurious wake-up), or `timeout` passes.
  // Every waiter on one CondVar uses the same *mu.
  void WaitFor(Mutex* mu, std::chrono::nanoseconds timeout) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait_for(lock, timeout);
    lock.release();  // still held: the caller's guard unlocks it
  }
  // Waits until notified (or a spurious wake-up).
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A reader/writer lock: std::shared_mutex, which libstdc++ builds on a
// default pthread_rwlock_t, i.e. READER-preferring on glibc (a steady stream
// of readers can starve a writer; see store_writer_pref_rwlock.h).
class CAPABILITY("shared_mutex") SharedMutex {
 public:
  void Lock() ACQUIRE() { rw_.lock(); }
  void Unlock() RELEASE() { rw_.unlock(); }
  void LockShared() ACQUIRE_SHARED() { rw_.lock_shared(); }
  void UnlockShared() RELEASE_SHARED() { rw_.unlock_shared(); }

 private:
  std::shared_mutex rw_;
};

// The per-acquisition state of lock type L: L::Context if it declares one
// (then Lock/Unlock/LockShared/UnlockShared take a Context*), else nothing.
template <typename L>
concept HasLockContext = requires {
  typename L::Context;
};

namespace mutex_internal {
struct NoContext {};
template <typename L>
struct ContextOf {
  using type = NoContext;
};
template <HasLockContext L>
struct ContextOf<L> {
  using type = typename L::Context;
};
}  // namespace mutex_internal
template <typename L>
using LockContext = typename mutex_internal::ContextOf<L>::type;

// True for locks that can be held shared (reader/writer locks), with or
// without a Context.
template <typename L>
concept SharedLockableWithoutContext = requires(L& lock) {
  lock.LockShared();
  lock.UnlockShared();
};
template <typename L>
concept SharedLockableWithContext = requires(L& lock, LockContext<L>* context) {
  lock.LockShared(context);
  lock.UnlockShared(context);
};
template <typename L>
concept SharedLockable = SharedLockableWithoutContext<L> || SharedLockableWithContext<L>;

// Holds *lock from construction to destruction: shared if kShared, else
// exclusively. One class for both modes: each constructor carries its own
// thread-safety annotation (the requires-clause picks one), and the
// destructor releases whichever was taken (RELEASE_GENERIC).
template <typename L, bool kShared>
class SCOPED_CAPABILITY Guard {
 public:
  explicit Guard(L* lock) requires(!kShared) ACQUIRE(lock) : lock_(lock) { Call<true>(); }
  explicit Guard(L* lock) requires(kShared) ACQUIRE_SHARED(lock) : lock_(lock) { Call<true>(); }
  ~Guard() RELEASE_GENERIC() { Call<false>(); }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  // lock_->Lock or Unlock (LockShared or UnlockShared if kShared), given
  // &context_ when L has a Context (a queue lock's node: see the top of this
  // file). The annotations are on the constructors and the destructor.
  template <bool kAcquire>
  void Call() NO_THREAD_SAFETY_ANALYSIS {
    const auto call = [this](auto... context) NO_THREAD_SAFETY_ANALYSIS {
      if constexpr (kShared) {
        kAcquire ? lock_->LockShared(context...) : lock_->UnlockShared(context...);
      } else {
        kAcquire ? lock_->Lock(context...) : lock_->Unlock(context...);
      }
    };
    if constexpr (HasLockContext<L>) {
      call(&context_);
    } else {
      call();
    }
  }

  L* const lock_;
  [[no_unique_address]] LockContext<L> context_;
};

// Holds *lock exclusively from construction to destruction.
template <typename L>
using ExclusiveGuard = Guard<L, false>;

// Holds *lock shared from construction to destruction.
template <SharedLockable L>
using SharedGuard = Guard<L, true>;

// The guard a reader takes: shared where the lock has a shared mode,
// exclusive otherwise (a plain mutex serialises readers too).
namespace mutex_internal {
template <typename L>
struct ReadGuardOf {
  using type = ExclusiveGuard<L>;
};
template <SharedLockable L>
struct ReadGuardOf<L> {
  using type = SharedGuard<L>;
};
}  // namespace mutex_internal
template <typename L>
using ReadGuard = typename mutex_internal::ReadGuardOf<L>::type;

// The guard a writer takes.
template <typename L>
using WriteGuard = ExclusiveGuard<L>;

// LevelDB's name for the common case.
using MutexLock = ExclusiveGuard<Mutex>;

}  // namespace kv

#endif  // KV_COMMON_MUTEX_H_
