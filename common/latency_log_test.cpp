#include "common/latency_log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"

namespace kv {
namespace {

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A Status check that shows the message when it fails.
testing::AssertionResult IsOk(const Status& s) {
  if (s.ok()) return testing::AssertionSuccess();
  return testing::AssertionFailure() << s.message();
}

class LatencyLogTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("lockbench_log_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(LatencyLogTest, OneLinePerBatchInKitFormat) {
  LatencyLogOptions o;
  o.time_file = (dir_ / "times").string();
  o.batch_size = 4;
  LatencyLog log(o);
  ASSERT_TRUE(IsOk(log.Open()));
  for (int i = 0; i < 9; ++i) {
    log.Record({1, true, 2000 + 1000 * (i % 4), 10, 20});  // 2,3,4,5 us
  }
  // 9 records, batch 4: two lines, each the mean 3.5 us in seconds.
  EXPECT_EQ(Slurp(o.time_file), "3.500000e-06\n3.500000e-06\n");
  log.FlushThread();  // the 9th is still in this thread's shard
  const LatencyTotals t = log.Totals();
  EXPECT_EQ(t.requests, 9u);
  EXPECT_EQ(t.batches_written, 2u);
  EXPECT_DOUBLE_EQ(t.mean_wait_s, 10e-9);
  EXPECT_DOUBLE_EQ(t.mean_hold_s, 20e-9);
}

// The line for the batch_size-th request goes out at once, without a flush:
// the shard that would complete the batch is handed off.
TEST_F(LatencyLogTest, LineAppearsWhenTheBatchCompletes) {
  LatencyLogOptions o;
  o.time_file = (dir_ / "times").string();
  LatencyLog log(o);  // batch 1000
  ASSERT_TRUE(IsOk(log.Open()));
  for (int i = 0; i < 999; ++i) log.Record({1, true, 1000, 0, 0});
  EXPECT_EQ(Slurp(o.time_file), "");
  log.Record({1, true, 1000, 0, 0});
  EXPECT_EQ(Slurp(o.time_file), "1.000000e-06\n");
}

// Per-thread shards: many threads, exactly one line per batch, every request
// counted once after the threads flush.
TEST_F(LatencyLogTest, ShardsFromManyThreadsMakeExactBatches) {
  LatencyLogOptions o;
  o.time_file = (dir_ / "times").string();
  o.batch_size = 100;
  LatencyLog log(o);
  ASSERT_TRUE(IsOk(log.Open()));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&log, t] {
      for (int i = 0; i < 1003; ++i) {
        log.Record({1, true, 1000 * (t + 1), 1, 2});
        if (i % 7 == 0) log.CountRejected();
      }
      log.FlushThread();
    });
  }
  for (auto& th : threads) th.join();
  const std::string text = Slurp(o.time_file);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 80);  // 8024 / 100
  const LatencyTotals t = log.Totals();
  EXPECT_EQ(t.requests, 8u * 1003u);
  EXPECT_EQ(t.rejected, 8u * 144u);
  EXPECT_EQ(t.batches_written, 80u);
  EXPECT_DOUBLE_EQ(t.mean_latency_s, 4.5e-6);
}

TEST_F(LatencyLogTest, RenamedFileStartsAgain) {
  LatencyLogOptions o;
  o.time_file = (dir_ / "server_output_time_aggregated").string();
  o.batch_size = 1;
  LatencyLog log(o);
  ASSERT_TRUE(IsOk(log.Open()));
  log.Record({0, true, 1000, 0, 0});
  std::filesystem::rename(o.time_file, dir_ / "time_s1_n10");  // as test.sh does
  log.Record({0, true, 2000, 0, 0});
  EXPECT_EQ(Slurp(dir_ / "time_s1_n10"), "1.000000e-06\n");
  EXPECT_EQ(Slurp(o.time_file), "2.000000e-06\n");
}

TEST_F(LatencyLogTest, TraceHasHeaderRowsAndLimit) {
  LatencyLogOptions o;
  o.time_file = (dir_ / "times").string();
  o.trace_file = (dir_ / "trace.csv").string();
  o.trace_limit = 2;
  LatencyLog log(o);
  ASSERT_TRUE(IsOk(log.Open()));
  log.Record({7, false, 300, 100, 200, 5, 150, 40});
  log.Record({8, true, 30, 10, 20});  // CPU wait not sampled, no receive time: empty fields
  log.Record({9, true, 3, 1, 2});
  log.Flush();  // hands the shard off, then flushes the trace
  EXPECT_EQ(Slurp(o.trace_file),
            "pos,is_read,latency_ns,wait_ns,hold_ns,queue_ns,delay_ns,cpu_wait_ns,recv_ns,"
            "unlock_ns,thread\n"
            "7,0,300,100,200,5,150,40,,,1\n8,1,30,10,20,0,0,,,,1\n");
}

