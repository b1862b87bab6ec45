// Socket helpers for the lab protocol. No parsing here (see protocol.h).
//
// Every function checks its system calls and reports failures as values: a
// listener as a Status "<call> <address>: <strerror>", frame I/O as a result
// code. SIGPIPE is avoided with MSG_NOSIGNAL.
// Thread safety: reentrant; a given fd is used by one thread at a time.
#ifndef KV_COMMON_NET_H_
#define KV_COMMON_NET_H_

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/protocol.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace kv {

// The kit fills sin_port without htons(), so on a little-endian machine the
// kit client told "port P" connects to P with its two bytes swapped
// (3000 -> 47115). Our servers listen on both; our client connects like the kit.
constexpr uint16_t KitPortTwin(uint16_t port) {
  return static_cast<uint16_t>((port >> 8) | (port << 8));
}

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// Parses a numeric IPv4 or IPv6 address (no DNS) and a port.
// Returns false if `ip` is not a numeric address.
bool ParseSocketAddress(const std::string& ip, uint16_t port, SocketAddress* out);

// "127.0.0.1:3000" or "[::1]:3000".
std::string FormatSocketAddress(const SocketAddress& address);

// Binds and listens (SO_REUSEADDR, IPV6_V6ONLY for IPv6, backlog SOMAXCONN,
// non-blocking, close-on-exec). Returns OK with *out owning the listening fd,
// or IOError("bind 127.0.0.1:3000: Address already in use") etc.
Status ListenTcp(const SocketAddress& address, UniqueFd* out);

// Accepts one connection from a listening socket, retrying on EINTR and
// ECONNABORTED. Returns the fd (close-on-exec), or -1 with errno set (EAGAIN
// when nothing is pending on a non-blocking listener).
int AcceptConnection(int listen_fd);

// Refuses a connection the server will not serve (too many open, no thread,
// no descriptor): without ever blocking, discards what the peer already sent
// (so close() sends FIN rather than a reset that could destroy the reply),
// sends one reply frame "ERROR <message>" if the socket takes it, and closes
// fd. Best effort: a peer that has not sent yet may see a reset instead.
void RefuseConnection(int fd, std::string_view message);

enum class FrameRead {
  kFrame,       // kFrameSize bytes arrived
  kShortFrame,  // 1..kFrameSize-1 bytes, then the peer half-closed
  kClosed,      // the peer closed before sending a byte
  kTimeout,     // the deadline passed (*got bytes arrived so far)
  kError,       // reset or other socket error
  kStopped,     // `stop_fd` became readable (server shutdown) while waiting;
                // *got bytes of an unfinished frame are to be dropped
};

// Reads one frame into buf (kFrameSize bytes; *got receives the number of
// bytes read) with two bounds, the server's defence against idle and
// "slowloris" peers: the first byte must arrive before `idle_deadline_ns`
// (MonotonicNanos() time);
// once it has, the whole frame must be in within `frame_timeout_ns` of it,
// however the peer trickles the rest (a byte a second cannot keep a
// connection alive). kTimeout with *got == 0 means idle, *got > 0 stalled.
// With `stop_fd` >= 0 (an eventfd/pipe that becomes readable at shutdown),
// the read also ends with kStopped as soon as it has to wait while stop_fd is
// readable: only the peer's own half-close (kShortFrame) makes a short frame.
FrameRead ReadFrameBounded(int fd, char* buf, std::size_t* got, int64_t idle_deadline_ns,
                           int64_t frame_timeout_ns, int stop_fd = -1);

// Waits until fd has `events` (POLLIN/POLLOUT), `stop_fd` (if >= 0) is
// readable, or `deadline_ns` passes. Returns 1 if fd is ready, 2 if stop_fd
// is, 0 on timeout, -1 on error. Retries on EINTR.
int WaitReady(int fd, short events, int64_t deadline_ns, int stop_fd = -1);

// Writes one whole frame before `deadline_ns`. Returns false if the peer is
// gone or the deadline passed.
bool WriteFrame(int fd, const Frame& frame, int64_t deadline_ns);

}  // namespace kv

#endif  // KV_COMMON_NET_H_
