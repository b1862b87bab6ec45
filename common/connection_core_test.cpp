// ConnectionCore, without sockets: table-driven scripts of (time, event)
// pairs, with the core's answers written down as a transcript. Time is an
// argument, so deadlines are tested exactly, in no time.
#include "common/connection_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace kv {
namespace {

constexpr int64_t kMs = 1'000'000;

std::string F(const std::string& text) {  // one whole 100-byte frame
  std::string f = text;
  f.resize(kFrameSize, '\0');
  return f;
}

struct Event {
  int64_t t_ms;
  char op;  // 'b' bytes arrive, 'e' peer half-closes, 's' server stops,
            // 'w' the peer stops reading (writes block), 'p' time passes
  std::string bytes = "";
};

// Drives a core the way a socket driver would (a read takes the bytes that
// arrived, then sees the half-close, then the stop) and writes what happens:
//   handle:<text>  reject:<message>  write:<frames>  wait-write  close[ cut]
class Harness {
 public:
  explicit Harness(const ConnectionLimits& limits = Limits()) : core_(limits, 0) {}
  static ConnectionLimits Limits() {
    ConnectionLimits l;
    l.idle_timeout_ns = 5000 * kMs;
    l.frame_timeout_ns = 1000 * kMs;
    l.write_timeout_ns = 5000 * kMs;
    return l;
  }

  std::string Run(const std::vector<Event>& events) {
    for (std::size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      switch (e.op) {
        case 'b':
          pending_ += e.bytes;
          break;
        case 'e':
          eof_pending_ = true;
          break;
        case 's':
          stop_pending_ = true;
          break;
        case 'w':
          write_blocked_ = true;
          break;
        default:
          break;
      }
      // Events at the same instant arrive together.
      if (i + 1 < events.size() && events[i + 1].t_ms == e.t_ms) continue;
      Pump(e.t_ms * kMs);
    }
    std::string out;
    for (const std::string& s : log_) out += (out.empty() ? "" : "|") + s;
    return out;
  }

  const ConnectionCore& core() const { return core_; }

 private:
  void Pump(int64_t now) {
    if (closed_) return;
    for (;;) {
      switch (core_.Next(now)) {
        case ConnectionCore::Action::kHandle:
          log_.push_back("handle:" + std::string(FrameText(core_.frame())));
          FillFrame("ok", core_.reply_slot());
          core_.FrameDone();
          break;
        case ConnectionCore::Action::kReject:
          log_.push_back("reject:" + std::string(core_.reject_message()));
          FillErrorFrame(core_.reject_message(), core_.reply_slot());
          core_.FrameDone();
          break;
        case ConnectionCore::Action::kWrite:
          if (write_blocked_) {
            if (log_.empty() || log_.back() != "wait-write") {
              log_.push_back("wait-write");
            }
            return;
          }
          log_.push_back("write:" + std::to_string(core_.out_size() / kFrameSize));
          core_.OnWritten(core_.out_size(), now);
          break;
        case ConnectionCore::Action::kRead:
          if (!pending_.empty()) {  // a read takes what fits
            const std::size_t n = std::min(pending_.size(), core_.in_space_size());
            std::copy_n(pending_.data(), n, core_.in_space());
            pending_.erase(0, n);
            core_.OnBytes(n, now);
            break;
          }
          if (eof_pending_) {
            eof_pending_ = false;
            core_.OnEof(now);
            break;
          }
          if (stop_pending_ && !core_.stopping()) {  // as a driver's wait
            core_.OnStop(now);                       // sees the stop fd
            break;
          }
          return;  // wait until core_.deadline()
        case ConnectionCore::Action::kClose:
          log_.push_back(core_.cut_by_shutdown() ? "close cut" : "close");
          closed_ = true;
          return;
      }
    }
  }

