#include "client/lab_connection.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/clock.h"
#include "common/net.h"

namespace kv {

Status Endpoint::Make(std::string_view host, uint16_t port, Endpoint* out) {
  Endpoint ep;
  if (port == 0) return Status::InvalidArgument("port must be in 1..65535");
  const std::string h(host);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ep.addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ep.addr);
  if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    ep.len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    ep.len = sizeof(sockaddr_in6);
  } else {
    return Status::InvalidArgument("'" + h + "' is not a numeric IPv4 or IPv6 address");
  }
  ep.host = h;
  ep.port = port;
  *out = std::move(ep);
  return Status::OK();
}

std::string Endpoint::ToString() const {
  if (addr.ss_family == AF_INET6) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

const char* ErrorKindName(ErrorKind kind) {
  // Indexed by ErrorKind.
  static constexpr const char* kNames[kNumErrorKinds] = {
      "none", "connect", "reset", "timeout", "error_reply", "short_reply", "other", "long_reply"};
  const auto i = static_cast<int>(kind);
  return i >= 0 && i < kNumErrorKinds ? kNames[i] : "other";
}

namespace {

ErrorKind ClassifyIoErrno(int err) {
  switch (err) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case ETIMEDOUT:
      return ErrorKind::kTimeout;
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
      return ErrorKind::kReset;
    default:
      return ErrorKind::kOther;
  }
}

}  // namespace

Status LabConnection::SetSocketOptions(int timeout_ms, bool nodelay) {
  timeval tv{};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>((timeout_ms % 1000) * 1000);
  // SO_SNDTIMEO bounds connect() too on Linux (it then fails with EINPROGRESS).
  if (::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
      ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
    return Status::IOError("setsockopt SO_SNDTIMEO/SO_RCVTIMEO", errno);
  }
  // A frame is one small write followed by a wait for the reply; never let
  // Nagle hold a frame back on a keep-alive connection. A one-shot
  // connection skips the extra syscall.
  const int one = 1;
  if (nodelay && ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    return Status::IOError("setsockopt TCP_NODELAY", errno);
  }
  return Status::OK();
}

ErrorKind LabConnection::Connect(const Endpoint& ep, int timeout_ms, Status* why, bool nodelay) {
  Close();
  fd_.Reset(::socket(ep.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  Status s = fd_ ? SetSocketOptions(timeout_ms, nodelay) : Status::IOError("socket", errno);
  if (!s.ok()) {
    if (why != nullptr) *why = std::move(s);
    Close();
    return ErrorKind::kOther;
  }
  int rc;
  do {
    rc = ::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&ep.addr), ep.len);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return ErrorKind::kNone;
  const int err = errno;
  if (why != nullptr) {
    // connect() bounded by SO_SNDTIMEO fails with EINPROGRESS: a timeout.
    *why = Status::IOError("connect " + ep.ToString(), err == EINPROGRESS ? ETIMEDOUT : err);
  }
  Close();
  if (err == EINPROGRESS || err == ETIMEDOUT) return ErrorKind::kTimeout;
  if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) return ErrorKind::kOther;
  return ErrorKind::kConnect;
}

ErrorKind LabConnection::Fail(ErrorKind kind) {
  Close();
  return kind;
}

ErrorKind LabConnection::RoundTrip(const Frame& request, Frame* reply) {
  if (!fd_) return ErrorKind::kOther;
  std::size_t put = 0;
  while (put < kFrameSize) {
    const ssize_t w = ::send(fd_.get(), request.data() + put, kFrameSize - put, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Fail(ClassifyIoErrno(errno));
    }
    put += static_cast<std::size_t>(w);
  }
  // One byte of room beyond the frame: a reply that arrives longer than a
  // frame shows here without another system call.
  std::array<char, kFrameSize + 1> in;
  std::size_t got = 0;
  while (got < kFrameSize) {
    const ssize_t r = ::recv(fd_.get(), in.data() + got, in.size() - got, 0);
    if (r == 0) return Fail(ErrorKind::kShortReply);  // peer closed early
    if (r < 0) {
      if (errno == EINTR) continue;
      return Fail(ClassifyIoErrno(errno));
    }
    got += static_cast<std::size_t>(r);
  }
  std::memcpy(reply->data(), in.data(), kFrameSize);
  if (got > kFrameSize) return Fail(ErrorKind::kLongReply);
  if (IsErrorReply(FrameText(std::string_view(reply->data(), kFrameSize)))) {
    return ErrorKind::kErrorReply;
  }
  return ErrorKind::kNone;
}

void LabConnection::HalfClose() {
  // Best effort: a connection the server already reset has nothing to end.
  if (fd_) (void)::shutdown(fd_.get(), SHUT_WR);
}

ErrorKind LabConnection::ReadEnd(int64_t deadline_ns) {
  char byte;
  while (fd_) {
    const ssize_t r = ::recv(fd_.get(), &byte, 1, MSG_DONTWAIT);
    if (r > 0) return ErrorKind::kLongReply;
    if (r == 0) return ErrorKind::kNone;  // the server's end of stream
    if (errno == EINTR) continue;
    // A reset after a whole reply took nothing from it.
    if (errno != EAGAIN && errno != EWOULDBLOCK) return ErrorKind::kNone;
    if (WaitReady(fd_.get(), POLLIN, deadline_ns) != 1) return ErrorKind::kNone;
  }
  return ErrorKind::kNone;
}

ErrorKind LabConnection::CloseAfterReply(int grace_ms) {
  HalfClose();
  const ErrorKind kind = ReadEnd(MonotonicNanos() + int64_t{grace_ms} * 1'000'000);
  Close();
  return kind;
}

}  // namespace kv
