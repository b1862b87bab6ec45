// One number rule for every binary (main1..main4, lockserver, client), see
// common/numbers.h: for every numeric argument of each binary (a row below;
// a test fails when --help shows a range with no row) the same bad spellings
// are refused with exit status 2 and one line naming the argument, the value
// and the allowed range, and a good value (spelled with a leading zero where
// it can be) is accepted.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "tests/option_table.h"
#include "tests/server_process.h"

namespace kv {
namespace {

namespace ts = testing_support;
using ts::NumberRow;

// The arguments of every binary that take a number, with the range each
// refusal states. "port" stands for the free port the good run listens on.
std::vector<NumberRow> ServerNumberRows(const std::string& binary) {
  std::vector<NumberRow> rows = {
      {"n", true, "1", "10000000", "010", {}, {"0", "10000001"}},
      {"port", true, "1", "65535", "port", {}, {"0", "65536", "99999999999999999999"}},
      {"--delay-us", true, "0", "1000000", "05", {}, {"1000001"}},
      {"--spin-ns", true, "0", "1000000000", "5000", {"--delay-mode", "precise"}, {"1000000001"}},
      {"--batch", true, "1", "1000000000", "010", {}, {"0", "1000000001"}},
      {"--trace-limit", true, "0", "1000000000000", "10", {}, {"1000000000001"}},
      {"--idle-timeout-ms", true, "1", "3600000", "2000", {}, {"0", "3600001"}},
      {"--frame-timeout-ms", true, "1", "3600000", "2000", {}, {"0", "3600001"}},
      {"--write-timeout-ms", true, "1", "3600000", "2000", {}, {"0", "3600001"}},
      {"--max-connections", true, "1", "1000000", "08", {}, {"0", "1000001"}},
      {"--timer-slack-ns", true, "1", "1000000000", "1000", {}, {"0", "1000000001"}},
      {"--workers", true, "0", "4096", "2", {}, {"4097"}},
      {"--loops", true, "0", "256", "1", {"--io", "epoll"}, {"257"}},
  };
  if (binary == "lockserver") {
    rows.push_back({"--stripes", true, "1", "1048576", "04", {}, {"0", "1048577"}});
  }
  return rows;
}

std::vector<NumberRow> ClientNumberRows() {
  return {
      {"n", true, "1", "10000000", "0100", {}, {"0", "10000001"}},
      {"port", true, "1", "65535", "port", {}, {"0", "65536", "99999999999999999999"}},
      {"--threads", true, "1", "4096", "02", {}, {"0", "4097"}},
      {"--requests", true, "1", "1125899906842624", "020", {}, {"0", "1125899906842625"}},
      {"--duration", false, "0.001", "86400", "0.3", {}, {"0.0001", "86401", "1e999"}},
      {"--warmup", false, "0", "86400", "0.05", {}, {"86400.5"}},
      {"--time-limit", false, "0.001", "86400", "5", {}, {"0", "1e5"}},
      {"--connections", true, "1", "65536", "4", {"--connection", "keepalive"}, {"0", "65537"}},
      {"--rate", false, "0.001", "1000000000", "2000", {}, {"0.0009", "1e10"}},
      {"--read-ratio", false, "0", "1", "0.5", {}, {"1.01", "2"}},
      {"--seed", true, "0", "18446744073709551615", "7", {}, {"18446744073709551616"}},
      {"--check-requests", true, "1", "10000000", "05", {}, {"0", "10000001"}},
      {"--timeout-ms", true, "1", "600000", "2000", {}, {"0", "600001"}},
      // The top is a day from now: only its start is checked.
      {"--start-at", true, "0", "", "1", {}, {"99999999999999999999"}},
  };
}

std::vector<NumberRow> NumberRows(const std::string& binary) {
  return binary == "client" ? ClientNumberRows() : ServerNumberRows(binary);
}

// The spellings every numeric argument refuses: a sign, spaces, hex, nan and
// inf, the empty string, and for whole numbers a fraction or an exponent
// (also on the row's good value, so the range cannot be what refuses them),
// then the row's own out-of-range values.
std::vector<std::string> BadSpellings(const NumberRow& row) {
  const std::string g = row.good == "port" ? "3000" : row.good;
  std::vector<std::string> bad = {"+5",    "-5",   "+" + g, "-" + g, " " + g,
                                  g + " ", "0x10", "nan",   "inf",   ""};
  if (row.whole) {
    for (const std::string& b : {std::string("1e3"), std::string("1.5"), g + ".0", g + "e0"}) {
      bad.push_back(b);
    }
  } else {
    bad.push_back("0x1p3");
  }
  bad.insert(bad.end(), row.out_of_range.begin(), row.out_of_range.end());
  std::sort(bad.begin(), bad.end());
  bad.erase(std::unique(bad.begin(), bad.end()), bad.end());
  return bad;
}

class NumberCliTest : public testing::TestWithParam<std::string> {
 protected:
  bool IsClient() const { return GetParam() == "client"; }

  // The arguments before the numbers: lockserver needs a strategy (a striped
  // one, for --stripes).
  std::vector<std::string> Prefix() const {
    if (GetParam() == "lockserver") return {"--strategy", "striped-mutex"};
    return {};
  }

