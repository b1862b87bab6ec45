// Integration tests: each real mainN binary on a free loopback port, spoken to
// over TCP with raw bytes (after memcached t/bogus-commands.t). Every read has
// a timeout, every server is stopped (or killed) at the end of its test.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "common/io_model_testing.h"
#include "common/io_registry.h"
#include "common/net.h"
#include "tests/server_process.h"

namespace kv {
namespace {

using testing_support::BinaryPath;
using testing_support::FreePortPair;
using testing_support::OneShot;
using testing_support::RunCommand;
using testing_support::ServerProcess;
using testing_support::TestConnection;

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The parameter is a binary, optionally with an I/O model: "main4" (thread
// per connection, the default), "main4:epoll", or "main4:uring-single" (the
// uring model accepting one connection per operation, as on a kernel without
// multishot accept).
class ServerTest : public testing::TestWithParam<std::string> {
 protected:
  std::string Bin() const { return GetParam().substr(0, GetParam().find(':')); }
  std::string Io() const {
    const std::size_t colon = GetParam().find(':');
    return colon == std::string::npos ? "" : GetParam().substr(colon + 1);
  }
  std::vector<std::string> IoArgs() const {
    if (Io().empty()) return {};
    return {"--io", Io() == "uring-single" ? "uring" : Io()};
  }
  std::vector<std::string> IoEnv() const {
    if (Io() == "uring-single") return {"LOCKBENCH_URING_ACCEPT=single"};
    return {};
  }

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("lockbench_it_" + std::to_string(::getpid()) + "_" + GetParam());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Starts GetParam() with n strings and extra options; fails the test if it
  // does not become ready.
  void StartServer(std::size_t n, std::vector<std::string> extra = {}) {
    port_ = FreePortPair();
    ASSERT_NE(port_, 0);
    std::vector<std::string> args{std::to_string(n), "127.0.0.1", std::to_string(port_)};
    args.insert(args.end(), extra.begin(), extra.end());
    for (const std::string& a : IoArgs()) args.push_back(a);
    std::string out;
    ASSERT_TRUE(server_.Start(BinaryPath(Bin()), args, dir_.string(), &out, IoEnv())) << out;
    EXPECT_NE(out.find("127.0.0.1:" + std::to_string(port_)), std::string::npos);
    if (!Io().empty()) {
      EXPECT_NE(out.find(" io=" + Io() + " "), std::string::npos) << out;
    }
  }

  std::string StopServer() {
    std::string out;
    EXPECT_EQ(server_.Stop(SIGTERM, 3000, &out), 0) << out;
    return out;
  }

  std::filesystem::path dir_;
  uint16_t port_ = 0;
  ServerProcess server_;
};

TEST_P(ServerTest, ServesInitialValuesAndReadAfterWrite) {
  StartServer(100);
  EXPECT_EQ(OneShot(port_, "0-1-"), "String 0: the initial value");
  EXPECT_EQ(OneShot(port_, "99-1-String[99] has been modified by thread 1"),
            "String 99: the initial value");
  EXPECT_EQ(OneShot(port_, "42-0-String[42] has been modified by thread 7"),
            "String[42] has been modified by thread 7");
  EXPECT_EQ(OneShot(port_, "42-1-"), "String[42] has been modified by thread 7");
  EXPECT_EQ(OneShot(port_, "43-1-"), "String 43: the initial value");
  StopServer();
}

TEST_P(ServerTest, KitClientPortTwinServesTheSameArray) {
  StartServer(10);
  const uint16_t twin = KitPortTwin(port_);
  EXPECT_EQ(OneShot(port_, "3-0-via the real port"), "via the real port");
  EXPECT_EQ(OneShot(twin, "3-1-"), "via the real port");
  StopServer();
}

TEST_P(ServerTest, KeepAliveConnectionCarriesManyRequests) {
  StartServer(10, {"--delay-us", "0"});
  TestConnection c(port_);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 200; ++i) {
    const std::string text = "value " + std::to_string(i);
    ASSERT_TRUE(c.SendRequest(std::to_string(i % 10) + "-0-" + text));
    ASSERT_EQ(c.ReadReply(), text);
    ASSERT_TRUE(c.SendRequest(std::to_string(i % 10) + "-1-"));
    ASSERT_EQ(c.ReadReply(), text);
  }
  StopServer();
}

TEST_P(ServerTest, ThousandRequestsWriteExactlyOneTimingLine) {
  StartServer(100, {"--delay-us", "1"});
  TestConnection c(port_);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(c.SendRequest(std::to_string(i % 100) + (i % 3 ? "-1-" : "-0-x")));
    ASSERT_NE(c.ReadReply(), "<timeout>");
  }
  // A rejected request does not count towards the next batch.
  ASSERT_TRUE(c.SendRequest("500-1-"));
  EXPECT_EQ(c.ReadReply().rfind("ERROR ", 0), 0u);
  const std::string out = StopServer();
  const std::string times = Slurp(dir_ / "server_output_time_aggregated");
  ASSERT_FALSE(times.empty());
  EXPECT_EQ(times.back(), '\n');
  EXPECT_EQ(std::count(times.begin(), times.end(), '\n'), 1) << times;
  EXPECT_TRUE(testing_support::IsPrintfE(times.substr(0, times.size() - 1)))
      << "timing file: " << times;
  EXPECT_NE(out.find("summary requests=1001 errors=1 "), std::string::npos) << out;
}

struct BadInput {
  const char* name;
  std::string bytes;       // sent as is (a full frame unless said otherwise)
  std::string error_part;  // expected inside the ERROR reply
};

bool IsErrorOrEmpty(const std::string& reply) {
  return reply.empty() || reply[0] == '<' || reply.rfind("ERROR ", 0) == 0;
}

std::string Frame100(const std::string& text) {
  std::string f = text;
  f.resize(kFrameSize, '\0');
  return f;
}

TEST_P(ServerTest, EveryBadInputGetsAnErrorAndTheServerCarriesOn) {
  StartServer(10);
  const std::vector<BadInput> cases = {
      {"empty frame", Frame100(""), "empty request"},
      {"no dashes", Frame100("hello"), "missing '-' after pos"},
      {"one dash", Frame100("3-1"), "missing '-' after is_read"},
      {"non-numeric pos", Frame100("x-1-"), "pos 'x' is not"},
      {"negative pos", Frame100("-4-1-"), "pos -4 is negative"},
      {"overflowing pos", Frame100("184467440737095516160-1-"), "out of range"},
      {"pos >= n", Frame100("10-1-"), "pos 10 out of range [0,10)"},
      {"is_read 2", Frame100("1-2-"), "is_read '2' must be 0"},
      {"binary text", Frame100("1-0-\x01\xfe\xff"), "not printable UTF-8"},
      {"binary garbage", std::string(kFrameSize, '\xff'), "no NUL terminator"},
      {"no NUL", std::string(kFrameSize, 'A'), "no NUL terminator"},
  };
  // All on ONE connection: frames are fixed-size, so after each rejected frame
  // the stream is still in step and the connection stays usable.
  TestConnection c(port_);
  ASSERT_TRUE(c.ok());
  for (const BadInput& bad : cases) {
    SCOPED_TRACE(bad.name);
    ASSERT_TRUE(c.SendBytes(bad.bytes));
    const std::string reply = c.ReadReply();
    EXPECT_EQ(reply.rfind("ERROR ", 0), 0u) << reply;
    EXPECT_NE(reply.find(bad.error_part), std::string::npos) << reply;
    ASSERT_TRUE(c.SendRequest("1-1-"));
    EXPECT_EQ(c.ReadReply(), "String 1: the initial value");
  }
  // The array is unchanged everywhere.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(OneShot(port_, std::to_string(i) + "-1-"),
              "String " + std::to_string(i) + ": the initial value");
  }
  const std::string out = StopServer();
  EXPECT_NE(out.find("errors=11 "), std::string::npos) << out;
}

