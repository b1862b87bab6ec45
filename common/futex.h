// The futex system call, as the futex mutex and the preload's condition
// variables use it: sleep while a 32-bit word holds a value, wake sleepers.
//
// Raw system calls: no libc cancellation point where pthread_mutex_lock has
// none. Private futexes only (the word is not shared between processes).
//
// Thread safety: reentrant; the word is shared by design.
#ifndef KV_COMMON_FUTEX_H_
#define KV_COMMON_FUTEX_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>

namespace kv {

// Sleeps while *word == expected (a change before the call returns at once),
// until the absolute time *deadline on `clock` (CLOCK_REALTIME or
// CLOCK_MONOTONIC) when deadline is not null. False only when the deadline
// passed; true when woken, interrupted, or the word had changed (the caller
// looks again).
inline bool FutexWait(uint32_t* word, uint32_t expected, clockid_t clock = CLOCK_MONOTONIC,
                      const timespec* deadline = nullptr) {
  int op = FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG;
  if (deadline != nullptr && clock == CLOCK_REALTIME) op |= FUTEX_CLOCK_REALTIME;
  const long rc = syscall(SYS_futex, word, op, expected, deadline, nullptr, FUTEX_BITSET_MATCH_ANY);
  return !(rc == -1 && errno == ETIMEDOUT);
}

// Wakes up to n sleepers on word (INT_MAX: all).
inline void FutexWake(uint32_t* word, int n) {
  syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n, nullptr, nullptr, 0);
}

}  // namespace kv

#endif  // KV_COMMON_FUTEX_H_
