// The connection loop of every I/O model over a socketpair, with a real
// RequestHandler and store: keep-alive, pipelining, split frames, invalid
// frames, half-close, the stop and the deadlines.
#include <gtest/gtest.h>
#include <poll.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "common/artificial_delay.h"
#include "common/clock.h"
#include "common/connection.h"
#include "common/io_model_testing.h"
#include "common/protocol.h"
#include "common/request_handler.h"
#include "common/store_mutex_per_slot.h"
#include "common/thread_per_connection.h"
#include "common/unique_fd.h"

namespace kv {
namespace {

constexpr std::size_t kSlots = 10;

// What a wait for something that must happen allows before the test fails: it only stops a
// hang. The tests assert what happened, never how fast (a loaded machine is slow).
constexpr int kHangMs = 10'000;
constexpr int64_t kHangNs = int64_t{kHangMs} * 1'000'000;

// No deadline a loaded machine could reach: for the tests that are not about deadlines.
ConnectionLimits NoDeadlines() {
  ConnectionLimits limits;
  limits.idle_timeout_ns = 3'600'000'000'000;
  limits.frame_timeout_ns = 3'600'000'000'000;
  limits.write_timeout_ns = 3'600'000'000'000;
  return limits;
}

// Short deadlines, for the tests of the deadlines themselves (which wait for their effect
// and assert only that it did not come early).
ConnectionLimits ShortLimits() {
  ConnectionLimits limits;
  limits.idle_timeout_ns = 2'000'000'000;
  limits.frame_timeout_ns = 100'000'000;
  limits.write_timeout_ns = 100'000'000;
  return limits;
}

std::string RequestBytes(uint64_t pos, bool is_read, std::string_view text) {
  Frame f;
  FillRequestFrame(pos, is_read, text, &f);
  return std::string(f.data(), f.size());
}

void SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t r = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ASSERT_GT(r, 0) << "send: " << std::strerror(errno);
    bytes.remove_prefix(static_cast<std::size_t>(r));
  }
}

// Reads until `want` bytes, EOF or kHangMs. Returns what came.
std::string RecvUpTo(int fd, std::size_t want) {
  std::string got;
  const int64_t deadline = MonotonicNanos() + kHangNs;
  char buf[4096];
  while (got.size() < want) {
    const int64_t left_ms = (deadline - MonotonicNanos()) / 1'000'000;
    pollfd p{fd, POLLIN, 0};
    if (left_ms <= 0 || poll(&p, 1, static_cast<int>(left_ms)) <= 0) break;
    const ssize_t r = recv(fd, buf, std::min(sizeof buf, want - got.size()), 0);
    if (r <= 0) break;
    got.append(buf, static_cast<std::size_t>(r));
  }
  return got;
}

// "v<i>": a value per request (std::string's operator+ on a temporary makes
// GCC 12 warn falsely, -Wrestrict).
std::string Value(int i) {
  std::string v = "v";
  v += std::to_string(i);
  return v;
}

// The text of reply frame i in `bytes`.
std::string ReplyText(const std::string& bytes, std::size_t i) {
  return std::string(FrameText(std::string_view(bytes).substr(i * kFrameSize, kFrameSize)));
}

// True if the peer closes (EOF) with nothing else to read (false after kHangMs).
bool Closes(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, kHangMs) <= 0) return false;
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

// True once the peer has read everything sent on `fd` (a socketpair: SIOCOUTQ counts the
// bytes it has not read yet); false after kHangMs.
bool PeerHasRead(int fd) {
  const int64_t deadline = MonotonicNanos() + kHangNs;
  int unread = -1;
  while (ioctl(fd, SIOCOUTQ, &unread) == 0 && unread > 0 && MonotonicNanos() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return unread == 0;
}

class ConnectionTest : public testing::TestWithParam<Model> {
 protected:
  ConnectionTest()
      : delay_(std::chrono::microseconds(0)),
        store_(kSlots, &delay_),
        handler_(&store_, nullptr, &counters_) {}

  ~ConnectionTest() override {
    if (model_ != nullptr) model_->Drain(MonotonicNanos() + kHangNs);
  }

  // Starts the model under test with `limits` and hands it the server end of
  // a fresh socketpair; returns the client end.
  UniqueFd Connect(const ConnectionLimits& limits = NoDeadlines()) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    if (model_ == nullptr) model_ = MakeModel(GetParam(), &handler_, limits);
    EXPECT_TRUE(model_->Dispatch(sv[1]));
    return UniqueFd(sv[0]);
  }

  ArtificialDelay delay_;
  MutexPerSlotStore store_;
  RequestCounters counters_;
  RequestHandler handler_;
  std::unique_ptr<IoModel> model_;
};

