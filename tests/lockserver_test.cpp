// Integration tests for the generic server: `lockserver --strategy X` serves
// the lab protocol for every registered strategy (read, write, read back,
// concurrent clients on shared slots), and its own flags fail cleanly.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "common/strategy_registry.h"
#include "common/swap_locks.h"
#include "tests/server_process.h"

namespace kv {
namespace {

using testing_support::BinaryPath;
using testing_support::FreePortPair;
using testing_support::OneShot;
using testing_support::RunCommand;
using testing_support::ServerProcess;

std::vector<std::string> StrategyNameList() {
  std::vector<std::string> names;
  for (const StrategyInfo& s : AllStrategies()) names.emplace_back(s.name);
  return names;
}

class LockServerTest : public testing::TestWithParam<std::string> {
 protected:
  // Starts `lockserver --strategy GetParam()` (4 stripes where it has stripes)
  // with n strings and extra options on a free port; sets port_.
  void StartLockServer(std::size_t n, std::vector<std::string> extra, std::string* out) {
    const StrategyInfo* info = FindStrategy(GetParam());
    ASSERT_NE(info, nullptr);
    port_ = FreePortPair();
    ASSERT_NE(port_, 0);
    std::vector<std::string> args{"--strategy", GetParam()};
    if (info->uses_stripes) args.insert(args.end(), {"--stripes", "4"});
    args.insert(args.end(), {std::to_string(n), "127.0.0.1", std::to_string(port_)});
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(server_.Start(BinaryPath("lockserver"), args, "", out)) << *out;
  }

  uint16_t port_ = 0;
  ServerProcess server_;
};

TEST_P(LockServerTest, ServesTheLabProtocol) {
  std::string out;
  ASSERT_NO_FATAL_FAILURE(StartLockServer(20, {"--delay-us", "0", "-q"}, &out));
  const uint16_t port = port_;
  ServerProcess& server = server_;
  EXPECT_NE(out.find("strategy=" + GetParam()), std::string::npos) << out;

  EXPECT_EQ(OneShot(port, "3-1-"), "String 3: the initial value");
  EXPECT_EQ(OneShot(port, "3-0-hello three"), "hello three");
  EXPECT_EQ(OneShot(port, "3-1-"), "hello three");
  EXPECT_EQ(OneShot(port, "20-1-"), "ERROR pos 20 out of range [0,20)");

  // Four clients, each owning slots c, c+4, ...: every write reads back its
  // own text and a later read of the slot returns it (slots share stripes).
  std::atomic<int> bad{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 25; ++i) {
        const int pos = c + 4 * (i % 5);
        // Built with append: GCC 12 -O3 warns (-Wrestrict, a false positive,
        // PR 105329) on chained std::string operator+ here.
        std::string text = "c";
        text.append(std::to_string(c)).append(" i").append(std::to_string(i));
        std::string write = std::to_string(pos);
        std::string read = write;
        write.append("-0-").append(text);
        read.append("-1-");
        if (OneShot(port, write) != text) bad.fetch_add(1);
        if (OneShot(port, read) != text) bad.fetch_add(1);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(bad.load(), 0);

  std::string summary;
  EXPECT_EQ(server.Stop(SIGTERM, 3000, &summary), 0) << summary;
  EXPECT_NE(summary.find("summary requests="), std::string::npos) << summary;
}

// Our consistency checker (client --check) passes against every strategy;
// the same test binary runs under TSan, so races inside a strategy that the
// checker cannot see from outside are still reported there.
TEST_P(LockServerTest, CheckerFindsItConsistent) {
  std::string out;
  ASSERT_NO_FATAL_FAILURE(StartLockServer(10, {"-q"}, &out));
  std::string check;
  EXPECT_EQ(
      RunCommand(BinaryPath("client"),
                 {"10", "127.0.0.1", std::to_string(port_), "--check", "--connection", "keepalive"},
                 &check, 120'000),
      0)
      << check;
  EXPECT_NE(check.find("check: CONSISTENT"), std::string::npos) << check;
  std::string summary;
  EXPECT_EQ(server_.Stop(SIGTERM, 3000, &summary), 0) << summary;
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, LockServerTest, testing::ValuesIn(StrategyNameList()),
                         [](const testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

TEST(LockServerFlagsTest, ListsStrategies) {
  std::string out;
  EXPECT_EQ(RunCommand(BinaryPath("lockserver"), {"--list-strategies"}, &out), 0);
  for (const StrategyInfo& s : AllStrategies()) {
    EXPECT_NE(out.find(std::string(s.name)), std::string::npos) << s.name;
  }
}

// What liblockprof can swap in, from the list it is built on, and pthread's.
TEST(LockServerFlagsTest, ListsSwapLocks) {
  std::string out;
  EXPECT_EQ(RunCommand(BinaryPath("lockserver"), {"--list-locks"}, &out), 0);
  for (const SwapLockInfo& lock : kSwapLocks) {
    EXPECT_NE(out.find("  " + std::string(lock.name) + " "), std::string::npos) << lock.name;
  }
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), static_cast<long>(kSwapLockCount) + 1) << out;
  EXPECT_NE(out.find("  pthread "), std::string::npos) << out;
}

TEST(LockServerFlagsTest, UnknownOrMissingStrategyIsAUsageError) {
  std::string out;
  EXPECT_EQ(
      RunCommand(BinaryPath("lockserver"), {"--strategy", "nope", "10", "127.0.0.1", "3000"}, &out),
      2);
  EXPECT_NE(out.find("--strategy: 'nope' is not a strategy"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(BinaryPath("lockserver"), {"10", "127.0.0.1", "3000"}, &out), 2);
  EXPECT_NE(out.find("--strategy is required"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(BinaryPath("lockserver"),
                       {"--strategy", "striped-mutex", "--stripes", "0", "10", "127.0.0.1", "3000"},
                       &out),
            2);
  EXPECT_EQ(
      RunCommand(BinaryPath("lockserver"),
                 {"--strategy", "one-mutex", "--stripes", "4", "10", "127.0.0.1", "3000"}, &out),
      2);
}

}  // namespace
}  // namespace kv
