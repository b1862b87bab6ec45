// The shared socket steps (conn_io.h) on a real Unix socketpair: what one
// recv or send did, and what the core was told.
#include "common/conn_io.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/clock.h"
#include "common/connection_core.h"
#include "common/unique_fd.h"

namespace kv {
namespace {

using Action = ConnectionCore::Action;

std::string Frame100(const std::string& text) {
  std::string f = text;
  f.resize(kFrameSize, '\0');
  return f;
}

class ConnIoTest : public testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0) << std::strerror(errno);
    ours_.Reset(fds[0]);
    peer_.Reset(fds[1]);
  }
  void PeerSends(const std::string& bytes) {
    ASSERT_EQ(send(peer_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  Action Next() { return core_.Next(MonotonicNanos()); }
  IoOutcome Read(bool* emptied = nullptr) {
    return ReadStep(ours_.get(), &core_, MSG_DONTWAIT, &stop_, emptied);
  }
  // Puts one reply into the core, so that it asks to write it.
  void QueueReply(const std::string& text) {
    PeerSends(Frame100(text));
    ASSERT_EQ(Read(), IoOutcome::kProgress);
    ASSERT_EQ(Next(), Action::kHandle);
    const std::string reply = Frame100("reply to " + text);
    std::memcpy(core_.reply_slot()->data(), reply.data(), kFrameSize);
    core_.FrameDone();
    ASSERT_EQ(Next(), Action::kWrite);
  }

  UniqueFd ours_, peer_;
  StopSignal stop_;
  ConnectionCore core_{ConnectionLimits(), MonotonicNanos()};
};

TEST_F(ConnIoTest, PartialReadIsProgressAndWaitsForTheRestOfTheFrame) {
  ASSERT_EQ(Next(), Action::kRead);
  PeerSends("3-1-");
  bool emptied = false;
  EXPECT_EQ(Read(&emptied), IoOutcome::kProgress);
  EXPECT_TRUE(emptied);  // 4 bytes where a batch of frames fits
  EXPECT_EQ(Next(), Action::kRead);
  PeerSends(Frame100("3-1-").substr(4));
  EXPECT_EQ(Read(), IoOutcome::kProgress);
  ASSERT_EQ(Next(), Action::kHandle);
  EXPECT_EQ(core_.frame(), Frame100("3-1-"));
}

TEST_F(ConnIoTest, EmptySocketWouldBlockAndTellsTheCoreNothing) {
  ASSERT_EQ(Next(), Action::kRead);
  EXPECT_EQ(Read(), IoOutcome::kWouldBlock);
  EXPECT_EQ(Next(), Action::kRead);
  PeerSends("3-");  // a partial frame stays partial after a would-block
  EXPECT_EQ(Read(), IoOutcome::kProgress);
  EXPECT_EQ(Read(), IoOutcome::kWouldBlock);
  EXPECT_EQ(Next(), Action::kRead);
}

TEST_F(ConnIoTest, PeerClosedMidFrameIsAHalfCloseFrame) {
  PeerSends("3-1-");
  ASSERT_EQ(Read(), IoOutcome::kProgress);
  ASSERT_EQ(shutdown(peer_.get(), SHUT_WR), 0);
  EXPECT_EQ(Read(), IoOutcome::kPeerClosed);
  ASSERT_EQ(Next(), Action::kHandle);  // the cut frame is still a frame
  EXPECT_EQ(core_.frame(), "3-1-");
}

TEST_F(ConnIoTest, PeerClosedAfterAStopIsTheStop) {
  PeerSends("3-1-");
  ASSERT_EQ(Read(), IoOutcome::kProgress);
  stop_.Request();
  // What a stopper does to wake a blocked reader.
  ASSERT_EQ(shutdown(ours_.get(), SHUT_RD), 0);
  EXPECT_EQ(Read(), IoOutcome::kPeerClosed);
  EXPECT_EQ(Next(), Action::kClose);  // the unfinished frame is dropped
  EXPECT_TRUE(core_.cut_by_shutdown());
}

TEST_F(ConnIoTest, ResetIsAnError) {
  // A Unix socket closed with unread data resets its peer (ECONNRESET).
  ASSERT_EQ(send(ours_.get(), "x", 1, MSG_NOSIGNAL), 1);
  peer_.Reset();
  ASSERT_EQ(Next(), Action::kRead);
  EXPECT_EQ(Read(), IoOutcome::kError);
  EXPECT_EQ(Next(), Action::kClose);
}

TEST_F(ConnIoTest, WriteSendsTheRepliesAndTheCoreReadsOn) {
  QueueReply("1-1-");
  EXPECT_EQ(WriteStep(ours_.get(), &core_), IoOutcome::kProgress);
  EXPECT_EQ(Next(), Action::kRead);
  char got[kFrameSize];
  ASSERT_EQ(recv(peer_.get(), got, sizeof got, MSG_WAITALL), static_cast<ssize_t>(kFrameSize));
  EXPECT_EQ(std::string(got, kFrameSize), Frame100("reply to 1-1-"));
}

TEST_F(ConnIoTest, FullSocketWouldBlockAndKeepsTheReply) {
  QueueReply("1-1-");
  const std::string filler(4096, 'f');
  while (send(ours_.get(), filler.data(), filler.size(), MSG_NOSIGNAL | MSG_DONTWAIT) > 0) {
  }
  EXPECT_EQ(WriteStep(ours_.get(), &core_), IoOutcome::kWouldBlock);
  EXPECT_EQ(Next(), Action::kWrite);
  EXPECT_EQ(core_.out_size(), kFrameSize);
}

TEST_F(ConnIoTest, WriteToAVanishedPeerIsAnError) {
  QueueReply("1-1-");
  peer_.Reset();
  EXPECT_EQ(WriteStep(ours_.get(), &core_), IoOutcome::kError);  // EPIPE, no SIGPIPE
  EXPECT_EQ(Next(), Action::kClose);
}

}  // namespace
}  // namespace kv
