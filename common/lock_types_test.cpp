// The lock types of the classic lock families by themselves, outside the
// store: mutual exclusion of a plain counter, one thread holding two locks
// of one type at once (the per-acquisition Context of MCS, CLH and BRAVO,
// and CLH's node hand-over), readers sharing a reader/writer lock, and a
// phase-fair writer getting in under a stream of readers. Run again under
// TSan, which reports any access to the counter the lock does not order.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/store_bravo.h"
#include "common/store_clh_lock.h"
#include "common/store_futex_mutex.h"
#include "common/store_mcs_lock.h"
#include "common/store_pflock.h"
#include "common/store_ticket_lock.h"
#include "common/store_ttas_backoff.h"
#include "common/thread_annotations.h"

namespace kv {
namespace {

// A lock without a Context costs its guard nothing.
static_assert(sizeof(ExclusiveGuard<Mutex>) == sizeof(void*));
static_assert(sizeof(SharedGuard<SharedMutex>) == sizeof(void*));
static_assert(HasLockContext<McsLock> && HasLockContext<ClhLock> && HasLockContext<BravoRwLock>);
static_assert(SharedLockable<PhaseFairRwLock> && SharedLockable<BravoRwLock>);
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
                                 BravoRwLock, FutexMutex>;
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

using RwLockTypes = testing::Types<PhaseFairRwLock, BravoRwLock>;
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
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) g.Add();
  const auto took = std::chrono::steady_clock::now() - start;
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(g.Get(), 200u);
  EXPECT_LT(took, std::chrono::seconds(10));
}

}  // namespace
}  // namespace kv
