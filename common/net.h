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

// Waits until fd has `events` (POLLIN/POLLOUT), `stop_fd` (if >= 0) is
// readable, or `deadline_ns` passes. Returns 1 if fd is ready, 2 if stop_fd
// is, 0 on timeout, -1 on error. Retries on EINTR.
int WaitReady(int fd, short events, int64_t deadline_ns, int stop_fd = -1);

// Writes one whole frame before `deadline_ns`. Returns false if the peer is
// gone or the deadline passed.
bool WriteFrame(int fd, const Frame& frame, int64_t deadline_ns);

}  // namespace kv

#endif  // KV_COMMON_NET_H_
