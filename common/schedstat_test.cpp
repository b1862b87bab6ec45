// schedstat: parsing, reading the real /proc file of the calling thread, and
// that run_delay really measures waiting for a CPU (two spinning threads
// sharing one CPU). Bounded by CPU time consumed, never by a speed.
#include "common/schedstat.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/clock.h"

namespace kv {
namespace {

// Spins until this thread has used `cpu_ns` of CPU (or 5 s of wall time).
void BurnCpu(int64_t cpu_ns) {
  const int64_t start = ThreadCpuNanos();
  const int64_t give_up = MonotonicNanos() + 5'000'000'000;
  volatile uint64_t sink = 0;
  while (ThreadCpuNanos() - start < cpu_ns && MonotonicNanos() < give_up) {
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<uint64_t>(i);
  }
}

TEST(ParseSchedStatTest, ThreeNumbers) {
  SchedStat s;
  ASSERT_TRUE(ParseSchedStat("567645 95143 1\n", &s));
  EXPECT_EQ(s.cpu_ns, 567645);
  EXPECT_EQ(s.run_delay_ns, 95143);
  EXPECT_EQ(s.timeslices, 1u);
  ASSERT_TRUE(ParseSchedStat("18446744073 0 42", &s));  // no newline
  EXPECT_EQ(s.cpu_ns, 18446744073);
  EXPECT_EQ(s.run_delay_ns, 0);
}

TEST(ParseSchedStatTest, RejectsAnythingElse) {
  SchedStat s{1, 2, 3};
  for (const char* bad :
       {"", "\n", "1 2", "1 2 x", "1 2 3 4", "-1 2 3", "a b c", "1,2,3", "1 2 3\nextra"}) {
    EXPECT_FALSE(ParseSchedStat(bad, &s)) << "'" << bad << "'";
  }
  EXPECT_EQ(s.cpu_ns, 1);  // untouched
}

TEST(SchedStatTest, RealProcFileOfThisThreadParses) {
  // The kernel adds a running thread's time to the file at a tick or a switch: a test
  // process that just started may have had neither (a tickless kernel, a fast machine).
  BurnCpu(2'000'000);
  std::this_thread::sleep_for(std::chrono::microseconds(100));
  std::ifstream in("/proc/thread-self/schedstat");
  ASSERT_TRUE(in) << "no /proc/thread-self/schedstat on this kernel";
  std::stringstream text;
  text << in.rdbuf();
  SchedStat s;
  ASSERT_TRUE(ParseSchedStat(text.str(), &s)) << text.str();
  EXPECT_GT(s.cpu_ns, 0);
  EXPECT_GE(s.run_delay_ns, 0);
}

TEST(SchedStatTest, KeptOpenAndFreshReadsFollowThisThreadsCpuTime) {
  SchedStat a, b, c;
  ASSERT_TRUE(ReadThreadSchedStat(&a));
  BurnCpu(20'000'000);
  const int64_t cpu_now = ThreadCpuNanos();
  ASSERT_TRUE(ReadThreadSchedStat(&b));  // the kept-open descriptor, re-read
  ASSERT_TRUE(ReadThreadSchedStatFresh(&c));
  // Same source as CLOCK_THREAD_CPUTIME_ID (the scheduler's runtime sum).
  EXPECT_GE(b.cpu_ns - a.cpu_ns, 19'000'000);
  EXPECT_GE(b.cpu_ns, cpu_now - 1'000'000);
  EXPECT_GE(c.cpu_ns, b.cpu_ns);
  EXPECT_GE(b.run_delay_ns, a.run_delay_ns);
}

TEST(SchedStatTest, EachThreadReadsItsOwnFile) {
  SchedStat mine;
  BurnCpu(30'000'000);  // this thread has now used at least 30 ms
  ASSERT_TRUE(ReadThreadSchedStat(&mine));
  SchedStat theirs{-1, -1, 0};
  bool ok = false;
  std::thread t([&] { ok = ReadThreadSchedStat(&theirs); });
  t.join();
  ASSERT_TRUE(ok);
  EXPECT_GE(mine.cpu_ns, 30'000'000);
  EXPECT_LT(theirs.cpu_ns, mine.cpu_ns);  // a new thread, not this one
}

TEST(SchedStatTest, RunDelayGrowsWhenTwoThreadsShareOneCpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  int64_t waited[2] = {-1, -1};
  auto spin = [&](int i) {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    SchedStat before, after;
    if (!ReadThreadSchedStat(&before)) return;
    BurnCpu(60'000'000);
    if (!ReadThreadSchedStat(&after)) return;
    waited[i] = after.run_delay_ns - before.run_delay_ns;
  };
  std::thread a(spin, 0), b(spin, 1);
  a.join();
  b.join();
  // Two runnable threads on one CPU take turns: each waits for the other.
  EXPECT_GT(waited[0] + waited[1], 0);
  EXPECT_GE(waited[0], 0);
  EXPECT_GE(waited[1], 0);
}

TEST(SchedStatTest, SamplesAboutOneRequestInEvery) {
  // Nanosecond and microsecond clock granularity alike.
  for (const int64_t step : {int64_t{1}, int64_t{1000}, int64_t{37}}) {
    uint64_t hits = 0;
    const int64_t n = 160'000;
    for (int64_t i = 0; i < n; ++i) hits += SampleCpuWait(1'000'000'000 + i * step);
    const double expected = static_cast<double>(n) / kCpuWaitSampleEvery;
    EXPECT_GT(static_cast<double>(hits), 0.8 * expected) << "step " << step;
    EXPECT_LT(static_cast<double>(hits), 1.2 * expected) << "step " << step;
  }
}

}  // namespace
}  // namespace kv
