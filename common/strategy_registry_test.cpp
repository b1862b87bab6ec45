// The registry: names are unique and stable, every entry builds a working
// store that reports the registered name, and the stripe index maps slots the
// way store_striped.h says.
#include "common/strategy_registry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "common/store_striped.h"

namespace kv {
namespace {

TEST(StrategyRegistryTest, LabStrategiesFirstUnderTheirNames) {
  const auto all = AllStrategies();
  ASSERT_GE(all.size(), 4u);
  EXPECT_EQ(all[0].name, "one-mutex");
  EXPECT_EQ(all[1].name, "mutex-per-slot");
  EXPECT_EQ(all[2].name, "one-rwlock");
  EXPECT_EQ(all[3].name, "rwlock-per-slot");
}

TEST(StrategyRegistryTest, EveryEntryBuildsAWorkingStore) {
  std::set<std::string_view> names;
  ArtificialDelay delay{std::chrono::microseconds(0)};
  for (const StrategyInfo& s : AllStrategies()) {
    SCOPED_TRACE(std::string(s.name));
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate name";
    EXPECT_FALSE(s.description.empty());
    EXPECT_EQ(FindStrategy(s.name), &s);
    StrategyConfig config;
    config.stripes = 3;
    auto store = s.create(10, &delay, config);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->name(), s.name);
    EXPECT_EQ(store->size(), 10u);
    Value v;
    AccessTiming t;
    ASSERT_TRUE(store->Write(7, "seven", &v, &t).ok());
    EXPECT_EQ(std::string(FrameText({v.data(), v.size()})), "seven");
    ASSERT_TRUE(store->Read(7, &v, &t).ok());
    EXPECT_EQ(std::string(FrameText({v.data(), v.size()})), "seven");
    EXPECT_FALSE(store->Read(10, &v, &t).ok());
  }
  EXPECT_EQ(FindStrategy("unlocked"), nullptr);  // test-only, not served
  EXPECT_EQ(FindStrategy("no-such"), nullptr);
  EXPECT_NE(StrategyNames().find("pointer-swap"), std::string::npos);
  EXPECT_NE(DescribeStrategies().find("seqlock-per-slot"), std::string::npos);
}

// The microbenchmarks' store of every strategy: served values are the same,
// and exactly 1 access in 64 per thread is timed (the rest report -1), so no
// strategy's benchmark row pays the clock on every operation.
TEST(StrategyRegistryTest, EverySampledStoreTimesOneAccessIn64) {
  ArtificialDelay delay{std::chrono::microseconds(0)};
  for (const StrategyInfo& s : AllStrategies()) {
    SCOPED_TRACE(std::string(s.name));
    ASSERT_NE(s.create_sampled, nullptr);
    StrategyConfig config;
    config.stripes = 3;
    auto store = s.create_sampled(10, &delay, config);
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->name(), s.name);
    int timed = 0;
    for (int i = 0; i < 64 * 8; ++i) {
      Value v;
      AccessTiming t{.wait_ns = 123, .hold_ns = 456};
      const std::string text = std::to_string(1000 + i);
      if (i % 2 == 0) {
        ASSERT_TRUE(store->Write(i % 10, text, &v, &t).ok());
        EXPECT_EQ(std::string(FrameText({v.data(), v.size()})), text);
      } else {
        ASSERT_TRUE(store->Read((i - 1) % 10, &v, &t).ok());
        EXPECT_EQ(std::string(FrameText({v.data(), v.size()})), std::to_string(1000 + i - 1));
      }
      if (t.wait_ns >= 0) {
        ++timed;
        EXPECT_GE(t.hold_ns, 0);
      } else {
        EXPECT_EQ(t.wait_ns, -1);
        EXPECT_EQ(t.hold_ns, -1);
      }
    }
    EXPECT_EQ(timed, 8);
  }
}

TEST(StripeIndexTest, ModuloOrMaskAndClamping) {
  EXPECT_EQ(StripeIndex(1000, 0).stripes(), kDefaultStripes);
  EXPECT_EQ(StripeIndex(5, 0).stripes(), 5u);  // clamped to n
  EXPECT_EQ(StripeIndex(1, 8).stripes(), 1u);
  const StripeIndex pow2(1000, 8);
  const StripeIndex odd(1000, 3);
  const StripeIndex one(1000, 1);
  for (std::size_t i = 0; i < 100; ++i) {
    EXPECT_EQ(pow2.StripeOf(i), i % 8);
    EXPECT_EQ(odd.StripeOf(i), i % 3);
    EXPECT_EQ(one.StripeOf(i), 0u);
    EXPECT_EQ(pow2.OffsetOf(i), i / 8);
    EXPECT_EQ(odd.OffsetOf(i), i / 3);
    EXPECT_EQ(one.OffsetOf(i), i);
  }
}

// --stripes reaches the lock table through the registry, and only striped
// strategies say they read it.
TEST(StrategyRegistryTest, StripesReachTheStripedTables) {
  ArtificialDelay delay{std::chrono::microseconds(0)};
  StrategyConfig config;
  config.stripes = 3;
  for (const char* name : {"striped-mutex", "striped-rwlock"}) {
    SCOPED_TRACE(name);
    const StrategyInfo* info = FindStrategy(name);
    ASSERT_NE(info, nullptr);
    EXPECT_TRUE(info->uses_stripes);
  }
  auto store = FindStrategy("striped-mutex")->create(10, &delay, config);
  auto* striped = dynamic_cast<StripedMutexStore*>(store.get());
  ASSERT_NE(striped, nullptr);
  EXPECT_EQ(striped->table().stripes(), 3u);
  EXPECT_EQ(StripedRwLockStore(10, &delay).table().stripes(), 10u);  // clamped
  EXPECT_FALSE(FindStrategy("mutex-per-slot")->uses_stripes);
  EXPECT_FALSE(FindStrategy("one-mutex")->uses_stripes);
}

}  // namespace
}  // namespace kv
