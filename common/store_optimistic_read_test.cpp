// Targeted tests for the two strategies whose readers take no lock
// (seqlock-per-slot, pointer-swap): one writer races many readers on ONE slot
// for a bounded time. Every value the writer stores encodes a counter four
// times plus a letter derived from it, so a reader can tell a whole value
// from a mix of two (a torn read), and a counter that goes backwards (a stale
// read after a newer one). Run under TSan (races) and ASan/LSan (the
// pointer-swap store's reclamation: use-after-free, leaks).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/store.h"
#include "common/store_pointer_swap.h"
#include "common/store_seqlock_per_slot.h"

namespace kv {
namespace {

std::string Text(const Value& v) {
  return std::string(FrameText(std::string_view(v.data(), v.size())));
}

// 4 x 20 digits + 19 letters = 99 bytes, the longest value a slot holds.
std::string Encode(uint64_t c) {
  char digits[21];
  std::snprintf(digits, sizeof(digits), "%020" PRIu64, c);
  std::string s;
  for (int i = 0; i < 4; ++i) s += digits;
  s.append(19, static_cast<char>('a' + c % 26));
  return s;
}

// The counter of a whole encoded value, or -1 if it is torn or malformed.
int64_t Decode(const std::string& s) {
  if (s.size() != 99) return -1;
  uint64_t c = 0;
  if (std::sscanf(s.c_str(), "%20" SCNu64, &c) != 1) return -1;
  return s == Encode(c) ? static_cast<int64_t>(c) : -1;
}

template <typename StoreT>
class OptimisticReadTest : public testing::Test {};

using OptimisticStores = testing::Types<SeqLockPerSlotStore, PointerSwapStore>;
TYPED_TEST_SUITE(OptimisticReadTest, OptimisticStores);

TYPED_TEST(OptimisticReadTest, OneWriterManyReadersOneSlot) {
  ArtificialDelay no_delay{std::chrono::microseconds(0)};
  auto store = TypeParam::Create(1, &no_delay);
  Value v;
  AccessTiming t;
  ASSERT_TRUE(store->Write(0, Encode(0), &v, &t).ok());

  constexpr int kReaders = 6;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> torn{0}, backwards{0}, ahead{0}, reads{0};
  std::thread writer([&] {
    Value out;
    AccessTiming timing;
    for (uint64_t c = 1; !stop.load(std::memory_order_relaxed); ++c) {
      store->Write(0, Encode(c), &out, &timing);
      if (Decode(Text(out)) != static_cast<int64_t>(c)) torn.fetch_add(1);
      published.store(c, std::memory_order_release);
    }
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&] {
      Value out;
      AccessTiming timing;
      int64_t last = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        store->Read(0, &out, &timing);
        // Anything we read was written before its Write() returned, so at
        // most one ahead of what the writer had published when we looked.
        const uint64_t limit = published.load(std::memory_order_acquire) + 1;
        const int64_t c = Decode(Text(out));
        reads.fetch_add(1, std::memory_order_relaxed);
        if (c < 0) {
          torn.fetch_add(1);
        } else if (c < last) {
          backwards.fetch_add(1);
        } else if (static_cast<uint64_t>(c) > limit) {
          ahead.fetch_add(1);
        } else {
          last = c;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  writer.join();
  for (auto& r : readers) r.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_EQ(backwards.load(), 0u);
  EXPECT_EQ(ahead.load(), 0u);
  EXPECT_GT(reads.load(), 1000u);
  EXPECT_GT(published.load(), 100u);
}

// Writers replacing values in few slots while readers copy them under hazard
// pointers: under ASan this fails on a use-after-free, under LSan on any
// version that is never freed (LeakSanitizer runs when the binary exits).
TEST(PointerSwapStoreTest, LongRunFreesEveryOldVersion) {
  ArtificialDelay no_delay{std::chrono::microseconds(0)};
  PointerSwapStore store(4, &no_delay);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      Value out;
      AccessTiming t;
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        store.Write(i % 4, Encode(i * 2 + static_cast<uint64_t>(w)), &out, &t);
        writes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&] {
      Value out;
      AccessTiming t;
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        store.Read(i % 4, &out, &t);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_GT(writes.load(), 1000u);
  // Reclamation keeps up: only a bounded batch of old versions is pending
  // (about 2 x hazard records + 16; records = peak reader threads so far).
  EXPECT_LT(store.pending_reclamation(), 2000u);
}

TEST(SeqLockPerSlotStoreTest, ReadTimingSeparatesRetriesFromTheCopy) {
  ArtificialDelay delay{std::chrono::microseconds(50)};
  SeqLockPerSlotStore store(2, &delay);
  Value out;
  AccessTiming t;
  ASSERT_TRUE(store.Read(1, &out, &t).ok());
  EXPECT_EQ(Text(out), "String 1: the initial value");
  EXPECT_EQ(t.wait_ns, 0);  // nobody raced us
  EXPECT_GE(t.hold_ns, 50'000);
}

}  // namespace
}  // namespace kv