  ConnectionCore core_;
  std::string pending_;
  bool eof_pending_ = false;
  bool stop_pending_ = false;
  bool write_blocked_ = false;
  bool closed_ = false;
  std::vector<std::string> log_;
};

struct Case {
  const char* name;
  std::vector<Event> events;
  std::string transcript;
};

std::string Repeat(const std::string& item, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += (i ? "|" : "") + item;
  return out;
}

std::string Frames(int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += F("1-1-");
  return out;
}

const char kStalled4[] =
    "reject:incomplete frame: 4 of 100 bytes within 1000 ms of its first byte; "
    "closing";

TEST(ConnectionCore, CloseAfterReplyAnswersOneFrameThenCloses) {
  ConnectionLimits limits = Harness::Limits();
  limits.close_after_reply = true;
  Harness one(limits);
  EXPECT_EQ(one.Run({{0, 'b', F("1-1-")}}), "handle:1-1-|write:1|close");
  Harness pipelined(limits);
  EXPECT_EQ(pipelined.Run({{0, 'b', F("1-1-") + F("2-1-")}}), "handle:1-1-|write:1|close");
  Harness blocked(limits);  // the close waits for the reply to leave
  EXPECT_EQ(blocked.Run({{0, 'w'}, {0, 'b', F("1-1-")}, {10, 'p'}}), "handle:1-1-|wait-write");
}

TEST(ConnectionCore, Scripts) {
  const std::vector<Case> cases = {
      {"one frame, then idle until the idle deadline",
       {{0, 'b', F("3-1-")}, {4999, 'p'}, {5000, 'p'}},
       "handle:3-1-|write:1|close"},
      {"idle from the start", {{4999, 'p'}, {5000, 'p'}}, "close"},
      {"idle clock restarts when a reply leaves",
       {{0, 'b', F("1-1-")}, {4999, 'b', F("2-1-")}, {9998, 'p'}, {9999, 'p'}},
       "handle:1-1-|write:1|handle:2-1-|write:1|close"},
      {"half-closed short frame is a frame",
       {{0, 'b', "3-1-"}, {10, 'e'}},
       "handle:3-1-|write:1|close"},
      {"half-close with nothing pending just closes", {{0, 'e'}}, "close"},
      {"whole frame plus a short one, then half-close",
       {{0, 'b', F("1-1-") + "2-1-"}, {0, 'e'}},
       "handle:1-1-|write:1|handle:2-1-|write:1|close"},
      {"stalled frame: rejected at the frame deadline, then closed",
       {{0, 'b', "3-1-"}, {999, 'p'}, {1000, 'p'}},
       std::string(kStalled4) + "|write:1|close"},
      {"trickle cannot stretch the frame deadline",
       {{0, 'b', "3"}, {400, 'b', "-"}, {800, 'b', "1"}, {999, 'b', "-"}, {1000, 'p'}},
       std::string(kStalled4) + "|write:1|close"},
      {"frame deadline counts from the first byte of the NEXT frame",
       {{0, 'b', std::string(60, 'x')},
        {500, 'b', std::string(40, 'x') + "1-1-xxxxxx"},
        {1400, 'p'},
        {1500, 'p'}},
       "handle:" + std::string(100, 'x') +
           "|write:1|reject:incomplete frame: 10 of 100 bytes within 1000 ms "
           "of its first byte; closing|write:1|close"},
      {"pipelined frames: one write for the batch",
       {{0, 'b', F("1-1-") + F("2-1-") + F("3-1-")}},
       "handle:1-1-|handle:2-1-|handle:3-1-|write:3"},
      {"more frames than a batch: 16, then the rest",
       {{0, 'b', Frames(20)}},
       Repeat("handle:1-1-", 16) + "|write:16|" + Repeat("handle:1-1-", 4) + "|write:4"},
      {"stop while idle", {{0, 's'}}, "close"},
      {"stop cuts an unfinished frame: dropped, not answered",
       {{0, 'b', "3-0-cut"}, {10, 's'}},
       "close cut"},
      {"stop: a whole frame already received is still answered",
       {{0, 'b', F("1-1-") + "2-0-x"}, {0, 's'}},
       "handle:1-1-|write:1|close cut"},
      {"half-close before the stop still makes a short frame",
       {{0, 'b', "3-1-"}, {5, 'e'}, {5, 's'}},
       "handle:3-1-|write:1|close"},
      {"a reply the peer does not take: closed at the write deadline",
       {{0, 'w'}, {0, 'b', F("1-1-")}, {4999, 'p'}, {5000, 'p'}},
       "handle:1-1-|wait-write|close"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Harness h;
    EXPECT_EQ(h.Run(c.events), c.transcript);
  }
}

// A loop that hands a frame to a worker lets the worker ask again.
TEST(ConnectionCore, NextIsIdempotentUntilTheDriverActs) {
  ConnectionCore core(Harness::Limits(), 0);
  std::copy_n("3-1-", 4, core.in_space());
  core.OnBytes(4, 0);
  ASSERT_EQ(core.Next(1000 * kMs), ConnectionCore::Action::kReject);
  ASSERT_EQ(core.Next(1001 * kMs), ConnectionCore::Action::kReject);
  FillErrorFrame(core.reject_message(), core.reply_slot());
  core.FrameDone();
  ASSERT_EQ(core.Next(1002 * kMs), ConnectionCore::Action::kWrite);
  const std::string frame = F("1-1-");
  ConnectionCore other(Harness::Limits(), 0);
  std::copy_n(frame.data(), frame.size(), other.in_space());
  other.OnBytes(frame.size(), 0);
  ASSERT_EQ(other.Next(0), ConnectionCore::Action::kHandle);
  ASSERT_EQ(other.Next(1), ConnectionCore::Action::kHandle);
  EXPECT_EQ(FrameText(other.frame()), "1-1-");
}

TEST(ConnectionCore, DeadlinesAreReportedForTheDriversWait) {
  ConnectionCore core(Harness::Limits(), 100 * kMs);
  ASSERT_EQ(core.Next(100 * kMs), ConnectionCore::Action::kRead);
  EXPECT_EQ(core.deadline(), 5100 * kMs);  // idle
  std::copy_n("3-1-", 4, core.in_space());
  core.OnBytes(4, 200 * kMs);
  ASSERT_EQ(core.Next(200 * kMs), ConnectionCore::Action::kRead);
  EXPECT_EQ(core.deadline(), 1200 * kMs);  // frame
  std::string rest(96, '\0');
  std::copy_n(rest.data(), rest.size(), core.in_space());
  core.OnBytes(rest.size(), 300 * kMs);
  ASSERT_EQ(core.Next(300 * kMs), ConnectionCore::Action::kHandle);
  EXPECT_EQ(core.frame_received_ns(), 300 * kMs);
  FillFrame("ok", core.reply_slot());
  core.FrameDone();
  ASSERT_EQ(core.Next(310 * kMs), ConnectionCore::Action::kWrite);
  EXPECT_EQ(core.deadline(), 5310 * kMs);  // write
  core.OnWritten(40, 320 * kMs);           // a partial send
  ASSERT_EQ(core.Next(320 * kMs), ConnectionCore::Action::kWrite);
  EXPECT_EQ(core.out_size(), 60u);
  core.OnWritten(60, 330 * kMs);
  ASSERT_EQ(core.Next(330 * kMs), ConnectionCore::Action::kRead);
  EXPECT_EQ(core.deadline(), 5330 * kMs);  // idle again, from the reply
  EXPECT_EQ(core.answered(), 1u);
}

}  // namespace
}  // namespace kv
