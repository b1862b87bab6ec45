// Unit tests for the server's defences: the bound on what an error
// reply echoes of its input, the frame deadline against slow ("slowloris")
// peers, and the refusal of connections the server will not serve.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/net.h"
#include "common/protocol.h"
#include "tests/frame_reader.h"

namespace kv {
namespace {

bool PrintableAscii(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) {
      return false;
    }
  }
  return true;
}

TEST(SanitizeBound, NeverLongerThanFourBytesPerInputBytePlusEllipsis) {
  std::mt19937 rng(420);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes(rng() % 300, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    const std::size_t max = rng() % 40;
    const std::string s = Sanitize(bytes, max);
    EXPECT_LE(s.size(), 4 * max + 3);
    EXPECT_TRUE(PrintableAscii(s)) << s;
  }
  // append, not operator+ on a temporary string: GCC at -O3 reports false -Warray-bounds
  // and -Wrestrict in operator+'s inlined copies (here with the precompiled header).
  EXPECT_EQ(Sanitize(std::string(1000, 'a'), 16), std::string(16, 'a').append("..."));
  EXPECT_EQ(Sanitize("\x01'\\", 16), "\\x01\\x27\\x5c");
}

// Every parser error, for every kind of frame, is short and printable: an
// ERROR reply echoes at most a bounded, sanitised part of the request.
TEST(SanitizeBound, ErrorRepliesEchoABoundedSanitisedPartOfTheInput) {
  std::mt19937 rng(6);
  const std::string alphabet = "0123456789--abc\xff\x01\n";
  std::size_t longest = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string frame(rng() % 101, '\0');
    for (char& c : frame) {
      c = round % 2 == 0 ? static_cast<char>(rng()) : alphabet[rng() % alphabet.size()];
    }
    Request r;
    const Status s = ParseRequest(frame, 1 + rng() % 1000, &r);
    if (s.ok()) continue;
    EXPECT_TRUE(PrintableAscii(s.message())) << s.message();
    longest = std::max(longest, s.message().size());
    Frame reply;
    FillErrorFrame(s.message(), &reply);
    EXPECT_NE(std::memchr(reply.data(), '\0', reply.size()), nullptr);
  }
  EXPECT_LE(longest, 160u);
  // The longest echo: 24 digits of an overflowing position, then "..." (the strings built
  // by append, as above).
  std::string frame(90, '9');
  frame += "-1-";
  std::string want = "pos ";
  want.append(24, '9').append("... out of range [0,10)");
  Request r;
  const Status s = ParseRequest(frame, 10, &r);
  EXPECT_EQ(s.message(), want);
}

class SocketPair : public testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0); }
  void TearDown() override {
    for (const int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  int fds_[2] = {-1, -1};
};

TEST_F(SocketPair, TrickledFrameIsCutAtTheFrameDeadline) {
  std::thread loris([this] {
    for (int i = 0; i < 30; ++i) {  // a byte every 20 ms: 600 ms for 30 bytes
      if (send(fds_[1], "x", 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  char buf[kFrameSize];
  std::size_t got = 0;
  const int64_t t0 = MonotonicNanos();
  // Idle limit 5 s, but the frame must be whole 150 ms after its first byte.
  const FrameRead r = ReadFrameBounded(fds_[0], buf, &got, t0 + 5'000'000'000, 150'000'000);
  const int64_t took = MonotonicNanos() - t0;
  loris.join();
  EXPECT_EQ(r, FrameRead::kTimeout);
  EXPECT_GT(got, 0u);
  // Cut before the trickle ended (its 30 bytes take 600 ms at least, and the idle limit
  // would have read them all): what happened, not how fast.
  EXPECT_LT(got, 30u);
  EXPECT_GE(took, 140'000'000);
}

TEST_F(SocketPair, IdlePeerTimesOutWithNothingRead) {
  char buf[kFrameSize];
  std::size_t got = 1;
  const int64_t t0 = MonotonicNanos();
  EXPECT_EQ(ReadFrameBounded(fds_[0], buf, &got, t0 + 100'000'000, 1'000'000'000),
            FrameRead::kTimeout);
  EXPECT_EQ(got, 0u);
  EXPECT_GE(MonotonicNanos() - t0, 90'000'000);
}

TEST_F(SocketPair, LateButWholeFrameIsReadInFull) {
  // First byte just before the idle deadline, the rest 150 ms later: the
  // frame deadline (300 ms from the first byte) applies, not the idle one.
  std::thread late([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    send(fds_[1], "1", 1, MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    const std::string rest(kFrameSize - 1, 'y');
    send(fds_[1], rest.data(), rest.size(), MSG_NOSIGNAL);
  });
  char buf[kFrameSize];
  std::size_t got = 0;
  const FrameRead r =
      ReadFrameBounded(fds_[0], buf, &got, MonotonicNanos() + 120'000'000, 300'000'000);
  late.join();
  EXPECT_EQ(r, FrameRead::kFrame);
  EXPECT_EQ(got, kFrameSize);
}

TEST_F(SocketPair, RefusedPeerGetsTheBusyReplyThenEof) {
  const std::string request(kFrameSize, 'r');
  ASSERT_EQ(send(fds_[1], request.data(), request.size(), MSG_NOSIGNAL), 100);
  RefuseConnection(fds_[0], "server busy: test");
  fds_[0] = -1;  // closed by RefuseConnection
  char buf[kFrameSize];
  std::size_t got = 0;
  ASSERT_EQ(ReadFrameBounded(fds_[1], buf, &got, MonotonicNanos() + 1'000'000'000, 1'000'000'000),
            FrameRead::kFrame);
  EXPECT_STREQ(buf, "ERROR server busy: test");
  EXPECT_EQ(ReadFrameBounded(fds_[1], buf, &got, MonotonicNanos() + 1'000'000'000, 1'000'000'000),
            FrameRead::kClosed);
}

}  // namespace
}  // namespace kv
