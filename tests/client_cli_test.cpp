// Every option of the client, one table: a row per option
// with a value the client accepts (the run against a real server exits 0)
// and one it refuses before starting (exit status 2, one line naming it).
// The rows must be exactly the options `client --help` lists.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tests/option_table.h"
#include "tests/server_process.h"

namespace kv {
namespace {

namespace ts = testing_support;
using ts::OptionRow;

// Good rows stay short: a few requests, sub-second durations.
std::vector<OptionRow> ClientOptionRows(const std::string& dir) {
  return {
      {"--version", {"--version"}, {"--version=x"}, "--version"},
      {"--threads", {"--threads", "1,2"}, {"--threads", "0"}, "--threads"},
      {"--requests", {"--requests", "5"}, {"--requests", "1e3"}, "--requests"},
      {"--duration", {"--duration", "0.2"}, {"--duration", "nan"}, "--duration"},
      {"--warmup", {"--warmup", "0.1", "--duration", "0.1"}, {"--warmup", "-1"}, "--warmup"},
      {"--time-limit", {"--time-limit", "5"}, {"--time-limit", "0"}, "--time-limit"},
      {"--connection",
       {"--connection", "keepalive"},
       {"--connection", "pipelined"},
       "--connection"},
      {"--connections",
       {"--connection", "keepalive", "--connections", "4"},
       {"--connection", "keepalive", "--connections", "0"},
       "--connections"},
      {"--rate", {"--rate", "2000"}, {"--rate", "inf"}, "--rate"},
      {"--read-ratio", {"--read-ratio", "0.5"}, {"--read-ratio", "1.5"}, "--read-ratio"},
      {"--dist", {"--dist", "zipf:1.1"}, {"--dist", "pareto"}, "--dist"},
      {"--text-len", {"--text-len", "fixed:10"}, {"--text-len", "fixed:0"}, "--text-len"},
      {"--seed", {"--seed", "7"}, {"--seed", "-1"}, "--seed"},
      {"--format", {"--format", "csv"}, {"--format", "xml"}, "--format"},
      {"--timeline", {"--timeline"}, {"--timeline=bogus"}, "--timeline"},
      {"--quiet", {"--quiet"}, {"--quiet=bogus"}, "--quiet"},
      {"--check", {"--check", "--check-requests", "5"}, {"--check=bogus"}, "--check"},
      {"--real-port", {"--real-port"}, {"--real-port=bogus"}, "--real-port"},
      {"--check-requests",
       {"--check", "--check-requests", "5"},
       {"--check", "--check-requests", "0"},
       "--check-requests"},
      {"--timeout-ms", {"--timeout-ms", "2000"}, {"--timeout-ms", "600001"}, "--timeout-ms"},
      {"--histogram-out",
       {"--histogram-out", dir + "/histograms.json"},
       {"--histogram-out", dir + "/no/such/dir/h.json"},
       "--histogram-out"},
      {"--start-at", {"--start-at", "1"}, {"--start-at", "x"}, "--start-at"},
  };
}

bool Names(const std::vector<std::string>& args, const char* option) {
  return std::find(args.begin(), args.end(), option) != args.end();
}

class ClientOptionTableTest : public testing::Test {
 protected:
  const ts::ScratchDir dir_{"client_options"};
};

TEST_F(ClientOptionTableTest, EveryOptionInHelpHasARow) {
  std::string help;
  ASSERT_EQ(ts::RunCommand(ts::BinaryPath("client"), {"--help"}, &help, 10'000), 0) << help;
  std::set<std::string> listed = ts::HelpOptionNames(help);
  ASSERT_EQ(listed.erase("--help"), 1u) << help;
  EXPECT_EQ(listed, ts::RowNames(ClientOptionRows(dir_.str()))) << help;
}

TEST_F(ClientOptionTableTest, EveryOptionRefusesABadValueWithExitTwoAndOneLine) {
  for (const OptionRow& row : ClientOptionRows(dir_.str())) {
    std::vector<std::string> args{"100", "127.0.0.1", "1"};  // never reached
    args.insert(args.end(), row.bad.begin(), row.bad.end());
    SCOPED_TRACE(row.name);
    std::string out;
    EXPECT_EQ(ts::RunCommand(ts::BinaryPath("client"), args, &out, 10'000), 2) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_EQ(out.rfind("client: ", 0), 0u) << out;
    EXPECT_NE(out.find(row.names), std::string::npos) << out;
  }
}

TEST_F(ClientOptionTableTest, EveryOptionAcceptsAGoodValue) {
  const uint16_t port = ts::FreePortPair();
  ASSERT_NE(port, 0);
  ts::ServerProcess server;
  std::string out;
  ASSERT_TRUE(server.Start(ts::BinaryPath("main4"),
                           {"100", "127.0.0.1", std::to_string(port), "--delay-us", "0"},
                           dir_.str(), &out))
      << out;
  for (const OptionRow& row : ClientOptionRows(dir_.str())) {
    std::vector<std::string> args{"100", "127.0.0.1", std::to_string(port)};
    args.insert(args.end(), row.good.begin(), row.good.end());
    // A bounded load run unless the row sets its own bound or is the checker.
    if (!Names(args, "--check") && !Names(args, "--duration") && !Names(args, "--requests")) {
      for (const char* a : {"--requests", "20"}) args.emplace_back(a);
    }
    if (!Names(args, "--check") && !Names(args, "--threads")) {
      for (const char* a : {"--threads", "2"}) args.emplace_back(a);
    }
    SCOPED_TRACE(row.name);
    std::string client_out;
    EXPECT_EQ(ts::RunCommand(ts::BinaryPath("client"), args, &client_out, 30'000), 0) << client_out;
  }
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "histograms.json"));
  EXPECT_EQ(server.Stop(SIGTERM, 3000, &out), 0) << out;
}

}  // namespace
}  // namespace kv
