// LabConnection: one TCP connection to a lab server, speaking 100-byte frames.
//
// Socket helpers only: no parsing beyond "is this reply an ERROR frame" and
// "is it exactly one frame long".
// Every connect, send and receive has a timeout (SO_SNDTIMEO, which Linux also
// applies to connect(), and SO_RCVTIMEO); SIGPIPE is avoided with MSG_NOSIGNAL.
// Failures are classified into ErrorKind so the load generator can count them
// by kind, as wrk does.
//
// Thread safety: a LabConnection is owned by one thread. Endpoint is a value.
#ifndef KV_CLIENT_LAB_CONNECTION_H_
#define KV_CLIENT_LAB_CONNECTION_H_

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/protocol.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace kv {

struct Endpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string host;   // as given
  uint16_t port = 0;  // the port actually connected to

  // Parses a numeric IPv4 ("127.0.0.1") or IPv6 ("::1") address; no DNS.
  // Returns InvalidArgument for anything else or port 0.
  static Status Make(std::string_view host, uint16_t port, Endpoint* out);
  // "127.0.0.1:3000" or "[::1]:3000".
  std::string ToString() const;
};

enum class ErrorKind : int {
  kNone = 0,
  kConnect,     // connect() failed: refused, unreachable, connect timeout
  kReset,       // ECONNRESET / EPIPE while sending or receiving
  kTimeout,     // send or receive timed out
  kErrorReply,  // a full reply whose text starts with "ERROR "
  kShortReply,  // the peer closed before a full 100-byte reply
  kOther,       // anything else (socket() failed, EMFILE, ...)
  kLongReply,   // more than 100 bytes came for one request
};
inline constexpr int kNumErrorKinds = 8;
// "connect", "reset", "timeout", "error_reply", "short_reply", "other",
// "long_reply".
const char* ErrorKindName(ErrorKind kind);

// How long a connection that is being closed waits for the server's end of
// stream (never longer than the request timeout). The kit's servers close
// right after their reply and ours on the client's half-close, so the end
// comes at once; only a server that keeps a half-closed connection open
// waits this long, and it is not an error.
inline constexpr int kEndOfStreamGraceMs = 100;

class LabConnection {
 public:
  LabConnection() = default;
  LabConnection(LabConnection&& other) noexcept = default;

  // Opens a connection (closing any open one first). Returns kNone on
  // success; kConnect, kTimeout or kOther on failure, with the reason in
  // *why if why != nullptr (IOError "connect 127.0.0.1:3000: Connection
  // refused" etc.; on success *why is left alone).
  // `nodelay` sets TCP_NODELAY (worth it only on a long-lived connection).
  ErrorKind Connect(const Endpoint& ep, int timeout_ms, Status* why = nullptr,
                    bool nodelay = false);
  // Sends one request frame and reads one whole reply frame into *reply.
  // Returns kNone, or the kind of failure (kLongReply when more than a frame
  // arrived at once). After any failure other than kErrorReply the
  // connection is closed (framing may be lost).
  ErrorKind RoundTrip(const Frame& request, Frame* reply);
  // Ends a connection whose replies have all been read: half-closes it,
  // waits up to `grace_ms` for the server's end of stream and closes it.
  // kLongReply if any byte came first (the last reply was longer than a
  // frame); else kNone, also when the server keeps it open or resets it.
  ErrorKind CloseAfterReply(int grace_ms);
  // The two steps of CloseAfterReply, for closing many connections with one
  // grace: HalfClose sends our end of stream; ReadEnd reads until the
  // server's, or until `deadline_ns` (MonotonicNanos; a past deadline looks
  // once without waiting), and says kLongReply if a byte came first.
  void HalfClose();
  ErrorKind ReadEnd(int64_t deadline_ns);
  bool is_open() const { return fd_.valid(); }
  // The socket, for an event loop that drives it itself (-1 when closed).
  // The connection still owns and closes it.
  int fd() const { return fd_.get(); }
  void Close() { fd_.Reset(); }

 private:
  ErrorKind Fail(ErrorKind kind);
  // Sets the send/receive timeouts and (if asked) TCP_NODELAY.
  Status SetSocketOptions(int timeout_ms, bool nodelay);
  UniqueFd fd_;
};

}  // namespace kv

#endif  // KV_CLIENT_LAB_CONNECTION_H_