// recv_ns counts from the log's creation; each recording thread has a number of its own,
// in the order the threads first recorded.
TEST_F(LatencyLogTest, TraceRowsSayWhenAndWhichThread) {
  LatencyLogOptions o;
  o.time_file = (dir_ / "times").string();
  o.trace_file = (dir_ / "trace.csv").string();
  LatencyLog log(o);
  ASSERT_TRUE(IsOk(log.Open()));
  RequestSample first{1, true, 10, 0, 5};
  first.received_ns = MonotonicNanos();
  first.released_ns = first.received_ns + 5;
  log.Record(first);
  std::thread other([&] {
    RequestSample later{2, false, 10, 0, 5};
    later.received_ns = MonotonicNanos();
    log.Record(later);
    log.FlushThread();
  });
  other.join();
  log.Flush();
  const std::string trace = Slurp(o.trace_file);
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(trace);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::istringstream cols(line);
    for (std::string cell; std::getline(cols, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), 2u) << trace;
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  EXPECT_EQ(rows[0][10], "1");  // pos 1, recorded first, by this thread
  EXPECT_EQ(rows[1][10], "2");  // pos 2, by the other
  EXPECT_GE(std::stoll(rows[0][8]), 0);
  EXPECT_EQ(std::stoll(rows[0][9]), std::stoll(rows[0][8]) + 5);  // its release
  EXPECT_EQ(rows[1][9], "");                                      // none given
  EXPECT_GE(std::stoll(rows[1][8]), std::stoll(rows[0][8]));
}

// The log alone decides when a quiet thread's shard goes out: kQuietNs after
// the first wait since the thread's last request; a request in between starts
// the quiet over. Times are arguments, so this takes no time.
TEST_F(LatencyLogTest, IdleThreadHandsTheShardOffOnceQuietForKQuietNs) {
  LatencyLogOptions o;
  o.time_file = (dir_ / "times").string();
  LatencyLog log(o);
  ASSERT_TRUE(IsOk(log.Open()));
  constexpr int64_t kQ = LatencyLog::kQuietNs;
  EXPECT_EQ(log.IdleThread(1000), LatencyLog::kNever);  // nothing held
  log.Record({1, true, 1000, 0, 0});
  EXPECT_EQ(log.IdleThread(1000), 1000 + kQ);
  EXPECT_EQ(log.IdleThread(1000 + kQ - 1), 1000 + kQ);  // not quiet long enough
  log.Record({2, true, 1000, 0, 0});                    // busy again: starts over
  EXPECT_EQ(log.IdleThread(1000 + kQ), 1000 + 2 * kQ);
  EXPECT_EQ(log.Totals().requests, 0u);
  EXPECT_EQ(log.IdleThread(1000 + 2 * kQ), LatencyLog::kNever);
  EXPECT_EQ(log.Totals().requests, 2u);
  log.CountRejected();  // a rejected frame is held, and goes out, the same way
  EXPECT_EQ(log.IdleThread(5 * kQ), 6 * kQ);
  EXPECT_EQ(log.IdleThread(6 * kQ), LatencyLog::kNever);
  EXPECT_EQ(log.Totals().rejected, 1u);
}

TEST_F(LatencyLogTest, TotalsSplitTheMetricAndAverageCpuWaitOverSamples) {
  LatencyLogOptions o;
  o.time_file = (dir_ / "times").string();
  LatencyLog log(o);
  ASSERT_TRUE(IsOk(log.Open()));
  log.Record({1, true, 1000, 100, 600, 200, 500, 300});
  log.Record({2, false, 3000, 300, 1800, 400, 1500, -1});  // not sampled
  log.Record({3, true, 2000, 200, 1200, 0, 1000, 100});
  log.FlushThread();  // Totals() counts handed-off shards only
  const LatencyTotals t = log.Totals();
  EXPECT_EQ(t.requests, 3u);
  EXPECT_DOUBLE_EQ(t.mean_latency_s, 2000e-9);
  EXPECT_DOUBLE_EQ(t.mean_queue_s, 200e-9);
  EXPECT_DOUBLE_EQ(t.mean_delay_s, 1000e-9);
  EXPECT_EQ(t.cpu_wait_samples, 2u);
  EXPECT_DOUBLE_EQ(t.mean_cpu_wait_s, 200e-9);  // (300 + 100) / 2 samples
}

TEST_F(LatencyLogTest, UnwritableTimeFileFailsAtOpen) {
  LatencyLogOptions o;
  o.time_file = (dir_ / "no" / "such" / "dir" / "times").string();
  LatencyLog log(o);
  const Status opened = log.Open();
  EXPECT_FALSE(opened.ok());
  EXPECT_NE(opened.message().find("--time-file"), std::string::npos) << opened.message();
  EXPECT_NE(opened.message().find("open: "), std::string::npos) << opened.message();
}

// CloseFile reports the failed final flush of data written (here to
// /dev/full, where every write fails with ENOSPC), and is OK when empty.
TEST(UniqueFile, CloseFileReportsTheFailedFlush) {
  UniqueFile empty;
  EXPECT_TRUE(CloseFile(&empty, "close").ok());
  UniqueFile full(std::fopen("/dev/full", "w"));
  ASSERT_NE(full, nullptr);
  ASSERT_GE(std::fputs("lost\n", full.get()), 0);  // buffered: nothing written yet
  const Status s = CloseFile(&full, "close /dev/full");
  EXPECT_EQ(full, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_EQ(s.message(), std::string("close /dev/full: ") + std::strerror(ENOSPC));
}

}  // namespace
}  // namespace kv
