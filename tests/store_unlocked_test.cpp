// Proof that the stress pattern of common/store_test.cpp CAN fail: the same
// writers and readers on the test-only unlocked store must produce a torn
// read (a value mixing two writes) within a bounded time.
//
// Skipped under ThreadSanitizer: the unlocked store's races are real data
// races, which TSan would (rightly) report and abort on.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "tests/store_unlocked.h"

#if defined(__SANITIZE_THREAD__)
#define KV_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KV_UNDER_TSAN 1
#endif
#endif

namespace kv {
namespace {

TEST(UnlockedStoreTest, StressPatternCatchesTornReads) {
#ifdef KV_UNDER_TSAN
  GTEST_SKIP() << "the unlocked store races by design; TSan would report it";
#endif
  constexpr std::size_t kSlots = 3;
  ArtificialDelay no_delay{std::chrono::microseconds(0)};
  UnlockedStore store(kSlots, &no_delay);
  const std::vector<std::string> pool = {std::string(99, 'A'), std::string(99, 'B'),
                                         std::string(99, 'C'), std::string(99, 'D')};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> torn{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 3; ++w) {
    threads.emplace_back([&, w] {
      Value v;
      AccessTiming t;
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        store.Write(i % kSlots, pool[(i + static_cast<uint64_t>(w)) % 4], &v, &t);
      }
    });
  }
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      Value v;
      AccessTiming t;
      for (uint64_t i = static_cast<uint64_t>(r); !stop.load(std::memory_order_relaxed); ++i) {
        store.Read(i % kSlots, &v, &t);
        const std::string got(FrameText({v.data(), v.size()}));
        bool whole = got == StringArray::InitialValue(i % kSlots);
        for (const auto& s : pool) whole = whole || got == s;
        if (!whole) torn.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  // Stop at the first torn read, or give up after 10 s.
  const int64_t deadline = MonotonicNanos() + 10'000'000'000;
  while (torn.load() == 0 && MonotonicNanos() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_GT(torn.load(), 0u) << "no torn read in 10 s: the stress pattern "
                                "cannot tell a broken store from a good one";
}

}  // namespace
}  // namespace kv
