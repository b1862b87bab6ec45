// The one-shot event loops (closed loop, a connection per request): E =
// min(T, 2 x CPUs) loops (load_generator.cpp, EventLoopCount) on the
// event-loop core (event_loop.h), each logical client with one request in
// flight on a connection made for it and closed after it: the traffic of a
// blocking worker, on fewer threads and context switches. Per request:
// socket, connect (non-blocking), send, epoll_ctl, recv, close and a share of
// one epoll_wait. No socket has a timeout of its own: every phase has a
// deadline (the connect's from its start, the exchange's from the moment the
// connection is ready, the end of stream's grace from the reply), and
// epoll_wait never sleeps past the earliest one.
//
// The end of stream. A server that closes after its reply (the kit's) has
// its FIN in before the reply is read whenever epoll reports EPOLLRDHUP with
// the reply; everything sent before a FIN is queued before it, and the
// reply's recv asks for one byte more than the reply lacks, so a recv that
// comes back one byte short after the FIN proves the stream ended with the
// reply: the connection is closed at once, and the server keeps the
// TIME_WAIT, as with the kit. Otherwise (a server that waits for our end, as
// ours do, or whose FIN is still on its way) the connection is half-closed
// and waits, up to the grace, for the server's end, a byte first making the
// reply long: what a blocking worker does.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <span>

#include "client/drivers.h"
#include "common/status.h"

namespace kv::load {
namespace {

enum class OneShotPhase {
  kIdle,        // no request in flight
  kConnecting,  // connect() in progress; the request waits for EPOLLOUT
  kReply,       // request (being) sent, reply awaited
  kEnd,         // whole reply in, half-closed, the server's end awaited
};

struct OneShotClient : LoopClient {
  OneShotPhase phase = OneShotPhase::kIdle;
  bool watched = false;  // fd is in the epoll set
  UniqueFd fd;
  Exchange ex;
  uint64_t done_ns = 0;  // when its reply (or its failure) was in
  using LoopClient::LoopClient;
};

class OneShotLoop final : public LoopOf<OneShotClient> {
 public:
  using LoopOf::LoopOf;

 private:
  bool Begin(uint32_t slot) override;
  void OnEvent(uint64_t data, uint32_t events) override;
  void Expire(uint32_t slot, uint64_t now) override;
  // Stopped: a request still in flight is dropped as it is.
  void CloseAll() override {
    for (const auto& c : clients_) c->fd.Reset();
  }