  // A whole command line: the prefix, every row's context, `options`, then
  // n ip port (after the options: the servers' positionals may be optional).
  std::vector<std::string> CommandLine(const std::string& n, const std::string& port,
                                       const std::vector<std::string>& options) const {
    std::vector<std::string> args = Prefix();
    args.insert(args.end(), options.begin(), options.end());
    for (const std::string& a : {n, std::string("127.0.0.1"), port}) args.push_back(a);
    return args;
  }

  // The line a refusal must be: `binary: ...<name>: '<value>' ... allowed <lo>..<hi>`.
  void ExpectRefused(const NumberRow& row, const std::string& value,
                     const std::vector<std::string>& args) const {
    std::string joined;
    for (const auto& a : args) joined += "[" + a + "] ";
    SCOPED_TRACE(joined);
    std::string out;
    EXPECT_EQ(ts::RunCommand(ts::BinaryPath(GetParam()), args, &out, 10'000), 2) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_EQ(out.rfind(GetParam() + (IsClient() ? ": " : ": error: "), 0), 0u) << out;
    EXPECT_NE(out.find(row.name + ": '" + value + "'"), std::string::npos) << out;
    EXPECT_NE(out.find("allowed " + row.lo + ".." + row.hi), std::string::npos) << out;
  }
};

// A binary that runs at all with a bad value is caught quickly: port 1
// cannot be bound by a test user, and nothing listens on it (or its twin)
// for the client.
TEST_P(NumberCliTest, EveryNumberRefusesTheSameBadSpellings) {
  for (const NumberRow& row : NumberRows(GetParam())) {
    for (const std::string& value : BadSpellings(row)) {
      std::vector<std::string> args;
      if (row.name == "n") {
        args = CommandLine(value, "1", {});
      } else if (row.name == "port") {
        args = CommandLine("10", value, {});
      } else {
        std::vector<std::string> options = row.context;
        options.push_back(row.name);
        options.push_back(value);
        args = CommandLine("10", "1", options);
      }
      ExpectRefused(row, value, args);
    }
  }
}

// Every row's good value on one command line, which must run: a server
// starts and stops on SIGTERM with exit 0; the client runs its few requests
// against main4 and exits 0.
TEST_P(NumberCliTest, EveryNumberAcceptsAGoodValue) {
  const uint16_t port = ts::FreePortPair();
  ASSERT_NE(port, 0);
  std::string zero_port(1, '0');      // "03000" is port 3000; appended, not
  zero_port += std::to_string(port);  // "0" + ...: GCC 12 -Wrestrict
  std::string n;
  std::vector<std::string> options;
  for (const NumberRow& row : NumberRows(GetParam())) {
    if (row.name == "n") {
      n = row.good;
    } else if (row.name != "port") {
      options.insert(options.end(), row.context.begin(), row.context.end());
      options.push_back(row.name);
      options.push_back(row.good);
    }
  }
  const std::vector<std::string> args = CommandLine(n, zero_port, options);
  const ts::ScratchDir dir("numbers_" + GetParam());
  ts::ServerProcess server;
  std::string out;
  if (!IsClient()) {
    ASSERT_TRUE(server.Start(ts::BinaryPath(GetParam()), args, dir.str(), &out)) << out;
    EXPECT_NE(out.find("127.0.0.1:" + std::to_string(port) + " "), std::string::npos) << out;
    EXPECT_EQ(server.Stop(SIGTERM, 3000, &out), 0) << out;
    return;
  }
  ASSERT_TRUE(server.Start(ts::BinaryPath("main4"),
                           {"100", "127.0.0.1", std::to_string(port), "--delay-us", "0"}, dir.str(),
                           &out))
      << out;
  std::string client_out;
  EXPECT_EQ(ts::RunCommand(ts::BinaryPath("client"), args, &client_out, 30'000), 0) << client_out;
  EXPECT_EQ(server.Stop(SIGTERM, 3000, &out), 0) << out;
}

// Fails when a numeric argument is added without a row: every --help line
// that shows a range "lo..hi" names a row, and every row names an argument
// that --help lists.
TEST_P(NumberCliTest, EveryRangeInHelpHasARow) {
  std::string help;
  ASSERT_EQ(ts::RunCommand(ts::BinaryPath(GetParam()), {"--help"}, &help, 10'000), 0) << help;
  std::set<std::string> rows;
  for (const NumberRow& row : NumberRows(GetParam())) rows.insert(row.name);
  const std::set<std::string> ranged = ts::HelpRangeNames(help);
  EXPECT_TRUE(std::includes(rows.begin(), rows.end(), ranged.begin(), ranged.end())) << help;
  std::set<std::string> listed = ts::HelpOptionNames(help);
  listed.insert({"n", "port"});
  EXPECT_TRUE(std::includes(listed.begin(), listed.end(), rows.begin(), rows.end())) << help;
}

INSTANTIATE_TEST_SUITE_P(AllBinaries, NumberCliTest,
                         testing::Values("main1", "main2", "main3", "main4", "lockserver",
                                         "client"));

}  // namespace
}  // namespace kv
