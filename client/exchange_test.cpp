// Exchange, without sockets: table-driven scripts of what a driver's system
// calls did (bytes sent and received in pieces, the peer's close, an errno,
// the time), each ending in exactly one outcome. Time is an argument, so the
// deadline is tested exactly, in no time.
#include "client/exchange.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

namespace kv {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kDeadline = 5000 * kMs;

struct Step {
  char op;    // 's' N request bytes sent, 'r' the next N reply bytes arrive,
              // 'c' the peer closes, 'e' errno N, 't' the time is N ms
  int64_t n;  // bytes, errno or milliseconds
};

// `count` steps of `op` with `n` each: a reply in pieces.
std::vector<Step> Repeat(char op, int64_t n, int count) {
  return std::vector<Step>(static_cast<std::size_t>(count), Step{op, n});
}

std::vector<Step> Join(std::vector<Step> a, const std::vector<Step>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The bytes a server sends: one frame holding `text`, then 'x' filler (so a
// reply longer than a frame has something to send).
std::string ReplyStream(const std::string& text) {
  std::string s = text;
  s.resize(kFrameSize, '\0');
  return s + std::string(200, 'x');
}

Frame Request() {
  Frame f;
  FillRequestFrame(3, true, "", &f);
  return f;
}

struct Outcome {
  bool done;
  ErrorKind kind;
};

// Runs a script against a fresh exchange of Request() with kDeadline.
Outcome RunScript(const std::string& reply_text, const std::vector<Step>& steps, Exchange* ex) {
  *ex = Exchange(Request(), kDeadline);
  const std::string stream = ReplyStream(reply_text);
  std::size_t at = 0;
  for (const Step& s : steps) {
    const auto n = static_cast<std::size_t>(s.n);
    switch (s.op) {
      case 's':
        ex->Sent(n);
        break;
      case 'r':
        ex->Received({stream.data() + at, n});
        at += n;
        break;
      case 'c':
        ex->PeerClosed();
        break;
      case 'e':
        ex->IoError(static_cast<int>(s.n));
        break;
      case 't':
        ex->Tick(s.n * kMs);
        break;
      default:
        ADD_FAILURE() << "bad op " << s.op;
    }
  }
  return {ex->done(), ex->outcome()};
}

struct Case {
  const char* name;
  std::string reply_text;
  std::vector<Step> steps;
  bool done;
  ErrorKind want;
};

const std::string kOk = "String 3: the initial value";
const std::string kErr = "ERROR pos 1200 out of range [0,1000)";
const std::vector<Step> kSent = {{'s', 100}};

std::vector<Case> Cases() {
  using K = ErrorKind;
  return {
      // A whole frame, however it is cut.
      {"frame at once", kOk, Join(kSent, {{'r', 100}}), true, K::kNone},
      {"frame in 1-byte pieces", kOk, Join(kSent, Repeat('r', 1, 100)), true, K::kNone},
      {"frame in 30+30+40", kOk, Join(kSent, {{'r', 30}, {'r', 30}, {'r', 40}}), true, K::kNone},
      {"request in 1-byte pieces", kOk, Join(Repeat('s', 1, 100), {{'r', 100}}), true, K::kNone},
      {"99 bytes: not done", kOk, Join(kSent, {{'r', 99}}), false, K::kNone},
      // More than a frame, at once or after it.
      {"150 at once", kOk, Join(kSent, {{'r', 150}}), true, K::kLongReply},
      {"101 at once", kOk, Join(kSent, {{'r', 101}}), true, K::kLongReply},
      {"100 then 50", kOk, Join(kSent, {{'r', 100}, {'r', 50}}), true, K::kLongReply},
      {"99 then 2", kOk, Join(kSent, {{'r', 99}, {'r', 2}}), true, K::kLongReply},
      {"ERROR frame then a byte", kErr, Join(kSent, {{'r', 100}, {'r', 1}}), true, K::kLongReply},
      {"150 at once from ERROR", kErr, Join(kSent, {{'r', 150}}), true, K::kLongReply},
      // The peer closes first.
      {"close at 0", kOk, Join(kSent, {{'c', 0}}), true, K::kShortReply},
      {"close at 50", kOk, Join(kSent, {{'r', 50}, {'c', 0}}), true, K::kShortReply},
      {"close at 99", kOk, Join(kSent, {{'r', 99}, {'c', 0}}), true, K::kShortReply},
      {"close while sending", kOk, {{'s', 40}, {'c', 0}}, true, K::kShortReply},
      {"close after a whole frame", kOk, Join(kSent, {{'r', 100}, {'c', 0}}), true, K::kNone},
      // An ERROR reply.
      {"ERROR frame", kErr, Join(kSent, {{'r', 100}}), true, K::kErrorReply},
      {"ERROR frame in pieces", kErr, Join(kSent, Repeat('r', 25, 4)), true, K::kErrorReply},
      {"ERROR without its space", "ERRORS are fine", Join(kSent, {{'r', 100}}), true, K::kNone},
      // The deadline.
      {"deadline passes with nothing", kOk, Join(kSent, {{'t', 5000}}), true, K::kTimeout},
      {"deadline passes at 50 bytes", kOk, Join(kSent, {{'r', 50}, {'t', 6000}}), true,
       K::kTimeout},
      {"just before the deadline", kOk, Join(kSent, {{'r', 50}, {'t', 4999}}), false, K::kNone},
      {"deadline passes while sending", kOk, {{'s', 40}, {'t', 5000}}, true, K::kTimeout},
      {"deadline after a whole frame", kOk, Join(kSent, {{'r', 100}, {'t', 9000}}), true, K::kNone},
      {"a byte after the timeout", kOk, Join(kSent, {{'t', 5000}, {'r', 1}}), true, K::kTimeout},
      // Each errno class, receiving and sending.
      {"ECONNRESET", kOk, Join(kSent, {{'e', ECONNRESET}}), true, K::kReset},
      {"EPIPE sending", kOk, {{'s', 10}, {'e', EPIPE}}, true, K::kReset},
      {"ECONNABORTED", kOk, Join(kSent, {{'e', ECONNABORTED}}), true, K::kReset},
      {"ETIMEDOUT", kOk, Join(kSent, {{'e', ETIMEDOUT}}), true, K::kTimeout},
      {"EAGAIN (socket timeout)", kOk, Join(kSent, {{'r', 20}, {'e', EAGAIN}}), true, K::kTimeout},
      {"EAGAIN sending", kOk, {{'e', EAGAIN}}, true, K::kTimeout},
      {"EWOULDBLOCK", kOk, Join(kSent, {{'e', EWOULDBLOCK}}), true, K::kTimeout},
      {"ENOBUFS", kOk, Join(kSent, {{'e', ENOBUFS}}), true, K::kOther},
      {"EBADF sending", kOk, {{'e', EBADF}}, true, K::kOther},
      {"reset after a whole frame", kOk, Join(kSent, {{'r', 100}, {'e', ECONNRESET}}), true,
       K::kNone},
      {"first failure wins", kOk, Join(kSent, {{'e', ECONNRESET}, {'c', 0}, {'t', 9000}}), true,
       K::kReset},
      // A reply that comes before the whole request left (a refusal).
      {"reply while sending", kErr, {{'s', 40}, {'r', 100}}, true, K::kErrorReply},
  };
}

TEST(ExchangeTest, EveryScriptEndsInItsOutcome) {
  for (const Case& c : Cases()) {
    Exchange ex;
    const Outcome got = RunScript(c.reply_text, c.steps, &ex);
    EXPECT_EQ(got.done, c.done) << c.name;
    EXPECT_EQ(ErrorKindName(got.kind), std::string(ErrorKindName(c.want))) << c.name;
    const bool keeps = c.done && (c.want == ErrorKind::kNone || c.want == ErrorKind::kErrorReply);
    EXPECT_EQ(ex.keeps_connection(), keeps) << c.name;
    if (got.done) {
      EXPECT_TRUE(ex.ToSend().empty()) << c.name;
    }
  }
}

TEST(ExchangeTest, TheReplyIsTheFirstFrame) {
  Exchange ex;
  RunScript(kOk, Join(kSent, Repeat('r', 7, 15)), &ex);  // 105 bytes: long, in pieces
  EXPECT_EQ(ex.outcome(), ErrorKind::kLongReply);
  EXPECT_EQ(FrameText(std::string_view(ex.reply().data(), kFrameSize)), kOk);
  RunScript(kErr, Join(kSent, {{'r', 100}}), &ex);
  EXPECT_EQ(FrameText(std::string_view(ex.reply().data(), kFrameSize)), kErr);
}

TEST(ExchangeTest, SendsTheRequestInPieces) {
  Exchange ex(Request(), kDeadline);
  const Frame request = Request();
  std::string sent;
  for (const std::size_t n : {1, 39, 60}) {
    ASSERT_GE(ex.ToSend().size(), n);
    sent.append(ex.ToSend().data(), n);
    ex.Sent(n);
  }
  EXPECT_TRUE(ex.ToSend().empty());
  EXPECT_EQ(sent, std::string(request.data(), kFrameSize));
  EXPECT_FALSE(ex.done());
}

TEST(ExchangeTest, ReceiveRoomIsWhatIsMissingPlusOne) {
  Exchange ex;
  RunScript(kOk, Join(kSent, {{'r', 0}}), &ex);
  EXPECT_EQ(ex.ReceiveRoom(), kFrameSize + 1);
  RunScript(kOk, Join(kSent, {{'r', 60}}), &ex);
  EXPECT_EQ(ex.ReceiveRoom(), 41u);
  RunScript(kOk, Join(kSent, {{'r', 100}}), &ex);
  EXPECT_EQ(ex.ReceiveRoom(), 1u);  // done: is there anything more?
}

TEST(ExchangeTest, NoExchangeYetTakesNoBytes) {
  Exchange idle;
  EXPECT_TRUE(idle.done());
  EXPECT_TRUE(idle.keeps_connection());
  EXPECT_TRUE(idle.ToSend().empty());
  idle.PeerClosed();
  EXPECT_EQ(idle.outcome(), ErrorKind::kNone);
  const char byte = 'x';
  idle.Received({&byte, 1});  // unasked bytes on an idle connection
  EXPECT_EQ(idle.outcome(), ErrorKind::kLongReply);
}

TEST(ExchangeTest, ConnectErrors) {
  const struct {
    int err;
    ErrorKind want;
  } cases[] = {
      {ECONNREFUSED, ErrorKind::kConnect}, {ENETUNREACH, ErrorKind::kConnect},
      {EHOSTUNREACH, ErrorKind::kConnect}, {ETIMEDOUT, ErrorKind::kTimeout},
      {EINPROGRESS, ErrorKind::kTimeout},  {EMFILE, ErrorKind::kOther},
      {ENFILE, ErrorKind::kOther},         {ENOBUFS, ErrorKind::kOther},
      {ENOMEM, ErrorKind::kOther},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ErrorKindName(ClassifyConnectError(c.err)), std::string(ErrorKindName(c.want)))
        << c.err;
  }
}

TEST(ExchangeTest, KindNamesAreTheJsonNames) {
  const char* const names[] = {"none",        "connect",     "reset", "timeout",
                               "error_reply", "short_reply", "other", "long_reply"};
  for (int k = 0; k < kNumErrorKinds; ++k) {
    EXPECT_STREQ(ErrorKindName(static_cast<ErrorKind>(k)), names[k]);
  }
  EXPECT_STREQ(ErrorKindName(static_cast<ErrorKind>(kNumErrorKinds)), "other");
}

TEST(ExchangeTest, DescribeNamesKindRequestAndReply) {
  Exchange ex;
  RunScript(kErr, Join(kSent, {{'r', 100}}), &ex);
  EXPECT_EQ(ex.Describe(), "error_reply on request '3-1-': '" + kErr + "'");
  RunScript(kOk, Join(kSent, {{'r', 150}}), &ex);
  EXPECT_EQ(ex.Describe(),
            "long_reply on request '3-1-': the server sent more than one 100-byte reply frame");
  RunScript(kOk, Join(kSent, {{'t', 5000}}), &ex);
  EXPECT_EQ(ex.Describe(), "timeout on request '3-1-'");
  RunScript(kOk, Join(kSent, {{'r', 100}}), &ex);
  EXPECT_EQ(ex.Describe(), "");
}

}  // namespace
}  // namespace kv
