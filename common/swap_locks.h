// The one list of the locks the preload (profile/, liblockprof.so) can swap
// in for a program's pthread mutexes and rwlocks: `lockserver --list-locks`
// prints it, the preload takes its names from it (its implementations are in
// this order), and analysis/lockprof/preload.py reads it to know the names. Each is
// named as its lock family among lockserver's strategies (a strategy one-mcs
// or mcs-per-slot is an mcs lock; one-bravo-pflock is BRAVO over pflock, where
// the strategies' bravo is over the pthread rwlock). The description is the
// family's too (common/store_lock_families.h takes it from here and checks at
// compile time that the two lists name the same locks), so it is a noun phrase
// that reads after "one" and before "for the array".
//
// One entry a line, `{"name", rwlock_only, "what it is"},`: analysis/lockprof/preload.py
// reads this file as text, so that its --help needs no build.
//
// Thread safety: constants.
#ifndef KV_COMMON_SWAP_LOCKS_H_
#define KV_COMMON_SWAP_LOCKS_H_

#include <cstddef>

namespace kv {

struct SwapLockInfo {
  const char* name;
  bool rwlock_only;  // a reader/writer lock: never a mutex's
  const char* description;
};

// clang-format off
inline constexpr SwapLockInfo kSwapLocks[] = {
    {"ticketlock", false, "ticket lock (take a number, wait for it: a FIFO spinlock)"},
    {"mcs", false, "MCS queue lock (each waiter spins on its own node; FIFO)"},
    {"ttas-backoff", false, "test-and-test-and-set spinlock with exponential back-off (not fair)"},
    {"clh", false, "CLH queue lock (each waiter spins on its predecessor's node; FIFO)"},
    {"futex-mutex", false, "futex mutex of our own (Drepper's 0/1/2 mutex: waiters sleep in the kernel; not FIFO)"},
    {"pflock", true, "phase-fair ticket rwlock (PF-T: reads and writes alternate, neither starves)"},
    {"bravo-pflock", true, "BRAVO over the phase-fair rwlock (readers take a slot of a shared table while no writer came lately)"},
};
// clang-format on

inline constexpr std::size_t kSwapLockCount = sizeof(kSwapLocks) / sizeof(kSwapLocks[0]);

}  // namespace kv

#endif  // KV_COMMON_SWAP_LOCKS_H_
