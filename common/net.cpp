#include "common/net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "common/clock.h"

namespace kv {
namespace {

// Milliseconds left until deadline_ns, rounded up, at least 0.
int MillisLeft(int64_t deadline_ns) {
  const int64_t left = deadline_ns - MonotonicNanos();
  if (left <= 0) return 0;
  // poll() takes an int; no wait here needs more than an hour at a time.
  constexpr int64_t kMaxWaitNs = int64_t{3'600'000} * 1'000'000;
  return static_cast<int>((std::min(left, kMaxWaitNs) + 999'999) / 1'000'000);
}

// Waits for `events` on fd, or for stop_fd (if >= 0) to become readable.
// Returns 1 if fd is ready, 2 if stop_fd is, 0 on timeout, -1 on error.
int WaitFor(int fd, short events, int64_t deadline_ns, int stop_fd) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int ms = MillisLeft(deadline_ns);
    const int r = poll(p, stop_fd >= 0 ? 2 : 1, ms);
    if (r > 0) return p[1].revents != 0 ? 2 : 1;
    if (r == 0) {
      if (MillisLeft(deadline_ns) > 0) continue;  // a capped wait ran out
      return 0;
    }
    if (errno != EINTR) return -1;
  }
}

// Where the address and the port of `family` (AF_INET or AF_INET6) sit in a
// sockaddr_storage, and the length of that family's sockaddr: one view, so
// parsing and formatting are written once for both families.
struct FamilyFields {
  void* addr;
  in_port_t* port;
  socklen_t length;
};

FamilyFields FieldsOf(int family, sockaddr_storage* storage) {
  if (family == AF_INET) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(storage);
    return {&v4->sin_addr, &v4->sin_port, sizeof(sockaddr_in)};
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(storage);
  return {&v6->sin6_addr, &v6->sin6_port, sizeof(sockaddr_in6)};
}

}  // namespace

int WaitReady(int fd, short events, int64_t deadline_ns, int stop_fd) {
  return WaitFor(fd, events, deadline_ns, stop_fd);
}

bool ParseSocketAddress(const std::string& ip, uint16_t port, SocketAddress* out) {
  for (const int family : {AF_INET, AF_INET6}) {
    *out = SocketAddress{};
    const FamilyFields f = FieldsOf(family, &out->storage);
    if (inet_pton(family, ip.c_str(), f.addr) == 1) {
      out->storage.ss_family = static_cast<sa_family_t>(family);
      *f.port = htons(port);
      out->length = f.length;
      return true;
    }
  }
  *out = SocketAddress{};
  return false;
}

std::string FormatSocketAddress(const SocketAddress& address) {
  SocketAddress copy = address;  // FieldsOf points into a writable storage
  const int family = copy.storage.ss_family == AF_INET ? AF_INET : AF_INET6;
  const FamilyFields f = FieldsOf(family, &copy.storage);
  char host[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family, f.addr, host, sizeof host);
  const std::string port = std::to_string(ntohs(*f.port));
  if (family == AF_INET) return std::string(host) + ":" + port;
  std::string formatted(1, '[');  // appended: GCC 12 -Wrestrict false positive
  formatted += host;
  formatted += "]:";
  formatted += port;
  return formatted;
}

Status ListenTcp(const SocketAddress& address, UniqueFd* out) {
  const std::string where = FormatSocketAddress(address);
  UniqueFd fd(socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Status::IOError("socket " + where, errno);
  const int one = 1;
  // Restarting a server must not wait for TIME_WAIT connections to expire.
  if (setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    return Status::IOError("setsockopt SO_REUSEADDR " + where, errno);
  }
  // Bind exactly the address given, not the IPv4 twin too.
  if (address.storage.ss_family == AF_INET6 &&
      setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) {
    return Status::IOError("setsockopt IPV6_V6ONLY " + where, errno);
  }
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    return Status::IOError("bind " + where, errno);
  }
  if (listen(fd.get(), SOMAXCONN) != 0) return Status::IOError("listen " + where, errno);
  *out = std::move(fd);
  return Status::OK();
}

int AcceptConnection(int listen_fd) {
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno != EINTR && errno != ECONNABORTED) return -1;
  }
}

void RefuseConnection(int fd, std::string_view message) {
  const UniqueFd owned(fd);  // closed on return: FIN after the reply
  char sink[4 * kFrameSize];
  // Bounded: at most a few frames are discarded, never a blocking read.
  for (int i = 0; i < 4; ++i) {
    if (recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) break;
  }
  Frame reply;
  FillErrorFrame(message, &reply);
  // Deliberately unchecked: best effort (see net.h); a peer that cannot take
  // the reply gets the close alone.
  [[maybe_unused]] const ssize_t sent =
      send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool WriteFrame(int fd, const Frame& frame, int64_t deadline_ns) {
  std::size_t put = 0;
  while (put < frame.size()) {
    const ssize_t r = send(fd, frame.data() + put, frame.size() - put, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      put += static_cast<std::size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (WaitFor(fd, POLLOUT, deadline_ns, -1) != 1) return false;
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace kv
