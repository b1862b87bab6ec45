#include "client/lab_connection.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
  switch (kind) {
    case ErrorKind::kNone:
      return "none";
    case ErrorKind::kConnect:
      return "connect";
    case ErrorKind::kReset:
      return "reset";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kErrorReply:
      return "error_reply";
    case ErrorKind::kShortReply:
      return "short_reply";
    case ErrorKind::kOther:
      return "other";
  }
  return "other";
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

ErrorKind LabConnection::Connect(const Endpoint& ep, int timeout_ms, std::string* detail,
                                 bool nodelay) {
  Close();
  fd_ = ::socket(ep.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    if (detail) *detail = std::string("socket: ") + std::strerror(errno);
    return ErrorKind::kOther;
  }
  timeval tv{};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>((timeout_ms % 1000) * 1000);
  // SO_SNDTIMEO bounds connect() too on Linux (it then fails with EINPROGRESS).
  if (::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
    if (detail) *detail = std::string("setsockopt: ") + std::strerror(errno);
    Close();
    return ErrorKind::kOther;
  }
  if (nodelay) {
    // A frame is one small write followed by a wait for the reply; never let
    // Nagle hold a frame back on a keep-alive connection. A one-shot
    // connection skips the extra syscall.
    int one = 1;
    (void)::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  int rc;
  do {
    rc = ::connect(fd_, reinterpret_cast<const sockaddr*>(&ep.addr), ep.len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (detail) {
      *detail = "connect " + ep.ToString() + ": " +
                (err == EINPROGRESS ? std::string("timed out") : std::string(std::strerror(err)));
    }
    Close();
    return err == EINPROGRESS || err == ETIMEDOUT ? ErrorKind::kTimeout
           : err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM
               ? ErrorKind::kOther
               : ErrorKind::kConnect;
  }
  return ErrorKind::kNone;
}

ErrorKind LabConnection::Fail(ErrorKind kind) {
  Close();
  return kind;
}

ErrorKind LabConnection::RoundTrip(const Frame& request, Frame* reply) {
  if (fd_ < 0) return ErrorKind::kOther;
  std::size_t put = 0;
  while (put < kFrameSize) {
    const ssize_t w = ::send(fd_, request.data() + put, kFrameSize - put, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Fail(ClassifyIoErrno(errno));
    }
    put += static_cast<std::size_t>(w);
  }
  std::size_t got = 0;
  while (got < kFrameSize) {
    const ssize_t r = ::recv(fd_, reply->data() + got, kFrameSize - got, 0);
    if (r == 0) return Fail(ErrorKind::kShortReply);  // peer closed early
    if (r < 0) {
      if (errno == EINTR) continue;
      return Fail(ClassifyIoErrno(errno));
    }
    got += static_cast<std::size_t>(r);
  }
  if (IsErrorReply(FrameText(std::string_view(reply->data(), kFrameSize)))) {
    return ErrorKind::kErrorReply;
  }
  return ErrorKind::kNone;
}

void LabConnection::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace kv