TEST_P(ServerTest, HalfClosedShortFrameIsAFrame) {
  StartServer(10);
  TestConnection c(port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.SendBytes("3-1-"));  // as `printf '3-1-' | nc -N` does
  c.HalfClose();
  EXPECT_EQ(c.ReadReply(), "String 3: the initial value");
  EXPECT_TRUE(c.WaitClosed(2000));
  StopServer();
}

TEST_P(ServerTest, IdleAndStalledClientsAreDropped) {
  StartServer(10, {"--idle-timeout-ms", "300"});
  TestConnection idle(port_);
  TestConnection stalled(port_);
  ASSERT_TRUE(idle.ok() && stalled.ok());
  ASSERT_TRUE(stalled.SendBytes("3-1-"));  // part of a frame, no half-close
  // Each is dropped by its deadline (the waits of 30 s only stop a hang: neither client
  // would ever end by itself).
  EXPECT_TRUE(idle.WaitClosed(30'000));
  const std::string reply = stalled.ReadReply(30'000);
  EXPECT_EQ(reply.rfind("ERROR incomplete frame: 4 of 100 bytes", 0), 0u) << reply;
  EXPECT_TRUE(stalled.WaitClosed(30'000));
  EXPECT_EQ(OneShot(port_, "2-1-"), "String 2: the initial value");
  StopServer();
}

TEST_P(ServerTest, ClientLeavingBeforeTheReplyDoesNotHurt) {
  StartServer(10);
  for (int i = 0; i < 50; ++i) {
    TestConnection c(port_);
    ASSERT_TRUE(c.ok());
    c.SendRequest("5-0-written by a client that left");
  }  // closed without reading
  TestConnection reset(port_);
  ASSERT_TRUE(reset.ok());
  reset.SendRequest("6-1-");
  linger l{1, 0};  // close with RST
  setsockopt(reset.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(OneShot(port_, "5-1-"), "written by a client that left");
  StopServer();
}

TEST_P(ServerTest, SigtermWithOpenConnectionsExitsPromptly) {
  StartServer(10);
  std::vector<std::unique_ptr<TestConnection>> open;
  for (int i = 0; i < 20; ++i) {
    open.push_back(std::make_unique<TestConnection>(port_));
    ASSERT_TRUE(open.back()->ok());
  }
  ASSERT_TRUE(open[0]->SendRequest("1-0-before stop"));
  EXPECT_EQ(open[0]->ReadReply(), "before stop");
  std::string out;
  // Promptly: the server gives its drain 800 ms and counts a connection still open after
  // that as unfinished. The test asserts none was, and the exit; the clock is not asserted
  // (30 s only stops a hang).
  EXPECT_EQ(server_.Stop(SIGTERM, 30'000, &out), 0) << out;
  EXPECT_NE(out.find("summary requests=1 errors=0 "), std::string::npos) << out;
  EXPECT_NE(out.find("unfinished_connections=0"), std::string::npos) << out;
}

TEST_P(ServerTest, BadArgumentsExitTwoWithOneLine) {
  const std::string bin = BinaryPath(Bin());
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{},
                                             {"0", "127.0.0.1", "3000"},
                                             {"10000001", "127.0.0.1", "3000"},
                                             {"ten", "127.0.0.1", "3000"},
                                             {"10", "localhost", "3000"},
                                             {"10", "300.1.1.1", "3000"},
                                             {"10", "127.0.0.1", "0"},
                                             {"10", "127.0.0.1", "65536"},
                                             {"10", "127.0.0.1", "3000", "--delay-us", "-1"},
                                             {"10", "127.0.0.1", "3000", "--bogus"}}) {
    std::string out;
    EXPECT_EQ(RunCommand(bin, args, &out, 10'000), 2) << out;
    EXPECT_NE(out.find(": error: "), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  }
  std::string help;
  EXPECT_EQ(RunCommand(bin, {"--help"}, &help, 10'000), 0);
  EXPECT_NE(help.find("--delay-us"), std::string::npos);
}

// A frame still incomplete when the server is told to stop was cut
// off by the shutdown, not by the peer: it must be dropped (not applied, not
// counted, not answered as a success). Only the peer's own half-close makes a
// short frame (HalfClosedShortFrameIsAFrame).
TEST_P(ServerTest, FrameCutOffByShutdownIsDropped) {
  StartServer(10, {"--batch", "1"});
  TestConnection c(port_);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.SendBytes("3-0-cut off by shutdown"));          // no half-close
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // server has it
  std::string out;
  EXPECT_EQ(server_.Stop(SIGTERM, 3000, &out), 0) << out;
  EXPECT_EQ(c.ReadReply(2000), "<closed>");  // no reply at all
  EXPECT_NE(out.find("summary requests=0 errors=0 "), std::string::npos) << out;
  EXPECT_NE(out.find("frames_cut_by_shutdown=1"), std::string::npos) << out;
  // With --batch 1 a recorded request would have written a timing line.
  EXPECT_EQ(Slurp(dir_ / "server_output_time_aggregated"), "");
}

// SIGHUP (a closed terminal) is a graceful stop like SIGTERM and SIGINT.
TEST_P(ServerTest, SighupAndSigintStopGracefullyWithTheSummary) {
  for (const int sig : {SIGHUP, SIGINT}) {
    SCOPED_TRACE(sig);
    const uint16_t port = FreePortPair();
    ServerProcess server;
    std::string out;
    std::vector<std::string> args{"10", "127.0.0.1", std::to_string(port)};
    for (const std::string& a : IoArgs()) args.push_back(a);
    ASSERT_TRUE(server.Start(BinaryPath(Bin()), args, dir_.string(), &out)) << out;
    EXPECT_EQ(OneShot(port, "1-1-"), "String 1: the initial value");
    EXPECT_EQ(server.Stop(sig, 3000, &out), 0) << out;
    EXPECT_NE(out.find("summary requests=1 errors=0 "), std::string::npos) << out;
  }
}

// A timing file that is not a regular file is refused at once (opening a FIFO
// for writing would block start-up, and SIGTERM with it).
TEST_P(ServerTest, NonRegularTimingFileIsRefusedWithoutBlocking) {
  const std::filesystem::path fifo = dir_ / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [option, path, kind] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--time-file", fifo.string(), "FIFO"},
           {"--time-file", dir_.string(), "directory"},
           {"--trace", fifo.string(), "FIFO"},
           {"--time-file", (dir_ / "no" / "such").string(), "No such file"}}) {
    SCOPED_TRACE(option + " " + path);
    std::string out;
    // Refused before anything opens it: a server blocked on the FIFO is killed at 30 s (-1).
    EXPECT_EQ(RunCommand(BinaryPath(Bin()), {"10", "127.0.0.1", "1", option, path}, &out, 30'000),
              2)
        << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_NE(out.find(option + " '" + path + "'"), std::string::npos) << out;
    EXPECT_NE(out.find(kind), std::string::npos) << out;
  }
}

TEST_P(ServerTest, AddressInUseIsOneLineAndExitOne) {
  StartServer(10);
  std::string out;
  EXPECT_EQ(RunCommand(BinaryPath(Bin()), {"10", "127.0.0.1", std::to_string(port_)}, &out, 10'000),
            1);
  EXPECT_NE(out.find("Address already in use"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  StopServer();
}

TEST_P(ServerTest, ServesIpv6Loopback) {
  port_ = FreePortPair();
  std::string out;
  std::vector<std::string> args{"10", "::1", std::to_string(port_), "--no-twin"};
  for (const std::string& a : IoArgs()) args.push_back(a);
  ASSERT_TRUE(server_.Start(BinaryPath(Bin()), args, dir_.string(), &out)) << out;
  TestConnection c(port_, "::1");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.SendRequest("9-1-"));
  EXPECT_EQ(c.ReadReply(), "String 9: the initial value");
  StopServer();
}

// On a full disk every timing line is whole or absent. A small
// tmpfs is filled up while the server writes one line per request (--batch
// 1); the lines that do not fit are counted (timing_lines_lost=), one that
// fits only in part is cut back off, and once space is free again lines are
// written as before. Needs root (mount); skipped otherwise.
TEST(TimingFile, FullDiskLosesWholeLinesOnlyAndCountsThem) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("lockbench_fulldisk_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  if (mount("lockbench", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") != 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "cannot mount tmpfs: " << std::strerror(errno);
  }
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      umount2(dir.c_str(), MNT_DETACH);
      std::filesystem::remove_all(dir);
    }
  } cleanup{dir};
  const std::filesystem::path times = dir / "times";
  const uint16_t port = FreePortPair();
  ASSERT_NE(port, 0);
  ServerProcess server;
  std::string out;
  ASSERT_TRUE(server.Start(BinaryPath("main4"),
                           {"10", "127.0.0.1", std::to_string(port), "--no-twin", "--delay-us", "0",
                            "--batch", "1", "--time-file", times.string()},
                           "/tmp", &out))
      << out;
  TestConnection c(port);
  ASSERT_TRUE(c.ok());
  auto requests = [&c](int count) {
    for (int i = 0; i < count; ++i) {
      if (!c.SendRequest(std::to_string(i % 10) + "-1-")) return false;
      if (IsErrorOrEmpty(c.ReadReply())) return false;
    }
    return true;
  };
  ASSERT_TRUE(requests(3));  // 3 lines of 13 bytes: the file has one page
  // Fill the rest of the filesystem.
  {
    std::FILE* filler = std::fopen((dir / "filler").c_str(), "w");
    ASSERT_NE(filler, nullptr);
    const std::string block(4096, 'x');
    while (std::fwrite(block.data(), 1, block.size(), filler) == block.size() &&
           std::fflush(filler) == 0) {
    }
    std::fclose(filler);
  }
  // 4096 / 13: the page holds 315 lines, the 316th fits only in part.
  ASSERT_TRUE(requests(400));
  std::filesystem::remove(dir / "filler");
  ASSERT_TRUE(requests(5));
  EXPECT_EQ(server.Stop(SIGTERM, 3000, &out), 0) << out;

  const std::string text = Slurp(times);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::size_t lines = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line); ++lines) {
    ASSERT_TRUE(testing_support::IsPrintfE(line)) << "line " << lines << ": '" << line << "'";
  }
  const std::string key = "timing_lines_lost=";
  const std::size_t at = out.find(key);
  ASSERT_NE(at, std::string::npos) << out;
  const std::size_t lost = std::stoul(out.substr(at + key.size()));
  EXPECT_GT(lost, 0u) << out;
  EXPECT_EQ(lines + lost, 408u) << out;
  EXPECT_NE(out.find("summary requests=408 "), std::string::npos) << out;
}

TEST(IsPrintfE, AcceptsOnlyWhatPrintfEWrites) {
  using testing_support::IsPrintfE;
  EXPECT_TRUE(IsPrintfE("8.531204e-03"));
  EXPECT_TRUE(IsPrintfE("-1.000000e+100"));
  EXPECT_FALSE(IsPrintfE("8.53e-03"));
  EXPECT_FALSE(IsPrintfE("0.008531"));
  EXPECT_FALSE(IsPrintfE("8.531204e-03\n"));
  EXPECT_FALSE(IsPrintfE(""));
}

INSTANTIATE_TEST_SUITE_P(AllFour, ServerTest, testing::Values("main1", "main2", "main3", "main4"));

std::string ParamName(const testing::TestParamInfo<std::string>& param_info) {
  std::string name = param_info.param;
  std::replace(name.begin(), name.end(), ':', '_');
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// The parameters of every built-in I/O model (--io) but the default, from
// the I/O model table (common/io_registry.h): each under main1 and main4 (one
// lock for the array, an rwlock per string) and one of main3 and main2 in
// turn; and uring accepting one connection per operation.
std::vector<std::string> IoModelParams() {
  std::vector<std::string> params;
  std::size_t k = 0;
  for (const std::string& io : BuiltIoModelNames()) {
    if (io == DefaultIoModel().name) continue;
    for (const char* bin : {"main1", k % 2 == 0 ? "main3" : "main2", "main4"}) {
      params.push_back(std::string(bin) + ":" + io);
    }
    ++k;
  }
  if (FindIoModel("uring")->built()) params.emplace_back("main2:uring-single");
  return params;
}

// The same behaviour under every other I/O model: same core, same replies,
// deadlines, half-close and shutdown.
INSTANTIATE_TEST_SUITE_P(IoModels, ServerTest, testing::ValuesIn(IoModelParams()), ParamName);

}  // namespace
}  // namespace kv