TEST_P(ConnectionTest, KeepAliveRequestsAnsweredInOrder) {
  UniqueFd c = Connect();
  for (int i = 0; i < 50; ++i) {
    const std::string text = Value(i);
    SendAll(c.get(), RequestBytes(i % kSlots, false, text));
    EXPECT_EQ(ReplyText(RecvUpTo(c.get(), kFrameSize), 0), text);
    SendAll(c.get(), RequestBytes(i % kSlots, true, ""));
    EXPECT_EQ(ReplyText(RecvUpTo(c.get(), kFrameSize), 0), text);
  }
  EXPECT_EQ(counters_.frames.load(), 100u);
}

TEST_P(ConnectionTest, CloseAfterReplyClosesOnceTheReplyHasLeft) {
  ConnectionLimits limits = NoDeadlines();
  limits.close_after_reply = true;
  for (int i = 0; i < 20; ++i) {  // every connection the same (records reused)
    UniqueFd c = Connect(limits);
    SendAll(c.get(), RequestBytes(3, false, Value(i)));
    EXPECT_EQ(ReplyText(RecvUpTo(c.get(), kFrameSize), 0), Value(i));
    EXPECT_TRUE(Closes(c.get())) << "connection " << i;
  }
  EXPECT_EQ(counters_.frames.load(), 20u);
}

TEST_P(ConnectionTest, FramesInOneWriteAnsweredInOrder) {
  UniqueFd c = Connect();
  std::string batch;
  constexpr int kFrames = 40;  // more than one batch of the core (kBatch)
  for (int i = 0; i < kFrames; ++i) {
    batch += RequestBytes(1, false, Value(i));
  }
  SendAll(c.get(), batch);
  const std::string replies = RecvUpTo(c.get(), kFrames * kFrameSize);
  ASSERT_EQ(replies.size(), kFrames * kFrameSize);
  for (int i = 0; i < kFrames; ++i) {
    EXPECT_EQ(ReplyText(replies, static_cast<std::size_t>(i)), Value(i));
  }
}

TEST_P(ConnectionTest, SplitFrameIsOneRequest) {
  UniqueFd c = Connect();
  const std::string frame = RequestBytes(2, false, "split");
  SendAll(c.get(), frame.substr(0, 30));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  SendAll(c.get(), frame.substr(30, 50));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  SendAll(c.get(), frame.substr(80));
  EXPECT_EQ(ReplyText(RecvUpTo(c.get(), kFrameSize), 0), "split");
  // The connection is still in step: the next frame is answered too.
  SendAll(c.get(), RequestBytes(2, true, ""));
  EXPECT_EQ(ReplyText(RecvUpTo(c.get(), kFrameSize), 0), "split");
}

TEST_P(ConnectionTest, InvalidFrameGetsErrorAndConnectionGoesOn) {
  UniqueFd c = Connect();
  std::string bad(kFrameSize, '\0');
  bad.replace(0, 6, "999-1-");
  SendAll(c.get(), bad);
  const std::string reply = ReplyText(RecvUpTo(c.get(), kFrameSize), 0);
  EXPECT_TRUE(IsErrorReply(reply)) << reply;
  EXPECT_NE(reply.find("out of range"), std::string::npos) << reply;
  SendAll(c.get(), RequestBytes(3, false, "after"));
  EXPECT_EQ(ReplyText(RecvUpTo(c.get(), kFrameSize), 0), "after");
  EXPECT_EQ(counters_.rejected.load(), 1u);
}

TEST_P(ConnectionTest, HalfCloseMidFrameIsAnsweredThenClosed) {
  UniqueFd c = Connect();
  SendAll(c.get(), "4-0-short");
  ASSERT_EQ(shutdown(c.get(), SHUT_WR), 0);
  EXPECT_EQ(ReplyText(RecvUpTo(c.get(), kFrameSize), 0), "short");
  EXPECT_TRUE(Closes(c.get()));
}

TEST_P(ConnectionTest, EofBetweenFramesClosesSilently) {
  UniqueFd c = Connect();
  SendAll(c.get(), RequestBytes(4, true, ""));
  EXPECT_EQ(RecvUpTo(c.get(), kFrameSize).size(), kFrameSize);
  ASSERT_EQ(shutdown(c.get(), SHUT_WR), 0);
  EXPECT_TRUE(Closes(c.get()));
  EXPECT_EQ(model_->Drain(MonotonicNanos() + kHangNs), 0u);
}

// The stop, not a deadline, ends the connection: there is none within the hour, and Drain
// gives up (returning the connections still open) long before.
TEST_P(ConnectionTest, StopEndsIdleConnection) {
  UniqueFd c = Connect();
  SendAll(c.get(), RequestBytes(5, true, ""));
  EXPECT_EQ(RecvUpTo(c.get(), kFrameSize).size(), kFrameSize);
  EXPECT_EQ(model_->Drain(MonotonicNanos() + kHangNs), 0u);
  EXPECT_TRUE(Closes(c.get()));
  EXPECT_EQ(counters_.cut_by_shutdown.load(), 0u);
}

