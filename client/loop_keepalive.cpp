// The keep-alive event loops (closed loop): E = min(T, CPUs) loops
// (load_generator.cpp, EventLoopCount) on the event-loop core (event_loop.h),
// each logical client's connections t, t+T, t+2T, ... < C used in turn. Per
// request: one send(), one epoll_wait() share, one recv() (usually), two
// clock reads. Connects (once per connection) are blocking with the connect
// timeout; an exchange's deadline is the core's (SetDue, Expire).
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <span>

#include "client/drivers.h"
#include "common/net.h"
#include "common/status.h"

namespace kv::load {
namespace {

struct KeepAliveClient : LoopClient {
  std::vector<LabConnection> conns;
  uint32_t next_conn = 0;
  LabConnection* busy = nullptr;  // connection with the request in flight
  KeepAliveClient(const LoadConfig& cfg, uint32_t t, Worker* worker)
      : LoopClient(cfg, t, worker), conns(PlanClient(cfg, t).conns) {}
};

// Sends the request of `ex` on a non-blocking socket. A 100-byte frame fits
// any socket buffer; a short write is finished with a wait bounded by the
// exchange's deadline (rare: the peer stopped reading).
void SendRequest(int fd, Exchange* ex) {
  while (!ex->done() && !ex->ToSend().empty()) {
    const std::span<const char> out = ex->ToSend();
    const ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      ex->Sent(static_cast<std::size_t>(n));
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      ex->IoError(errno);
    } else if (errno != EINTR) {
      const int ready = WaitReady(fd, POLLOUT, ex->deadline());
      if (ready == 0) ex->Tick(ex->deadline());  // 0: the deadline passed
      if (ready < 0) ex->IoError(errno);
    }
  }
}

class KeepAliveLoop final : public LoopOf<KeepAliveClient> {
 public:
  using LoopOf::LoopOf;

 private:
  bool Begin(uint32_t slot) override;
  void OnEvent(uint64_t data, uint32_t events) override;
  void Expire(uint32_t slot, uint64_t now) override;
  void CloseAll() override;

  void Conclude(KeepAliveClient* c, LabConnection* conn);
  void Finish(KeepAliveClient* c, ErrorKind kind, const std::string& detail);
  void OnReadable(KeepAliveClient* c);
  bool OpenConnection(KeepAliveClient* c, LabConnection* conn);
};

// Connects `conn` (blocking, bounded by the connect timeout), makes it
// non-blocking and adds it to the epoll set. False: finished with an error.
bool KeepAliveLoop::OpenConnection(KeepAliveClient* c, LabConnection* conn) {
  Status why;
  const ErrorKind kind = conn->Connect(cfg_.endpoint, cfg_.timeout_ms, &why,
                                       /*nodelay=*/true);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = (uint64_t{c->slot} << 32) | static_cast<uint64_t>(conn - c->conns.data());
  if (kind == ErrorKind::kNone) {
    Status s;
    if (::fcntl(conn->fd(), F_SETFL, O_NONBLOCK) != 0) {
      s = Status::IOError("fcntl O_NONBLOCK", errno);
    } else if (::epoll_ctl(epoll_fd(), EPOLL_CTL_ADD, conn->fd(), &ev) != 0) {
      s = Status::IOError("epoll_ctl", errno);
    }
    if (!s.ok()) {
      conn->Close();
      Finish(c, ErrorKind::kOther, s.message());
      return false;
    }
  }
  if (kind != ErrorKind::kNone) {
    c->busy = nullptr;
    Finish(c, kind, why.message());
    return false;
  }
  ++c->w->connected;
  return true;
}

// Sends c's request on its next connection in turn, connected first if it is
// not open. False: the connect or the send ended the request.
bool KeepAliveLoop::Begin(uint32_t slot) {
  KeepAliveClient* c = clients_[slot].get();
  LabConnection* conn = &c->conns[c->next_conn];
  if (++c->next_conn == c->conns.size()) c->next_conn = 0;
  uint64_t start = c->sent_ns;
  if (!conn->is_open()) {
    if (!OpenConnection(c, conn)) return false;
    start = NowNs();  // the exchange's deadline runs from here
  }
  Exchange& ex = conn->BeginExchange(c->request, ExchangeDeadline(cfg_, start));
  SetDue(c, static_cast<uint64_t>(ex.deadline()));
  SendRequest(conn->fd(), &ex);
  c->busy = conn;
  if (!ex.done()) return true;  // wait for the reply
  Conclude(c, conn);
  return false;
}

// Books the finished exchange on conn (closed unless it keeps it).
void KeepAliveLoop::Conclude(KeepAliveClient* c, LabConnection* conn) {
  const ErrorKind kind = conn->EndExchange();
  Finish(c, kind, kind == ErrorKind::kNone ? std::string() : conn->last().Describe());
}

// Books c's request (in flight or failed to start) and moves on.
void KeepAliveLoop::Finish(KeepAliveClient* c, ErrorKind kind, const std::string& detail) {
  c->busy = nullptr;
  Book(c, kind, NowNs(), detail);
}

// An event on connection (slot << 32 | index). One that is not carrying the
// client's request (an idle keep-alive connection the server closed, or
// sent something unasked on) is closed; it is reopened when its turn comes.
// Bytes on it belong to its last reply, which was longer than a frame.
void KeepAliveLoop::OnEvent(uint64_t data, uint32_t /*events*/) {
  KeepAliveClient* c = clients_[data >> 32].get();
  LabConnection* conn = &c->conns[data & 0xffffffffu];
  if (conn != c->busy) {
    ReadEndOf(conn, c->w, /*deadline_ns=*/0);
    conn->Close();
    return;
  }
  OnReadable(c);
}

// One receive for c's exchange; EAGAIN (a spurious wake-up) and EINTR wait
// for the next event.
void KeepAliveLoop::OnReadable(KeepAliveClient* c) {
  LabConnection* conn = c->busy;
  if (conn == nullptr) return;  // e.g. a close after a timeout
  Exchange* ex = conn->mutable_last();
  std::array<char, kFrameSize + 1> in;
  const ssize_t n = ::recv(conn->fd(), in.data(), ex->ReceiveRoom(), 0);
  if (n > 0) {
    ex->Received({in.data(), static_cast<std::size_t>(n)});
  } else if (n == 0) {
    ex->PeerClosed();
  } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    ex->IoError(errno);
  }
  if (!ex->done()) return;
  Conclude(c, conn);
  StartNext(c->slot);
}

// The exchange's deadline passed: it ends (timed out, or with what it has).
void KeepAliveLoop::Expire(uint32_t slot, uint64_t now) {
  KeepAliveClient* c = clients_[slot].get();
  c->busy->mutable_last()->Tick(static_cast<int64_t>(now));
  Conclude(c, c->busy);
}

// At the end of the run: a connection with its request still in flight (the
// run was stopped) is closed as it is; every other open one is checked for
// bytes after its last reply.
void KeepAliveLoop::CloseAll() {
  std::vector<KeptConnection> kept;
  for (const auto& c : clients_) {
    if (c->busy != nullptr) c->busy->Close();
    for (LabConnection& conn : c->conns) kept.push_back({&conn, c->w});
  }
  CloseKeptConnections(cfg_, kept);
}

}  // namespace

std::vector<std::unique_ptr<EventLoop>> MakeKeepAliveLoops(Shared* shared, const Workers& workers,
                                                           uint32_t count) {
  return DealClients<KeepAliveLoop>(shared, workers, count);
}

}  // namespace kv::load
