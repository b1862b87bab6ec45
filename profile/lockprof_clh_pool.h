// The preload's CLH node source, per process: a static pool of nodes (a free list by
// compare-and-swap, then nodes never used, in order) and each thread's spare, the node it let
// go of last, given back when the thread exits. Part of lockprof_swap.cpp, which alone
// includes it (ClhPoolNodes inlines into its CLH lock).
#ifndef KV_PROFILE_LOCKPROF_CLH_POOL_H_
#define KV_PROFILE_LOCKPROF_CLH_POOL_H_

#include <pthread.h>

#include <cstdint>

#include "common/clh_lock.h"
#include "profile/lockprof.h"

namespace lockprof {
namespace {

constexpr uint32_t kClhPool = 65536;
kv::ClhNode g_clh_pool[kClhPool];
uint64_t g_clh_free;   // generation << 32 | (index + 1) of the first free node; 0: none
uint32_t g_clh_fresh;  // g_clh_pool[g_clh_fresh..] never used yet

// Out of line: a thread's spare serves its uncontended acquisitions, and the lock path around
// it then needs fewer registers saved.
struct ClhPool {
  // A free node, or null when kClhPool nodes are out at once.
  __attribute__((noinline)) static kv::ClhNode* Take() {
    uint64_t h = __atomic_load_n(&g_clh_free, __ATOMIC_ACQUIRE);
    while (static_cast<uint32_t>(h) != 0) {
      kv::ClhNode* const n = &g_clh_pool[static_cast<uint32_t>(h) - 1];
      const uint64_t next =
          ((h >> 32) + 1) << 32 | __atomic_load_n(&n->pool_link, __ATOMIC_RELAXED);
      if (__atomic_compare_exchange_n(&g_clh_free, &h, next, true, __ATOMIC_ACQUIRE,
                                      __ATOMIC_ACQUIRE)) {
        return n;
      }
    }
    uint32_t i = __atomic_load_n(&g_clh_fresh, __ATOMIC_RELAXED);
    while (i < kClhPool) {
      if (__atomic_compare_exchange_n(&g_clh_fresh, &i, i + 1, true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
        return &g_clh_pool[i];
      }
    }
    return nullptr;
  }
  __attribute__((noinline)) static void Give(kv::ClhNode* n) {
    const uint64_t mine = static_cast<uint64_t>(n - g_clh_pool) + 1;
    uint64_t h = __atomic_load_n(&g_clh_free, __ATOMIC_RELAXED);
    uint64_t next = 0;
    do {
      __atomic_store_n(&n->pool_link, static_cast<uint32_t>(h), __ATOMIC_RELAXED);
      next = ((h >> 32) + 1) << 32 | mine;
    } while (!__atomic_compare_exchange_n(&g_clh_free, &h, next, true, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
  }
};

// The node this thread let go of last, kept for its next acquisition: an uncontended pair
// then takes nothing from the pool and gives nothing back (two compare-and-swaps on a line
// every thread shares). A thread that exits gives its spare back, in the destructor of a
// pthread key, so exited threads keep none; only where that key's value needs no
// allocation (glibc keeps a thread's values of the first 32 keys in the thread itself, the
// others in blocks it allocates on first use), else no node is kept.
LOCKPROF_TLS kv::ClhNode* t_clh_spare;
LOCKPROF_TLS bool t_clh_keyed;  // this thread's key value is set: its exit gives the spare back
pthread_key_t g_clh_key;
int g_clh_keep;  // set once, by ClhStart: spares may be kept
constexpr pthread_key_t kKeysInThread = 32;

void ClhThreadExit(void* /*value*/) {
  t_clh_keyed = false;  // a later destructor's lock may keep one again, and set the key again
  kv::ClhNode* const n = t_clh_spare;
  t_clh_spare = nullptr;
  if (n != nullptr) ClhPool::Give(n);
}

void ClhStart() {
  if (pthread_key_create(&g_clh_key, ClhThreadExit) != 0) return;
  if (g_clh_key >= kKeysInThread) {
    pthread_key_delete(g_clh_key);
    return;
  }
  __atomic_store_n(&g_clh_keep, 1, __ATOMIC_RELEASE);
}

// This thread's spare first, then the pool; a node let go of becomes the spare if there is
// none (and the thread's exit will give it back), else goes to the pool.
struct ClhPoolNodes {
  static kv::ClhNode* Take() {
    kv::ClhNode* const n = t_clh_spare;
    if (__builtin_expect(n == nullptr, 0)) return ClhPool::Take();
    t_clh_spare = nullptr;
    return n;
  }
  static void Give(kv::ClhNode* n) {
    if (__builtin_expect(t_clh_spare == nullptr && Keyed(), 1)) {
      t_clh_spare = n;
    } else {
      ClhPool::Give(n);
    }
  }
  static bool Keyed() { return __builtin_expect(t_clh_keyed, 1) || KeyThread(); }
  // The thread's key value set, once: its exit will give its spare back.
  __attribute__((noinline)) static bool KeyThread() {
    if (__atomic_load_n(&g_clh_keep, __ATOMIC_ACQUIRE) == 0 ||
        pthread_setspecific(g_clh_key, &g_clh_key) != 0)
      return false;
    t_clh_keyed = true;
    return true;
  }
};

}  // namespace
}  // namespace lockprof

#endif  // KV_PROFILE_LOCKPROF_CLH_POOL_H_