TEST_P(ConnectionTest, StopDropsUnfinishedFrame) {
  UniqueFd c = Connect();
  SendAll(c.get(), "6-0-never");
  ASSERT_TRUE(PeerHasRead(c.get()));  // the server holds the unfinished frame
  EXPECT_EQ(model_->Drain(MonotonicNanos() + kHangNs), 0u);
  EXPECT_TRUE(Closes(c.get()));  // no reply: closed
  EXPECT_EQ(counters_.cut_by_shutdown.load(), 1u);
  EXPECT_EQ(counters_.frames.load(), 0u);
}

TEST_P(ConnectionTest, IdleDeadlineClosesSilently) {
  ConnectionLimits limits = ShortLimits();
  limits.idle_timeout_ns = 80'000'000;
  UniqueFd c = Connect(limits);
  // Lower bounds count from before the request: the server's idleness starts after it, while
  // a loaded machine may hand the test the reply only when the deadline has passed already.
  const int64_t start = MonotonicNanos();
  SendAll(c.get(), RequestBytes(7, true, ""));
  EXPECT_EQ(RecvUpTo(c.get(), kFrameSize).size(), kFrameSize);
  EXPECT_TRUE(Closes(c.get()));
  EXPECT_GE(MonotonicNanos() - start, 60'000'000);  // not before the deadline
}

TEST_P(ConnectionTest, FrameDeadlineAnswersErrorAndCloses) {
  // Frame timeout 100 ms; the lower bound counts from before the first byte, as above.
  UniqueFd c = Connect(ShortLimits());
  const int64_t start = MonotonicNanos();
  SendAll(c.get(), "8-0-tri");
  const std::string reply = ReplyText(RecvUpTo(c.get(), kFrameSize), 0);
  EXPECT_EQ(reply.rfind("ERROR incomplete frame: 7 of 100 bytes within 100 ms", 0), 0u) << reply;
  EXPECT_GE(MonotonicNanos() - start, 80'000'000);
  EXPECT_TRUE(Closes(c.get()));
  EXPECT_EQ(counters_.rejected.load(), 1u);
}

TEST_P(ConnectionTest, WriteDeadlineClosesAReaderThatNeverReads) {
  UniqueFd c = Connect(ShortLimits());  // write timeout 100 ms
  // Pipeline requests without reading a reply until the server's writes
  // block; then it must give up on us within the write deadline.
  const std::string frame = RequestBytes(9, true, "");
  std::string batch;
  for (int i = 0; i < 64; ++i) batch += frame;
  std::size_t sent_frames = 0;
  const int64_t until = MonotonicNanos() + 2'000'000'000;
  while (MonotonicNanos() < until) {
    const ssize_t r = send(c.get(), batch.data(), batch.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{c.get(), POLLOUT, 0};
      if (poll(&p, 1, 300) == 0) break;  // the server stopped reading
      continue;
    }
    if (r <= 0) break;  // the server closed already
    sent_frames += static_cast<std::size_t>(r) / kFrameSize;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Read what was answered: the stream must end (EOF) with fewer replies.
  std::size_t got = 0;
  char buf[65536];
  for (;;) {
    pollfd p{c.get(), POLLIN, 0};
    ASSERT_GT(poll(&p, 1, kHangMs), 0) << "no EOF: the server still holds the connection";
    const ssize_t r = recv(c.get(), buf, sizeof buf, 0);
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  EXPECT_LT(got / kFrameSize, sent_frames);
}

INSTANTIATE_TEST_SUITE_P(AllModels, ConnectionTest, AllModels(), ModelName);

// The blocking driver on its own: it returns the number of frames answered.
TEST(ServeConnectionTest, ReturnsFramesAnswered) {
  ArtificialDelay delay(std::chrono::microseconds(0));
  MutexPerSlotStore store(kSlots, &delay);
  RequestCounters counters;
  RequestHandler handler(&store, nullptr, &counters);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd client(sv[0]);
  UniqueFd server(sv[1]);
  uint64_t answered = 0;
  std::thread t([&] { answered = ServeConnection(server.get(), &handler, NoDeadlines()); });
  std::string three;
  for (int i = 0; i < 3; ++i) three += RequestBytes(0, true, "");
  SendAll(client.get(), three);
  EXPECT_EQ(RecvUpTo(client.get(), 3 * kFrameSize).size(), 3 * kFrameSize);
  ASSERT_EQ(shutdown(client.get(), SHUT_WR), 0);
  t.join();
  EXPECT_EQ(answered, 3u);
}

}  // namespace
}  // namespace kv
