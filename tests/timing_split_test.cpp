// Integration: the real servers carry the split of the lab metric (queue, lock
// wait, lock hold, delay slept, CPU wait) in their summary and trace, in both
// delay modes; --no-timing records nothing; a bad --delay-mode exits 2.
// Bounds only (a delay is never shorter than nominal), never a speed.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/server_process.h"

namespace kv {
namespace {

using testing_support::BinaryPath;
using testing_support::FreePortPair;
using testing_support::RunCommand;
using testing_support::ServerProcess;
using testing_support::TestConnection;

// "mainN: summary k=v k=v ..." -> {k: v}
std::map<std::string, std::string> SummaryFields(const std::string& out) {
  std::map<std::string, std::string> f;
  const std::size_t at = out.find(": summary ");
  if (at == std::string::npos) return f;
  std::istringstream line(out.substr(at + 10, out.find('\n', at) - at - 10));
  std::string tok;
  while (line >> tok) {
    const std::size_t eq = tok.find('=');
    if (eq != std::string::npos) f[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  return f;
}

std::vector<std::string> Lines(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> v;
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> v;
  std::string cur;
  for (const char c : s) {
    if (c == ',') {
      v.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  v.push_back(cur);
  return v;
}

class TimingSplitTest : public testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("lockbench_split_" + std::to_string(::getpid()) + "_" + std::get<0>(GetParam()) + "_" +
            std::get<1>(GetParam()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Starts the server, sends `requests` keep-alive requests (a third of them
  // writes), stops it and returns its output.
  std::string Serve(std::vector<std::string> extra, int requests) {
    const uint16_t port = FreePortPair();
    EXPECT_NE(port, 0);
    std::vector<std::string> args{"50",        "127.0.0.1",    std::to_string(port),
                                  "--no-twin", "--delay-mode", std::get<1>(GetParam())};
    args.insert(args.end(), extra.begin(), extra.end());
    ServerProcess server;
    std::string out;
    EXPECT_TRUE(server.Start(BinaryPath(std::get<0>(GetParam())), args, dir_.string(), &out))
        << out;
    TestConnection c(port);
    EXPECT_TRUE(c.ok());
    for (int i = 0; i < requests && c.ok(); ++i) {
      EXPECT_TRUE(c.SendRequest(std::to_string(i % 50) + (i % 3 ? "-1-" : "-0-x")));
      if (c.ReadReply() == "<timeout>") {
        ADD_FAILURE() << "no reply to request " << i;
        break;
      }
    }
    EXPECT_EQ(server.Stop(SIGTERM, 3000, &out), 0) << out;
    return out;
  }

  std::filesystem::path dir_;
};

TEST_P(TimingSplitTest, SummaryAndTraceSplitTheLabMetric) {
  const std::string trace = (dir_ / "trace.csv").string();
  const std::string out = Serve({"--delay-us", "30", "--trace", trace}, 480);
  auto f = SummaryFields(out);
  ASSERT_EQ(f["requests"], "480") << out;
  for (const char* key :
       {"mean_latency_s", "mean_wait_s", "mean_hold_s", "mean_queue_s", "mean_delay_s",
        "mean_cpu_wait_s", "cpu_wait_samples", "mean_delay_slept_us"}) {
    ASSERT_TRUE(f.count(key)) << key << " missing in: " << out;
  }
  // A read pauses once, a write twice; every pause lasts at least 30 us.
  EXPECT_GE(std::stod(f["mean_delay_slept_us"]), 30.0);
  EXPECT_GE(std::stod(f["mean_delay_s"]), 30e-6 * 4 / 3 * 0.99);
  // The delay is inside the lock, the lock inside the lab interval.
  EXPECT_GE(std::stod(f["mean_hold_s"]), std::stod(f["mean_delay_s"]));
  EXPECT_GE(std::stod(f["mean_latency_s"]), std::stod(f["mean_hold_s"]));
  EXPECT_EQ(std::stod(f["mean_queue_s"]), 0.0);  // a thread per connection
  // 1 request in 16 is sampled: with 480 the chance of none is (15/16)^480.
  EXPECT_GT(std::stoull(f["cpu_wait_samples"]), 0u);
  EXPECT_LT(std::stoull(f["cpu_wait_samples"]), 480u);
  EXPECT_GE(std::stod(f["mean_cpu_wait_s"]), 0.0);

  const std::vector<std::string> rows = Lines(trace);
  ASSERT_EQ(rows.size(), 481u);
  EXPECT_EQ(rows[0],
            "pos,is_read,latency_ns,wait_ns,hold_ns,queue_ns,delay_ns,cpu_wait_ns,recv_ns,"
            "unlock_ns,thread");
  uint64_t sampled = 0;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const std::vector<std::string> c = Split(rows[i]);
    ASSERT_EQ(c.size(), 11u) << rows[i];
    EXPECT_GE(std::stoll(c[8]), 0) << rows[i];                 // received after the server started
    EXPECT_GE(std::stoll(c[9]), std::stoll(c[8])) << rows[i];  // released after received
    EXPECT_GE(std::stoll(c[10]), 1) << rows[i];                // the serving thread's number
    const int pauses = c[1] == "1" ? 1 : 2;
    EXPECT_GE(std::stoll(c[6]), 30'000LL * pauses) << rows[i];
    EXPECT_GE(std::stoll(c[4]), std::stoll(c[6])) << rows[i];
    EXPECT_GE(std::stoll(c[2]), std::stoll(c[4])) << rows[i];
    if (!c[7].empty()) {
      ++sampled;
      EXPECT_GE(std::stoll(c[7]), 0) << rows[i];
    }
  }
  EXPECT_EQ(std::to_string(sampled), f["cpu_wait_samples"]);
}

TEST_P(TimingSplitTest, NoTimingRecordsNothingButServes) {
  const std::string out = Serve(
      {"--delay-us", "0", "--batch", "10", "--trace", (dir_ / "t.csv").string(), "--no-timing"},
      100);
  auto f = SummaryFields(out);
  EXPECT_EQ(f["requests"], "100") << out;
  EXPECT_EQ(std::stod(f["mean_latency_s"]), 0.0) << out;
  EXPECT_EQ(f["cpu_wait_samples"], "0") << out;
  const auto times = Lines(dir_ / "server_output_time_aggregated");
  EXPECT_TRUE(times.empty()) << times.size() << " timing lines";
}

INSTANTIATE_TEST_SUITE_P(Servers, TimingSplitTest,
                         testing::Combine(testing::Values("main1", "main4"),
                                          testing::Values("usleep", "precise")),
                         [](const auto& p) {
                           return std::get<0>(p.param) + "_" + std::get<1>(p.param);
                         });

TEST(DelayModeOption, BadValueExitsTwoAndHelpNamesIt) {
  std::string out;
  EXPECT_EQ(RunCommand(BinaryPath("main2"), {"10", "127.0.0.1", "3000", "--delay-mode", "spin"},
                       &out, 10'000),
            2)
      << out;
  EXPECT_NE(out.find("--delay-mode"), std::string::npos) << out;
  std::string help;
  EXPECT_EQ(RunCommand(BinaryPath("main2"), {"--help"}, &help, 10'000), 0);
  EXPECT_NE(help.find("--delay-mode"), std::string::npos);
  EXPECT_NE(help.find("--no-timing"), std::string::npos);
}

}  // namespace
}  // namespace kv
