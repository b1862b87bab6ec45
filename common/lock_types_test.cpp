// The lock types of the classic lock families by themselves, outside the
// store: mutual exclusion of a plain counter, one thread holding two locks
// of one type at once (the per-acquisition Context of MCS, CLH and BRAVO,
// and CLH's node hand-over), readers sharing a reader/writer lock, and a
// phase-fair writer getting in under a stream of readers. Run again under
// TSan, which reports any access to the counter the lock does not order.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <new>
#include <type_traits>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/bravo_rwlock.h"
#include "common/clh_lock.h"
#include "common/futex_mutex.h"
#include "common/mcs_lock.h"
#include "common/pflock.h"
#include "common/pthread_rwlock.h"
#include "common/ticket_lock.h"
#include "common/ttas_backoff_lock.h"
#include "common/thread_annotations.h"

namespace kv {
namespace {

using PthreadBravo = BravoRwLock<PthreadRwLock>;
using PhaseFairBravo = BravoRwLock<PhaseFairRwLock>;

// A lock without a Context costs its guard nothing.
static_assert(sizeof(ExclusiveGuard<Mutex>) == sizeof(void*));
static_assert(sizeof(SharedGuard<SharedMutex>) == sizeof(void*));
static_assert(HasLockContext<McsLock> && HasLockContext<ClhLock> && HasLockContext<PthreadBravo>);
static_assert(SharedLockable<PhaseFairRwLock> && SharedLockable<PthreadBravo> &&
              SharedLockable<PhaseFairBravo>);
static_assert(!SharedLockable<McsLock> && !SharedLockable<TicketLock>);

// A counter and the lock that guards it.
template <typename L>
struct Guarded {
  L lock;
  uint64_t count GUARDED_BY(lock) = 0;

