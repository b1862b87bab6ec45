// Exchange: one request/reply exchange of the lab protocol, with no I/O.
//
// Sans-I/O, the client's twin of common/connection_core.h (after
// python-hyper/h11): the exchange is told what its driver's system calls did (bytes sent,
// bytes received, the peer's close, an errno, the time) and answers what to
// send next and, once done, exactly one outcome. The rules of a request, and
// above all which failure is which kind, live here once, so every driver
// counts the same event as the same error: LabConnection::RoundTrip (blocking
// threads and the checker) and the load generator's epoll loops.
// Time is an argument, never read here.
//
// The rules (the error classes, as docs/client.md lists them):
//  - kNone: exactly one 100-byte reply frame came. kErrorReply: the same,
//    but its text starts with "ERROR ". Both keep the connection usable.
//  - kLongReply: more than 100 bytes came for the request, at once or after
//    the reply (a byte after a whole reply turns kNone or kErrorReply into
//    kLongReply: the reply was longer than a frame).
//  - kShortReply: the peer closed before a whole reply (0..99 bytes).
//  - kTimeout: the deadline passed before a whole reply (Tick), or a blocking
//    socket's timeout ran out (IoError EAGAIN / EWOULDBLOCK), or ETIMEDOUT.
//  - kReset: ECONNRESET, EPIPE, ECONNABORTED while sending or receiving.
//  - kOther: any other errno (ENOBUFS, EBADF, ...).
//  - kConnect (refused, unreachable) belongs to the connect, before any
//    exchange: ClassifyConnectError.
// Once done, the outcome only ever changes from kNone/kErrorReply to
// kLongReply; a later close, error or deadline takes nothing from a whole
// reply. Every outcome but kNone and kErrorReply closes the connection:
// framing may be lost.
//
// Driver loop:
//   Exchange ex(request, now + timeout);
//   while (!ex.done()) {
//     if (!ex.ToSend().empty()) send it: Sent(n) or IoError(errno);
//     else recv up to ReceiveRoom() bytes: Received(bytes), PeerClosed() or
//          IoError(errno);
//     Tick(now) whenever the driver waited (EINTR is retried, never
//     reported; a non-blocking driver waits on EAGAIN, never reports it).
//   }
//   ex.outcome(), ex.reply(); close unless ex.keeps_connection().
//
// Thread safety: none; one exchange is driven by one thread at a time.
// No allocation except Describe().
#ifndef KV_CLIENT_EXCHANGE_H_
#define KV_CLIENT_EXCHANGE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/protocol.h"

namespace kv {

enum class ErrorKind : int {
  kNone = 0,
  kConnect,     // connect() failed: refused, unreachable
  kReset,       // ECONNRESET / EPIPE / ECONNABORTED while sending or receiving
  kTimeout,     // connect, send or receive timed out; the deadline passed
  kErrorReply,  // a full reply whose text starts with "ERROR "
  kShortReply,  // the peer closed before a full 100-byte reply
  kOther,       // anything else (socket() failed, EMFILE, ...)
  kLongReply,   // more than 100 bytes came for one request
};
inline constexpr int kNumErrorKinds = 8;
// "none", "connect", "reset", "timeout", "error_reply", "short_reply",
// "other", "long_reply" (the JSON names).
const char* ErrorKindName(ErrorKind kind);

// What a long reply means, for the messages that name one.
inline constexpr const char* kLongReplyMeaning =
    "the server sent more than one 100-byte reply frame";

// The kind of a failed send or receive: kReset, kTimeout or kOther.
ErrorKind ClassifyIoError(int err);
// The kind of a failed connect(): kTimeout (ETIMEDOUT, or EINPROGRESS from a
// connect bounded by SO_SNDTIMEO), kOther (out of descriptors, buffers or
// memory: the client's trouble, not the server's), else kConnect.
ErrorKind ClassifyConnectError(int err);

class Exchange {
 public:
  // No exchange yet: a connection before its first request. It is done with
  // kNone and expects nothing, so a byte that comes is a kLongReply.
  Exchange() = default;
  // An exchange of `request` that must end by `deadline_ns` (the caller's
  // clock, e.g. MonotonicNanos(); INT64_MAX for none).
  Exchange(const Frame& request, int64_t deadline_ns);

  bool done() const { return done_; }
  // The outcome; kNone until done().
  ErrorKind outcome() const { return outcome_; }
  // Done, and the connection may carry the next request.
  bool keeps_connection() const {
    return done_ && (outcome_ == ErrorKind::kNone || outcome_ == ErrorKind::kErrorReply);
  }
  int64_t deadline() const { return deadline_ns_; }
  const Frame& request() const { return request_; }
  // The reply frame (its first 100 bytes for kLongReply); valid once done
  // with kNone, kErrorReply or kLongReply.
  const Frame& reply() const { return reply_; }

  // The request bytes still to send (empty once sent, or once done).
  std::span<const char> ToSend() const;
  // REQUIRES: n <= ToSend().size().
  void Sent(std::size_t n);
  // How many bytes a receive should ask for: what the reply still lacks plus
  // one byte of room, so a reply that comes long shows in the same call.
  // Once done, one byte: whether anything more comes.
  std::size_t ReceiveRoom() const { return done_ ? 1 : kFrameSize + 1 - received_; }
  // Bytes that arrived (any number, also after done: see the rules).
  void Received(std::span<const char> bytes);
  // The peer's end of stream (recv returned 0).
  void PeerClosed();
  // A failed send or receive (errno; not EINTR, and not EAGAIN from a
  // non-blocking socket).
  void IoError(int err);
  // The time now: past the deadline and not done is kTimeout.
  void Tick(int64_t now_ns);

  // "timeout on request '3-1-...'" (plus the ERROR reply's text, or what a
  // long reply means); empty for kNone.
  std::string Describe() const;

 private:
  void Finish(ErrorKind kind);

  Frame request_{};
  Frame reply_{};
  std::size_t sent_ = kFrameSize;
  std::size_t received_ = 0;
  int64_t deadline_ns_ = INT64_MAX;
  ErrorKind outcome_ = ErrorKind::kNone;
  bool done_ = true;
};

}  // namespace kv

#endif  // KV_CLIENT_EXCHANGE_H_
