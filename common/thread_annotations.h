// Clang thread-safety annotations (-Wthread-safety), after LevelDB's
// port/thread_annotations.h and the macro names of clang's documentation
// (clang.llvm.org/docs/ThreadSafetyAnalysis.html, "mutex.h").
//
// They turn the locking rules written in comments into rules the compiler
// checks: a member declared `Value value GUARDED_BY(lock);` may be read only
// while `lock` is held (shared or exclusive) and written only while it is
// held exclusively; a function declared `REQUIRES(mu_)` may be called only
// with mu_ held. Only types marked CAPABILITY (common/mutex.h) can be named;
// libstdc++'s std::mutex is not annotated, so locks that the analysis must
// see are kv::Mutex / kv::SharedMutex or another CAPABILITY class.
//
// Under GCC (and clang without -Wthread-safety) every macro expands to
// nothing. The `tsa` preset builds with clang++ -Wthread-safety -Werror.
//
// Thread safety: compile-time only; nothing here exists at run time.
#ifndef KV_COMMON_THREAD_ANNOTATIONS_H_
#define KV_COMMON_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define KV_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define KV_THREAD_ANNOTATION_(x)
#endif

// A class whose objects are locks ("mutex", "shared_mutex", "spinlock").
#ifndef CAPABILITY
#define CAPABILITY(x) KV_THREAD_ANNOTATION_(capability(x))
#endif

// An RAII class that holds a capability for its lifetime (a lock guard).
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY KV_THREAD_ANNOTATION_(scoped_lockable)
#endif

// The member it annotates is read only with x held (shared or exclusive)
// and written only with x held exclusively.
#ifndef GUARDED_BY
#define GUARDED_BY(x) KV_THREAD_ANNOTATION_(guarded_by(x))
#endif

// As GUARDED_BY, for what the (raw) pointer it annotates points to.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) KV_THREAD_ANNOTATION_(pt_guarded_by(x))
#endif

// Lock order: this lock is taken after / before the ones named.
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) KV_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#endif
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) KV_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#endif

// The caller must hold the capabilities exclusively / at least shared.
#ifndef REQUIRES
#define REQUIRES(...) KV_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) KV_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#endif

// The function acquires / releases the capabilities (with no argument on a
// CAPABILITY class's member: `this`).
#ifndef ACQUIRE
#define ACQUIRE(...) KV_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#endif
#ifndef ACQUIRE_SHARED
#define ACQUIRE_SHARED(...) KV_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) KV_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_SHARED
#define RELEASE_SHARED(...) KV_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#endif
// Releases whichever way it is held (a scoped guard's destructor).
#ifndef RELEASE_GENERIC
#define RELEASE_GENERIC(...) KV_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))
#endif

// The function acquires the capability when it returns `x` (true/false).
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) KV_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#endif
#ifndef TRY_ACQUIRE_SHARED
#define TRY_ACQUIRE_SHARED(...) KV_THREAD_ANNOTATION_(try_acquire_shared_capability(__VA_ARGS__))
#endif

// The caller must NOT hold the capabilities (the function takes them).
#ifndef EXCLUDES
#define EXCLUDES(...) KV_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#endif

// Tells the analysis the capability is held (checked at run time, if at all,
// by the function itself).
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) KV_THREAD_ANNOTATION_(assert_capability(x))
#endif
#ifndef ASSERT_SHARED_CAPABILITY
#define ASSERT_SHARED_CAPABILITY(x) KV_THREAD_ANNOTATION_(assert_shared_capability(x))
#endif

// The function returns (a reference to) the capability x.
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) KV_THREAD_ANNOTATION_(lock_returned(x))
#endif

// Turns the analysis off for one function. Use only where the rule cannot
// be expressed (and say why next to it).
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS KV_THREAD_ANNOTATION_(no_thread_safety_analysis)
#endif

// LevelDB's names for the same (port/thread_annotations.h):
// EXCLUSIVE_LOCKS_REQUIRED is REQUIRES, and so on.
#ifndef EXCLUSIVE_LOCKS_REQUIRED
#define EXCLUSIVE_LOCKS_REQUIRED(...) REQUIRES(__VA_ARGS__)
#endif
#ifndef SHARED_LOCKS_REQUIRED
#define SHARED_LOCKS_REQUIRED(...) REQUIRES_SHARED(__VA_ARGS__)
#endif
#ifndef LOCKS_EXCLUDED
#define LOCKS_EXCLUDED(...) EXCLUDES(__VA_ARGS__)
#endif

#endif  // KV_COMMON_THREAD_ANNOTATIONS_H_