  void Add() {
    WriteGuard<L> guard(&lock);
    ++count;
  }
  uint64_t Get() {
    ReadGuard<L> guard(&lock);
    return count;
  }
};

template <typename L>
class LockTypeTest : public testing::Test {};

using LockTypes = testing::Types<TicketLock, TtasBackoffLock, McsLock, ClhLock, PhaseFairRwLock,
                                 PthreadBravo, PhaseFairBravo, FutexMutex>;
TYPED_TEST_SUITE(LockTypeTest, LockTypes);

// Threads x increments of a plain counter: none lost.
TYPED_TEST(LockTypeTest, MutualExclusion) {
  constexpr int kThreads = 4;
  constexpr int kAdds = 20'000;
  Guarded<TypeParam> g;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) {
        g.Add();
        if (i % 64 == 0) (void)g.Get();  // readers too, for the rwlocks
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(g.Get(), uint64_t{kThreads} * kAdds);
}

// Each thread holds two locks of the type at once (always a before b, so no
// deadlock) and moves one unit from one counter to the other: the sum stays.
TYPED_TEST(LockTypeTest, TwoHeldAtOnce) {
  constexpr int kThreads = 3;
  constexpr int kMoves = 5'000;
  Guarded<TypeParam> a, b;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kMoves; ++i) {
        WriteGuard<TypeParam> ga(&a.lock);
        WriteGuard<TypeParam> gb(&b.lock);
        ++a.count;
        ++b.count;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(a.Get(), uint64_t{kThreads} * kMoves);
  EXPECT_EQ(b.Get(), uint64_t{kThreads} * kMoves);
}

template <typename L>
class RwLockTypeTest : public testing::Test {};

using RwLockTypes = testing::Types<PhaseFairRwLock, PthreadBravo, PhaseFairBravo>;
TYPED_TEST_SUITE(RwLockTypeTest, RwLockTypes);

// A second reader gets in while the first still holds the lock.
TYPED_TEST(RwLockTypeTest, ReadersShare) {
  TypeParam lock;
  std::atomic<bool> second_in{false};
  bool waited = false;
  std::thread second;
  {
    SharedGuard<TypeParam> first(&lock);
    second = std::thread([&] {
      SharedGuard<TypeParam> guard(&lock);
      second_in = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!second_in.load() && !waited) {
      waited = std::chrono::steady_clock::now() > deadline;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }  // releases the first reader: a lock that failed this test does not hang it
  second.join();
  EXPECT_FALSE(waited) << "the second reader waited for the first";
}

// Phase fairness: with readers overlapping back to back (on a
// reader-preferring lock a writer could wait for a gap that never comes),
// a writer gets in again and again.
TEST(PhaseFairRwLockTest, WriterGetsInUnderAStreamOfReaders) {
  Guarded<PhaseFairRwLock> g;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        (void)g.Get();
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  while (reads.load() < 1000) std::this_thread::yield();  // the stream is flowing
  std::atomic<bool> written{false};
  std::thread writer([&] {
    for (int i = 0; i < 200; ++i) g.Add();
    written = true;
  });
  // A starved writer never gets in while the readers go on: after 60 s (which only stops
  // that hang) they stop, letting it in, and the test fails. How fast is not asserted.
  const auto hang = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!written.load() && std::chrono::steady_clock::now() < hang) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool got_in = written.load();
  stop = true;
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_TRUE(got_in) << "the writer starved under a stream of readers";
  EXPECT_EQ(g.Get(), 200u);
}

// A CLH node source that never allocates, as the preload's (a free list of a
// fixed array), so the tests see the lock hand every node back.
struct FixedClhNodes {
  static constexpr int kNodes = 16;
  static inline ClhNode nodes[kNodes];
  static inline std::atomic<uint32_t> used{0};  // bit i: nodes[i] is out
  static inline std::atomic<uint32_t> ever{0};  // bit i: nodes[i] was taken once
  static ClhNode* Take() {
    uint32_t seen = used.load();
    for (;;) {
      const int i = __builtin_ctz(~seen);
      if (i >= kNodes) return nullptr;
      if (used.compare_exchange_weak(seen, seen | 1u << i)) {
        ever.fetch_or(1u << i);
        return &nodes[i];
      }
    }
  }
  static void Give(ClhNode* node) { used.fetch_and(~(1u << (node - nodes))); }
};
using FixedClhLock = BasicClhLock<FixedClhNodes>;

TEST(ClhLockTest, EveryNodeGoesBackToItsSource) {
  Guarded<FixedClhLock> g;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5'000; ++i) g.Add();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(g.Get(), 15'000u);
  EXPECT_EQ(FixedClhNodes::used.load(), 0u) << "a node is still out of the pool";
  // every node comes back at rest, flagged, so its reuse stores nothing before the swap
  for (int i = 0; i < FixedClhNodes::kNodes; ++i) {
    if ((FixedClhNodes::ever.load() >> i & 1) != 0) {
      EXPECT_TRUE(FixedClhNodes::nodes[i].locked.load()) << i;
    }
  }
}

// One reused context, as the preload's per-thread slot: after every unlock, contended or
// not, its link is null again, which is all Lock needs before its swap (a waiting thread
// sets its own flag after the swap).
TEST(McsLockTest, AContextIsBackAtRestAfterEveryUnlock) {
  McsLock lock;
  uint64_t count = 0;
  std::vector<std::thread> threads;
  std::atomic<int> dirty{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      McsLock::Context mine;  // reused, never constructed again
      for (int i = 0; i < 5'000; ++i) {
        lock.Lock(&mine);
        ++count;
        lock.Unlock(&mine);
        if (mine.next.load() != nullptr) dirty.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(count, 15'000u);
  EXPECT_EQ(dirty.load(), 0) << "a context left a link behind";
}

// The preload keeps each lock in zero-filled storage and never constructs
// it: all-zero bytes must be an unlocked lock. Checked by taking it (try and
// unlock, try again) in such storage.
template <typename L>
class ZeroBytesTest : public testing::Test {};

template <typename L>
struct Zeroed {
  Zeroed() { std::memset(bytes, 0, sizeof bytes); }
  L& lock() { return *std::launder(reinterpret_cast<L*>(bytes)); }
  alignas(L) unsigned char bytes[sizeof(L)];
};

using ZeroTypes = testing::Types<TicketLock, TtasBackoffLock, McsLock, FixedClhLock,
                                 PhaseFairRwLock, PhaseFairBravo, FutexMutex>;
TYPED_TEST_SUITE(ZeroBytesTest, ZeroTypes);

// Try locks inside test assertions, which the analysis cannot follow.
template <typename L>
void ZeroBytesAreUnlocked() NO_THREAD_SAFETY_ANALYSIS {
  static_assert(std::is_trivially_destructible_v<L>);
  Zeroed<L> storage;
  L& lock = storage.lock();
  if constexpr (HasLockContext<L>) {
    typename L::Context mine, other;
    ASSERT_TRUE(lock.TryLock(&mine));
    EXPECT_FALSE(lock.TryLock(&other));
    lock.Unlock(&mine);
    ASSERT_TRUE(lock.TryLock(&other));
    lock.Unlock(&other);
  } else {
    ASSERT_TRUE(lock.TryLock());
    EXPECT_FALSE(lock.TryLock());
    lock.Unlock();
    ASSERT_TRUE(lock.TryLock());
    lock.Unlock();
  }
}

TYPED_TEST(ZeroBytesTest, AllZeroIsUnlockedAndTryLockExcludes) {
  ZeroBytesAreUnlocked<TypeParam>();
}

void TicketIsLockedWhileHeld() {
  TicketLock lock;
  EXPECT_FALSE(lock.IsLocked());
  lock.Lock();
  EXPECT_TRUE(lock.IsLocked());
  lock.Unlock();
  EXPECT_FALSE(lock.IsLocked());
}

TEST(TicketLockTest, IsLockedWhileHeld) { TicketIsLockedWhileHeld(); }

// A timed lock against a holder gives up at the deadline, on either clock,
// and takes a free lock at once.
// Try locks inside test assertions, which the analysis cannot follow.
void FutexLockUntilTimesOut() NO_THREAD_SAFETY_ANALYSIS {
  FutexMutex lock;
  lock.Lock();
  EXPECT_TRUE(lock.IsLocked());
  for (const clockid_t clock : {CLOCK_MONOTONIC, CLOCK_REALTIME}) {
    timespec deadline;
    clock_gettime(clock, &deadline);
    deadline.tv_nsec += 20'000'000;
    if (deadline.tv_nsec >= 1'000'000'000) deadline.tv_sec += 1, deadline.tv_nsec -= 1'000'000'000;
    std::thread other([&] { EXPECT_FALSE(lock.LockUntil(clock, deadline)); });
    other.join();
  }
  lock.Unlock();
  EXPECT_FALSE(lock.IsLocked());
  timespec soon;
  clock_gettime(CLOCK_MONOTONIC, &soon);
  ASSERT_TRUE(lock.LockUntil(CLOCK_MONOTONIC, soon));
  lock.Unlock();
}

TEST(FutexMutexTest, LockUntilTimesOutAgainstAHolder) { FutexLockUntilTimesOut(); }

// Tries on both sides, and HasReaders, which the preload asks before a read
// unlock (pthread's EPERM for a lock nobody reads).
// Try locks inside test assertions, which the analysis cannot follow.
void PhaseFairTriesAndReaders() NO_THREAD_SAFETY_ANALYSIS {
  PhaseFairRwLock lock;
  EXPECT_FALSE(lock.HasReaders());
  ASSERT_TRUE(lock.TryLockShared());
  EXPECT_TRUE(lock.HasReaders());
  EXPECT_FALSE(lock.TryLock());
  ASSERT_TRUE(lock.TryLockShared());
  lock.UnlockShared();
  lock.UnlockShared();
  EXPECT_FALSE(lock.HasReaders());
  ASSERT_TRUE(lock.TryLock());
  EXPECT_FALSE(lock.TryLockShared());
  EXPECT_FALSE(lock.TryLock());
  lock.Unlock();
}

TEST(PhaseFairRwLockTest, TriesAndReaders) { PhaseFairTriesAndReaders(); }

// A read of BRAVO over either base takes the fast path once a slow reader
// has turned the bias on, and a writer still gets in (it revokes the bias).
template <typename L>
class BravoTest : public testing::Test {};
using BravoTypes = testing::Types<PthreadBravo, PhaseFairBravo>;
TYPED_TEST_SUITE(BravoTest, BravoTypes);

// Try locks inside test assertions, which the analysis cannot follow.
template <typename L>
void BravoFastReadsThenAWriter() NO_THREAD_SAFETY_ANALYSIS {
  L lock;
  typename L::Context first, second, writer;
  lock.LockShared(&first);  // slow: the bias starts off, and this turns it on
  EXPECT_EQ(first.slot, nullptr);
  lock.UnlockShared(&first);
  ASSERT_TRUE(lock.TryLockShared(&second));
  EXPECT_NE(second.slot, nullptr) << "no fast read with the bias on";
  EXPECT_FALSE(lock.TryLock(&writer));
  // The failed try left the bias on: a writer now waits for the fast reader.
  std::atomic<bool> written{false};
  std::thread blocked([&] {
    typename L::Context ctx;
    lock.Lock(&ctx);
    written = true;
    lock.Unlock(&ctx);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(written.load()) << "a writer got in beside a fast reader";
  lock.UnlockShared(&second);
  blocked.join();
  EXPECT_TRUE(written.load());
  ASSERT_TRUE(lock.TryLock(&writer));
  lock.Unlock(&writer);
}

TYPED_TEST(BravoTest, FastReadsThenAWriter) { BravoFastReadsThenAWriter<TypeParam>(); }

}  // namespace
}  // namespace kv