  bool TrySend(OneShotClient* c);
  bool Watch(OneShotClient* c, uint32_t events);
  void OnReply(OneShotClient* c, uint32_t events);
  void OnEnd(OneShotClient* c);
  void ConnectFailed(OneShotClient* c, int err);
  void Conclude(OneShotClient* c, ErrorKind kind, const std::string& detail);
};

// Books c's request and ends its connection (without a half-close: either
// the server's end is in, or the request failed and framing may be lost).
void OneShotLoop::Conclude(OneShotClient* c, ErrorKind kind, const std::string& detail) {
  c->fd.Reset();
  c->watched = false;
  c->phase = OneShotPhase::kIdle;
  Book(c, kind, c->done_ns, detail);
}

// The connect failed with `err` (from connect(), or from the first send on a
// connection not yet known to be up): the same kinds and words as a
// blocking connect's.
void OneShotLoop::ConnectFailed(OneShotClient* c, int err) {
  c->done_ns = NowNs();
  Conclude(c, ClassifyConnectError(err),
           Status::IOError("connect " + cfg_.endpoint.ToString(), err).message());
}

bool OneShotLoop::Watch(OneShotClient* c, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = c->slot;
  if (::epoll_ctl(epoll_fd(), c->watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd.get(), &ev) != 0) {
    c->done_ns = NowNs();
    Conclude(c, ErrorKind::kOther, Status::IOError("epoll_ctl", errno).message());
    return false;
  }
  c->watched = true;
  return true;
}
// Sends what is left of c's request. The first send on a connection whose
// connect is still in progress says whether it is up: bytes taken, it is (on
// loopback the handshake is usually done when connect() returns); EAGAIN, not
// yet; an error, the connect failed (a reset means it was up and then lost).
// False: c's request ended.
bool OneShotLoop::TrySend(OneShotClient* c) {
  for (;;) {
    const std::span<const char> out =
        c->phase == OneShotPhase::kConnecting ? std::span<const char>(c->request) : c->ex.ToSend();
    if (out.empty()) return true;
    const ssize_t n = ::send(c->fd.get(), out.data(), out.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;  // wait for EPOLLOUT
    const int err = errno;
    if (c->phase == OneShotPhase::kConnecting) {
      if (n < 0 && ClassifyIoError(err) != ErrorKind::kReset) {
        ConnectFailed(c, err);
        return false;
      }
      // Up: the exchange's deadline runs from here.
      ++c->w->connected;
      c->ex = Exchange(c->request, ExchangeDeadline(cfg_, NowNs()));
      c->phase = OneShotPhase::kReply;
      SetDue(c, static_cast<uint64_t>(c->ex.deadline()));
    }
    if (n >= 0) {
      c->ex.Sent(static_cast<std::size_t>(n));
    } else {
      c->ex.IoError(err);
      c->done_ns = NowNs();
      Conclude(c, c->ex.outcome(), c->ex.Describe());
      return false;
    }
  }
}

// Opens c's connection and sends its request. False: c's request ended.
bool OneShotLoop::Begin(uint32_t slot) {
  OneShotClient* c = clients_[slot].get();
  const sockaddr_storage& addr = cfg_.endpoint.address.storage;
  c->fd.Reset(::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!c->fd) {
    c->done_ns = NowNs();
    Conclude(c, ErrorKind::kOther, Status::IOError("socket", errno).message());
    return false;
  }
  c->watched = false;
  const int rc = ::connect(c->fd.get(), reinterpret_cast<const sockaddr*>(&addr),
                           cfg_.endpoint.address.length);
  // EINTR: the connect goes on by itself, as EINPROGRESS says.
  if (rc != 0 && errno != EINPROGRESS && errno != EINTR) {
    ConnectFailed(c, errno);
    return false;
  }
  c->phase = OneShotPhase::kConnecting;
  SetDue(c, c->sent_ns + static_cast<uint64_t>(cfg_.timeout_ms) * 1'000'000ULL);
  if (!TrySend(c)) return false;
  const bool unsent = c->phase == OneShotPhase::kConnecting || !c->ex.ToSend().empty();
  return Watch(c, EPOLLIN | EPOLLRDHUP | (unsent ? EPOLLOUT : 0u));
}

// An event on client `data`'s connection.
void OneShotLoop::OnEvent(uint64_t data, uint32_t events) {
  OneShotClient* c = clients_[data].get();
  switch (c->phase) {
    case OneShotPhase::kIdle:
      return;
    case OneShotPhase::kConnecting:
    case OneShotPhase::kReply:
      if (c->phase == OneShotPhase::kConnecting || !c->ex.ToSend().empty()) {
        if (!TrySend(c)) break;
        if (c->phase == OneShotPhase::kConnecting) return;                     // not up yet
        if (c->ex.ToSend().empty() && !Watch(c, EPOLLIN | EPOLLRDHUP)) break;  // no EPOLLOUT now
      }
      if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) OnReply(c, events);
      break;
    case OneShotPhase::kEnd:
      OnEnd(c);
      break;
  }
  if (c->phase == OneShotPhase::kIdle) StartNext(c->slot);
}

// One receive for c's reply; EAGAIN (a spurious wake-up) and EINTR wait for
// the next event.
void OneShotLoop::OnReply(OneShotClient* c, uint32_t events) {
  std::array<char, kFrameSize + 1> in;
  const ssize_t n = ::recv(c->fd.get(), in.data(), c->ex.ReceiveRoom(), 0);
  if (n > 0) {
    c->ex.Received({in.data(), static_cast<std::size_t>(n)});
  } else if (n == 0) {
    c->ex.PeerClosed();
  } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    c->ex.IoError(errno);
  }
  if (!c->ex.done()) return;
  c->done_ns = NowNs();
  if (!c->ex.keeps_connection() || (events & EPOLLRDHUP) != 0) {
    // Failed, or the server's end was in before this recv (see above).
    Conclude(c, c->ex.outcome(), c->ex.Describe());
    return;
  }
  // Best effort: a connection the server resets has nothing more to say.
  (void)::shutdown(c->fd.get(), SHUT_WR);
  c->phase = OneShotPhase::kEnd;
  SetDue(c, NowNs() + static_cast<uint64_t>(EndGraceMs(cfg_)) * 1'000'000ULL);
}

// Something after a whole reply: the server's end, or a byte that makes the
// reply long (an error takes nothing from it).
void OneShotLoop::OnEnd(OneShotClient* c) {
  char byte;
  const ssize_t n = ::recv(c->fd.get(), &byte, 1, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n > 0) c->ex.Received({&byte, 1});
  Conclude(c, c->ex.outcome(), c->ex.Describe());
}

// The phase's deadline passed: a connect or a request timed out; a server
// that keeps its end of a finished exchange open is left to it.
void OneShotLoop::Expire(uint32_t slot, uint64_t now) {
  OneShotClient* c = clients_[slot].get();
  if (c->phase == OneShotPhase::kConnecting) {
    ConnectFailed(c, ETIMEDOUT);
    return;
  }
  if (c->phase == OneShotPhase::kReply) c->done_ns = now;
  c->ex.Tick(static_cast<int64_t>(now));
  Conclude(c, c->ex.outcome(), c->ex.Describe());
}

}  // namespace

std::vector<std::unique_ptr<EventLoop>> MakeOneShotLoops(Shared* shared, const Workers& workers,
                                                         uint32_t count) {
  return DealClients<OneShotLoop>(shared, workers, count);
}

}  // namespace kv::load
