// LabConnection: one TCP connection to a lab server, speaking 100-byte frames.
//
// Socket helpers only: the rules of a request and the error classes are the
// exchange's (client/exchange.h); a LabConnection is its blocking driver and
// keeps the last exchange, so bytes that come after a reply are judged by the
// same rules. Every connect, send and receive has a timeout (SO_SNDTIMEO,
// which Linux also applies to connect(), and SO_RCVTIMEO) and an exchange its
// deadline; SIGPIPE is avoided with MSG_NOSIGNAL.
//
// Thread safety: a LabConnection is owned by one thread. Endpoint is a value.
#ifndef KV_CLIENT_LAB_CONNECTION_H_
#define KV_CLIENT_LAB_CONNECTION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "client/exchange.h"
#include "common/net.h"
#include "common/protocol.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace kv {

struct Endpoint {
  SocketAddress address;  // common/net.h's parse of host and port
  std::string host;       // as given
  uint16_t port = 0;      // the port actually connected to

  // Parses a numeric IPv4 ("127.0.0.1") or IPv6 ("::1") address; no DNS
  // (ParseSocketAddress). Returns InvalidArgument for anything else or port 0.
  static Status Make(std::string_view host, uint16_t port, Endpoint* out);
  // "127.0.0.1:3000" or "[::1]:3000" (FormatSocketAddress).
  std::string ToString() const { return FormatSocketAddress(address); }
};

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
  // Runs one exchange of `request` to its end, blocking, by `deadline_ns`
  // (MonotonicNanos): sends the frame, reads the reply. Returns its outcome
  // (kNone or the kind of failure; kOther if the connection is not open);
  // the reply is last().reply(). The connection is closed unless the outcome
  // keeps it (every failure but kErrorReply: framing may be lost).
  ErrorKind RoundTrip(const Frame& request, int64_t deadline_ns);
  // For a driver that moves the bytes itself (the event loops): starts the
  // exchange of `request` on this connection and returns it to be driven;
  // EndExchange() once it is done closes the connection unless the outcome
  // keeps it, and returns the outcome.
  Exchange& BeginExchange(const Frame& request, int64_t deadline_ns);
  ErrorKind EndExchange();
  // The connection's last exchange (a finished kNone before the first);
  // mutable for the driver of BeginExchange.
  const Exchange& last() const { return last_; }
  Exchange* mutable_last() { return &last_; }
  // Ends a connection whose replies have all been read: half-closes it,
  // waits up to `grace_ms` for the server's end of stream and closes it.
  // kLongReply if any byte came first (the last exchange's outcome is then
  // kLongReply: its reply was longer than a frame); else kNone, also when
  // the server keeps it open or resets it.
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
  // Sets the send/receive timeouts and (if asked) TCP_NODELAY.
  Status SetSocketOptions(int timeout_ms, bool nodelay);
  // RoundTrip's steps: one blocking send / receive for last_, and the wait
  // before a step that follows an unfinished one (the socket timeout no
  // longer bounds what is left of the deadline). False: the exchange ended.
  void SendStep();
  void ReceiveStep();
  bool WaitStep(short events);
  UniqueFd fd_;
  Exchange last_;
};

}  // namespace kv

#endif  // KV_CLIENT_LAB_CONNECTION_H_
