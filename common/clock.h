// Monotonic time for every measurement in lockbench.
//
// The kit times with gettimeofday(), which jumps when the wall clock is
// adjusted; we use CLOCK_MONOTONIC instead (same resolution, never backwards).
// Thread safety: reentrant.
#ifndef KV_COMMON_CLOCK_H_
#define KV_COMMON_CLOCK_H_

#include <cstdint>
#include <ctime>

namespace kv {

// Nanoseconds since an arbitrary fixed point; only differences mean anything.
inline int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// CPU time the calling thread has used, in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
inline int64_t ThreadCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace kv

#endif  // KV_COMMON_CLOCK_H_
