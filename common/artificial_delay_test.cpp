// ArtificialDelay: both modes sleep at least the nominal delay, record what
// they slept (in total and per thread), and precise mode sets the thread's
// timer slack. Bounds only, never "how fast": the machine is shared.
#include "common/artificial_delay.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <chrono>
#include <thread>
#include <vector>

#include "common/clock.h"

namespace kv {
namespace {

using std::chrono::microseconds;

class ArtificialDelayModeTest : public testing::TestWithParam<DelayMode> {};

TEST_P(ArtificialDelayModeTest, EveryPauseLastsAtLeastTheNominalDelay) {
  ArtificialDelay delay(microseconds(50), GetParam());
  ArtificialDelay::TakeThreadSleptNanos();
  int64_t total = 0;
  for (int i = 0; i < 40; ++i) {
    const int64_t start = MonotonicNanos();
    delay.Pause();
    const int64_t elapsed = MonotonicNanos() - start;
    const int64_t recorded = ArtificialDelay::TakeThreadSleptNanos();
    EXPECT_GE(elapsed, 50'000) << "pause " << i;
    EXPECT_GE(recorded, 50'000) << "pause " << i;
    EXPECT_LE(recorded, elapsed) << "pause " << i;
    total += recorded;
  }
  EXPECT_EQ(delay.pauses(), 40u);
  EXPECT_GE(delay.MeanSleptNanos(), 50'000.0);
  EXPECT_NEAR(delay.MeanSleptNanos(), static_cast<double>(total) / 40, 1.0);
}

TEST_P(ArtificialDelayModeTest, ZeroDelayTakesNoPause) {
  ArtificialDelay delay(microseconds(0), GetParam());
  ArtificialDelay::TakeThreadSleptNanos();
  delay.Pause();
  EXPECT_EQ(delay.pauses(), 0u);
  EXPECT_EQ(delay.MeanSleptNanos(), 0.0);
  EXPECT_EQ(ArtificialDelay::TakeThreadSleptNanos(), 0);
}

TEST_P(ArtificialDelayModeTest, ThreadSumBelongsToTheThreadThatPaused) {
  ArtificialDelay delay(microseconds(100), GetParam());
  ArtificialDelay::TakeThreadSleptNanos();
  int64_t other = -1;
  std::thread t([&] {
    delay.Pause();
    delay.Pause();
    other = ArtificialDelay::TakeThreadSleptNanos();
  });
  t.join();
  EXPECT_GE(other, 200'000);
  EXPECT_EQ(ArtificialDelay::TakeThreadSleptNanos(), 0);  // this thread slept none
  EXPECT_EQ(delay.pauses(), 2u);
  // Taking resets: a second take in the same thread is 0.
  delay.Pause();
  EXPECT_GE(ArtificialDelay::TakeThreadSleptNanos(), 100'000);
  EXPECT_EQ(ArtificialDelay::TakeThreadSleptNanos(), 0);
}

INSTANTIATE_TEST_SUITE_P(BothModes, ArtificialDelayModeTest,
                         testing::Values(DelayMode::kUsleep, DelayMode::kPrecise),
                         [](const testing::TestParamInfo<DelayMode>& p) {
                           return std::string(DelayModeName(p.param));
                         });

TEST(ArtificialDelayTest, PreciseModeSetsOneNanosecondSlackOnThePausingThread) {
  long usleep_slack = -1, precise_slack = -1;
  // 10 ms, not the lab's 10 us: a precise pause sets the slack only when it sleeps before
  // its spin, and under TSan on a loaded machine the thread can reach that point more than
  // 10 us - 4 us after the pause began.
  ArtificialDelay plain(microseconds(10'000), DelayMode::kUsleep);
  ArtificialDelay precise(microseconds(10'000), DelayMode::kPrecise);
  std::thread a([&] {
    plain.Pause();
    usleep_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  });
  a.join();
  std::thread b([&] {
    precise.Pause();
    precise_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  });
  b.join();
  EXPECT_EQ(precise_slack, 1);
  EXPECT_EQ(usleep_slack, prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));  // untouched
}

// The totals are per-thread shards merged when read: pauses of threads that
// have ended still count, and two delays used by one thread keep apart.
TEST(ArtificialDelayTest, TotalsMergeEveryThreadsPauses) {
  ArtificialDelay a(microseconds(1));
  ArtificialDelay b(microseconds(1));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        a.Pause();
        b.Pause();
        b.Pause();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  a.Pause();  // this thread too
  EXPECT_EQ(a.pauses(), 41u);
  EXPECT_EQ(b.pauses(), 80u);
  EXPECT_GE(a.MeanSleptNanos(), 1'000.0);
}

// Voluntary context switches of the calling thread (a sleep is one).
long VoluntarySwitches() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_nvcsw;
}

// A precise pause sleeps until spin_ns before its deadline: with spin_ns at
// or above the delay it never sleeps (spins all the way); with 0 it sleeps
// (a 200 us sleep blocks: a voluntary switch; a 10 us one may return before
// the thread is switched out, so the sleeping case uses the longer delay).
TEST(ArtificialDelayTest, PreciseSpinDecidesWhetherAPauseSleeps) {
  ArtificialDelay spins(microseconds(10), DelayMode::kPrecise, 20'000);
  ArtificialDelay sleeps(microseconds(200), DelayMode::kPrecise, 0);
  EXPECT_FALSE(spins.sleeps());
  EXPECT_TRUE(sleeps.sleeps());
  EXPECT_TRUE(ArtificialDelay(microseconds(30), DelayMode::kPrecise, 20'000).sleeps());
  EXPECT_TRUE(ArtificialDelay(microseconds(10)).sleeps());  // usleep always does
  EXPECT_FALSE(ArtificialDelay(microseconds(0), DelayMode::kUsleep).sleeps());
  long spin_switches = -1, sleep_switches = -1;
  std::thread t([&] {
    long before = VoluntarySwitches();
    for (int i = 0; i < 50; ++i) spins.Pause();
    spin_switches = VoluntarySwitches() - before;
    before = VoluntarySwitches();
    for (int i = 0; i < 20; ++i) sleeps.Pause();
    sleep_switches = VoluntarySwitches() - before;
  });
  t.join();
  EXPECT_EQ(spin_switches, 0);
  EXPECT_GE(sleep_switches, 15);
  EXPECT_GE(spins.MeanSleptNanos(), 10'000.0);  // never early, either way
  EXPECT_GE(sleeps.MeanSleptNanos(), 200'000.0);
}

TEST(ArtificialDelayTest, WakeUpLatencyIsMeasuredOnAThreadOfItsOwn) {
  const long slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  const int64_t late = ArtificialDelay::MeasureWakeUpLatencyNs();
  EXPECT_GE(late, 2'000);
  EXPECT_LE(late, 200'000);
  EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), slack);  // the caller's is untouched
}

TEST(ArtificialDelayTest, ModeNames) {
  EXPECT_EQ(DelayModeName(DelayMode::kUsleep), "usleep");
  EXPECT_EQ(DelayModeName(DelayMode::kPrecise), "precise");
  ArtificialDelay d(microseconds(3), DelayMode::kPrecise);
  EXPECT_EQ(d.mode(), DelayMode::kPrecise);
  EXPECT_EQ(d.nominal(), microseconds(3));
}

}  // namespace
}  // namespace kv
