// Command lines of the real server binaries: every bad
// value is refused before anything starts, with exit status 2 and ONE line
// naming the option and the value; numbers are decimal only, as the kit's
// atoi() reads them (03000 is port 3000, never octal 1536).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "tests/option_table.h"
#include "tests/server_process.h"

namespace kv {
namespace {

using testing_support::BinaryPath;
using testing_support::FreePortPair;
using testing_support::HelpOptionNames;
using testing_support::OptionRow;
using testing_support::RowNames;
using testing_support::RunCommand;
using testing_support::ScratchDir;
using testing_support::ServerProcess;

struct BadCli {
  std::vector<std::string> args;  // n ip port and options, after the prefix
  std::string names;              // must appear in the one line
};

// Port 1 is never reached: every case is refused while parsing.
std::vector<BadCli> BadCases() {
  const std::vector<std::string> base{"10", "127.0.0.1", "3000"};
  std::vector<BadCli> cases = {
      {{}, "n"},
      {{"10", "127.0.0.1"}, "port"},
  };
  for (const char* n :
       {"0", "10000001", "ten", "1e3", "0x10", "1.5", "nan", "-1", " 5", "+5", ""}) {
    cases.push_back({{n, "127.0.0.1", "3000"}, std::string("n: '") + n + "'"});
  }
  for (const char* ip : {"localhost", "300.1.1.1", "127.0.0.1 "}) {
    cases.push_back({{"10", ip, "3000"}, std::string("'") + ip + "'"});
  }
  for (const char* port :
       {"0", "65536", "0x0BB8", "3000.0", "inf", "-3000", "99999999999999999999"}) {
    cases.push_back({{"10", "127.0.0.1", port}, std::string("port: '") + port + "'"});
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> options = {
      {"--delay-us", {"-1", "1.5", "nan", "inf", "1e3", "0x10", "1000001", ""}},
      {"--batch", {"0", "1.5", "-5", "0x3e8"}},
      {"--idle-timeout-ms", {"0", "3600001", "5s"}},
      {"--frame-timeout-ms", {"1.5", "0"}},
      {"--write-timeout-ms", {"nan", "3600001"}},
      {"--max-connections", {"0", "1e6"}},
      {"--timer-slack-ns", {"0", "-1", "1.0"}},
      {"--trace-limit", {"-1", "0x10"}},
      {"--spin-ns", {"-1", "1000000001", "4us"}},
      {"--loops", {"257", "-1", "2.0"}},
  };
  for (const auto& [option, values] : options) {
    for (const std::string& v : values) {
      std::vector<std::string> args = base;
      args.push_back(option);
      args.push_back(v);
      cases.push_back({args, option + ": '" + v + "'"});
    }
  }
  std::vector<std::string> bogus = base;
  bogus.push_back("--bogus");
  cases.push_back({bogus, "--bogus"});
  return cases;
}

class ServerCliTest : public testing::TestWithParam<std::string> {
 protected:
  // The binary and the arguments every command line starts with.
  std::vector<std::string> Prefix() const {
    if (GetParam() == "lockserver") return {"--strategy", "one-mutex"};
    return {};
  }
};

TEST_P(ServerCliTest, EveryBadValueIsOneLineAndExitTwo) {
  for (const BadCli& bad : BadCases()) {
    std::vector<std::string> args = Prefix();
    args.insert(args.end(), bad.args.begin(), bad.args.end());
    std::string joined;
    for (const auto& a : args) joined += "[" + a + "] ";
    SCOPED_TRACE(joined);
    std::string out;
    EXPECT_EQ(RunCommand(BinaryPath(GetParam()), args, &out, 10'000), 2) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_EQ(out.rfind(GetParam() + ": error: ", 0), 0u) << out;
    EXPECT_NE(out.find(bad.names), std::string::npos) << out;
  }
}

TEST_P(ServerCliTest, LeadingZerosAreDecimalLikeAtoi) {
  const uint16_t port = FreePortPair();
  ASSERT_NE(port, 0);
  std::vector<std::string> args = Prefix();
  for (const char* a : {"010", "127.0.0.1"}) args.emplace_back(a);
  std::string zero_port(1, '0');      // "03000" is port 3000; appended, not
  zero_port += std::to_string(port);  // "0" + ...: GCC 12 -Wrestrict
  args.push_back(zero_port);
  for (const char* a : {"--delay-us", "010", "--no-twin"}) args.emplace_back(a);
  ServerProcess server;
  std::string out;
  ASSERT_TRUE(server.Start(BinaryPath(GetParam()), args, "/tmp", &out)) << out;
  EXPECT_NE(out.find("127.0.0.1:" + std::to_string(port) + " "), std::string::npos) << out;
  EXPECT_NE(out.find(" n=10 "), std::string::npos) << out;
  EXPECT_NE(out.find("delay_us=10"), std::string::npos) << out;
  EXPECT_EQ(server.Stop(SIGTERM, 3000, &out), 0) << out;
}

// One row per option of the servers (lockserver adds its own three). A good
// row must start the server; a bad one must be refused with exit status 2
// and one line naming the option. `dir` holds the files the rows write.
std::vector<OptionRow> ServerOptionRows(const std::string& binary, const std::string& dir) {
  std::vector<OptionRow> rows = {
      {"--delay-us", {"--delay-us", "0"}, {"--delay-us", "-1"}, "--delay-us"},
      {"--delay-mode", {"--delay-mode", "precise"}, {"--delay-mode", "sleepy"}, "--delay-mode"},
      {"--no-timing", {"--no-timing"}, {"--no-timing=bogus"}, "--no-timing"},
      {"--batch", {"--batch", "5"}, {"--batch", "0"}, "--batch"},
      {"--time-file",
       {"--time-file", dir + "/times"},
       {"--time-file", dir + "/no/such/dir/x"},
       "--time-file"},
      {"--trace", {"--trace", dir + "/trace.csv"}, {"--trace", "/dev/null"}, "--trace"},
      {"--trace-limit", {"--trace-limit", "10"}, {"--trace-limit", "-1"}, "--trace-limit"},
      {"--no-twin", {"--no-twin"}, {"--no-twin=bogus"}, "--no-twin"},
      {"--idle-timeout-ms",
       {"--idle-timeout-ms", "100"},
       {"--idle-timeout-ms", "0"},
       "--idle-timeout-ms"},
      {"--frame-timeout-ms",
       {"--frame-timeout-ms", "100"},
       {"--frame-timeout-ms", "0"},
       "--frame-timeout-ms"},
      {"--write-timeout-ms",
       {"--write-timeout-ms", "100"},
       {"--write-timeout-ms", "3600001"},
       "--write-timeout-ms"},
      {"--max-connections",
       {"--max-connections", "8"},
       {"--max-connections", "0"},
       "--max-connections"},
      {"--timer-slack-ns",
       {"--timer-slack-ns", "1000"},
       {"--timer-slack-ns", "0"},
       "--timer-slack-ns"},
      {"--io", {"--io", "pool"}, {"--io", "fibers"}, "--io"},
      {"--workers", {"--workers", "2"}, {"--workers", "4097"}, "--workers"},
      {"--loops", {"--io", "epoll", "--loops", "2"}, {"--loops", "257"}, "--loops"},
      {"--spin-ns",
       {"--delay-mode", "precise", "--spin-ns", "5000"},
       {"--spin-ns", "-1"},
       "--spin-ns"},
      {"--close-after-reply",
       {"--close-after-reply"},
       {"--close-after-reply=bogus"},
       "--close-after-reply"},
      {"--quiet", {"--quiet"}, {"--quiet=bogus"}, "--quiet"},
      {"--verbose", {"-v"}, {"--verbose=bogus"}, "--verbose"},
  };
  if (binary == "lockserver") {
    rows.push_back(
        {"--strategy", {"--strategy", "rwlock-per-slot"}, {"--strategy", "nope"}, "--strategy"});
    rows.push_back({"--stripes",
                    {"--strategy", "striped-mutex", "--stripes", "4"},
                    {"--strategy", "striped-mutex", "--stripes", "0"},
                    "--stripes"});
    // Its good row lists and exits 0 (tested below), so it starts nothing.
    rows.push_back({"--list-strategies", {}, {"--list-strategies=bogus"}, "--list-strategies"});
    rows.push_back({"--list-locks", {}, {"--list-locks=bogus"}, "--list-locks"});
  }
  return rows;
}

class ServerOptionTableTest : public ServerCliTest {
 protected:
  // The prefix unless the row names its own --strategy.
  std::vector<std::string> PrefixFor(const std::vector<std::string>& row_args) const {
    if (std::find(row_args.begin(), row_args.end(), "--strategy") != row_args.end()) return {};
    return Prefix();
  }

  const ScratchDir dir_{"options_" + GetParam()};
};

// Fails when an option is added to --help without a row (or a row outlives
// its option): --help is the only exception, tested by the parser's tests.
TEST_P(ServerOptionTableTest, EveryOptionInHelpHasARow) {
  std::string help;
  ASSERT_EQ(RunCommand(BinaryPath(GetParam()), {"--help"}, &help, 10'000), 0) << help;
  std::set<std::string> listed = HelpOptionNames(help);
  ASSERT_EQ(listed.erase("--help"), 1u) << help;
  EXPECT_EQ(listed, RowNames(ServerOptionRows(GetParam(), dir_.str()))) << help;
}

TEST_P(ServerOptionTableTest, EveryOptionRefusesABadValueWithExitTwoAndOneLine) {
  for (const OptionRow& row : ServerOptionRows(GetParam(), dir_.str())) {
    std::vector<std::string> args = PrefixFor(row.bad);
    args.insert(args.end(), row.bad.begin(), row.bad.end());
    for (const char* a : {"10", "127.0.0.1", "1"}) args.emplace_back(a);  // never reached
    SCOPED_TRACE(row.name);
    std::string out;
    EXPECT_EQ(RunCommand(BinaryPath(GetParam()), args, &out, 10'000), 2) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(out.find(row.names), std::string::npos) << out;
  }
}

TEST_P(ServerOptionTableTest, EveryOptionAcceptsAGoodValue) {
  for (const OptionRow& row : ServerOptionRows(GetParam(), dir_.str())) {
    if (row.good.empty()) continue;  // --list-strategies, --list-locks: see LockServerCliTest
    const uint16_t port = FreePortPair();
    ASSERT_NE(port, 0);
    std::vector<std::string> args = PrefixFor(row.good);
    args.insert(args.end(), row.good.begin(), row.good.end());
    for (const std::string& a :
         {std::string("10"), std::string("127.0.0.1"), std::to_string(port)}) {
      args.push_back(a);
    }
    SCOPED_TRACE(row.name);
    ServerProcess server;
    std::string out;
    ASSERT_TRUE(server.Start(BinaryPath(GetParam()), args, dir_.str(), &out)) << out;
    EXPECT_EQ(server.Stop(SIGTERM, 3000, &out), 0) << out;
  }
}

INSTANTIATE_TEST_SUITE_P(AllServers, ServerOptionTableTest,
                         testing::Values("main1", "main2", "main3", "main4", "lockserver"));

TEST(LockServerCliTest, ListStrategiesExitsZero) {
  std::string out;
  EXPECT_EQ(RunCommand(BinaryPath("lockserver"), {"--list-strategies"}, &out, 10'000), 0) << out;
  EXPECT_NE(out.find("one-mutex"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(AllServers, ServerCliTest,
                         testing::Values("main1", "main2", "main3", "main4", "lockserver"));

TEST(LockServerCliTest, OwnFlagsUseTheSameDecimalRule) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--strategy", "striped-mutex", "--stripes", "0"}, "--stripes: '0'"},
      {{"--strategy", "striped-mutex", "--stripes", "0x10"}, "--stripes: '0x10'"},
      {{"--strategy", "striped-mutex", "--stripes", "1.5"}, "--stripes: '1.5'"},
      {{"--strategy", "striped-mutex", "--stripes", "nan"}, "--stripes: 'nan'"},
      {{"--strategy", "striped-mutex", "--stripes", "1048577"}, "--stripes: '1048577'"},
      {{"--strategy", "one-mutex", "--stripes", "4"}, "--stripes applies"},
      {{"--strategy", "nope"}, "--strategy: 'nope'"},
      {{"--strategy", ""}, "--strategy: ''"},
      {{}, "--strategy is required"},
  };
  for (const auto& [flags, names] : cases) {
    std::vector<std::string> args = flags;
    for (const char* a : {"10", "127.0.0.1", "3000"}) args.emplace_back(a);
    SCOPED_TRACE(names);
    std::string out;
    EXPECT_EQ(RunCommand(BinaryPath("lockserver"), args, &out, 10'000), 2) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(out.find(names), std::string::npos) << out;
  }
}

#ifdef LOCKBENCH_HAVE_URING
// Runs `binary` with `args` where io_uring_setup fails with ENOSYS, as under
// a seccomp sandbox; returns its exit status (-1 if it had to be killed) and
// its output.
int RunWithoutIoUring(const std::string& binary, const std::vector<std::string>& args,
                      std::string* out) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return -1;
  std::vector<std::string> all{binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      _exit(99);
    }
    execv(binary.c_str(), argv.data());
    _exit(98);
  }
  close(pipe_fds[1]);
  bool killed = false;
  for (;;) {
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    // Only stops a server that serves when it should have refused.
    if (poll(&pfd, 1, 30'000) == 0) {
      kill(pid, SIGKILL);
      killed = true;
    }
    char buf[4096];
    const ssize_t r = read(pipe_fds[0], buf, sizeof buf);
    if (r <= 0) break;
    out->append(buf, static_cast<std::size_t>(r));
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return killed || !WIFEXITED(status) ? -1 : WEXITSTATUS(status);
}

TEST(ServerUringTest, KernelRefusingIoUringIsOneLineAndExitTwo) {
  const uint16_t port = FreePortPair();
  ASSERT_NE(port, 0);
  std::string out;
  EXPECT_EQ(RunWithoutIoUring(BinaryPath("main4"),
                              {"10", "127.0.0.1", std::to_string(port), "--io", "uring"}, &out),
            2)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(out.rfind("main4: error: --io uring: the kernel refuses io_uring", 0), 0u) << out;
  // The same sandbox leaves the other models alone: the refusal is io_uring's.
  std::string help;
  EXPECT_EQ(RunWithoutIoUring(BinaryPath("main4"), {"--help"}, &help), 0) << help;
}
#endif

}  // namespace
}  // namespace kv
