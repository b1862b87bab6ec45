#include "client/load_generator.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <latch>
#include <memory>
#include <span>
#include <thread>

#include "client/exchange.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/net.h"
#include "common/protocol.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace kv {
namespace {

// The project's monotonic clock (common/clock.h), unsigned for deadline maths.
uint64_t NowNs() { return static_cast<uint64_t>(MonotonicNanos()); }

// Sleeps until t, in slices of at most 5 ms so that a stop (the server went
// away, the time limit) is seen at once. Returns false if stopped first.
bool SleepUntilNs(uint64_t t, const std::atomic<bool>& stop) {
  constexpr uint64_t kSliceNs = 5'000'000;
  for (uint64_t now = NowNs(); now < t; now = NowNs()) {
    if (stop.load(std::memory_order_relaxed)) return false;
    const uint64_t until = t - now > kSliceNs ? now + kSliceNs : t;
    timespec ts;
    ts.tv_sec = static_cast<time_t>(until / 1'000'000'000ULL);
    ts.tv_nsec = static_cast<long>(until % 1'000'000'000ULL);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }
  return !stop.load(std::memory_order_relaxed);
}

struct alignas(64) Worker {
  std::atomic<uint64_t> progress{0};  // written by its thread only (relaxed)
  LatencyHistogram latency;
  LatencyHistogram uncorrected;
  std::array<uint64_t, kNumErrorKinds> errors{};
  uint64_t ok = 0;
  uint64_t warmup = 0;
  uint64_t answered = 0;   // requests that got a whole reply (warm-up too)
  uint64_t connected = 0;  // connections that were accepted
  uint64_t end_ns = 0;
  uint64_t max_lag_ns = 0;
  std::vector<TimelinePoint> timeline;
  std::string first_error;
};

struct Shared {
  const LoadConfig* config = nullptr;
  uint64_t start_ns = 0;              // set before `go` opens
  uint64_t measure_ns = 0;            // start + warm-up
  uint64_t deadline_ns = UINT64_MAX;  // the earlier of duration and time limit
  bool limit_binds = false;           // deadline_ns is the time limit's
  std::atomic<bool> time_limit_hit{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> server_gone{false};
  std::string gone_detail;  // written once, by the thread that set server_gone
  std::latch ready;
  std::latch go{1};
  Mutex done_mu;
  CondVar done_cv;                       // signalled (under done_mu) when running reaches 0
  uint32_t running GUARDED_BY(done_mu);  // threads not finished yet
  explicit Shared(uint32_t threads) : ready(threads), running(threads) {}
};

// One logical client's share of the run: its request quota and, with
// keep-alive, its connections t, t+T, t+2T, ... < C.
struct ClientPlan {
  uint64_t quota = 0;  // measured requests to do; UINT64_MAX = time-bounded
  uint32_t conns = 1;
};

ClientPlan PlanClient(const LoadConfig& cfg, uint32_t t) {
  const uint32_t nthreads = cfg.threads;
  ClientPlan plan;
  plan.quota = cfg.requests == 0 ? UINT64_MAX
                                 : cfg.requests / nthreads + (t < cfg.requests % nthreads ? 1 : 0);
  if (cfg.keepalive) {
    const uint32_t total = std::max(cfg.connections, nthreads);
    plan.conns = (total - t + nthreads - 1) / nthreads;
  }
  return plan;
}

// True (and the time limit noted, if it is the one that binds) once `now`
// is past the run's deadline: no request may start.
bool PastDeadline(Shared* shared, uint64_t now) {
  if (now < shared->deadline_ns) return false;
  if (shared->limit_binds) shared->time_limit_hit.store(true);
  return true;
}

// A refused connect: nobody listens. Stop every thread (see the header).
void NoteServerGone(Shared* shared, const std::string& detail) {
  if (!shared->server_gone.exchange(true)) shared->gone_detail = detail;
  shared->stop.store(true, std::memory_order_relaxed);
}

// The reply's grace for its server's end of stream (see lab_connection.h).
int EndGraceMs(const LoadConfig& cfg) { return std::min(cfg.timeout_ms, kEndOfStreamGraceMs); }

// The deadline of an exchange that starts at `start_ns`.
int64_t ExchangeDeadline(const LoadConfig& cfg, uint64_t start_ns) {
  return static_cast<int64_t>(start_ns) + int64_t{cfg.timeout_ms} * 1'000'000;
}

// Bytes came after a reply already booked as `was` (seen when an idle
// keep-alive connection spoke, or was closed): by the exchange's rule that
// reply was longer than a frame, so it is booked again as a long_reply.
void RebookLongReply(Worker* w, ErrorKind was) {
  if (was == ErrorKind::kNone && w->ok > 0) {
    --w->ok;
    auto it = std::find_if(w->timeline.rbegin(), w->timeline.rend(),
                           [](const TimelinePoint& p) { return p.ok > 0; });
    if (it != w->timeline.rend()) {
      --it->ok;
      ++it->errors;
    }
  } else if (was != ErrorKind::kNone && w->errors[static_cast<int>(was)] > 0) {
    --w->errors[static_cast<int>(was)];
  }
  ++w->errors[static_cast<int>(ErrorKind::kLongReply)];
  if (w->first_error.empty()) {
    w->first_error = std::string("long_reply after a keep-alive reply: ") + kLongReplyMeaning;
  }
}

// Reads what is left on an open connection whose replies were all read,
// until the server's end of stream or `deadline_ns`; a byte there re-books
// its last reply as a long_reply.
void ReadEndOf(LabConnection* conn, Worker* w, int64_t deadline_ns) {
  const ErrorKind was = conn->last().outcome();
  if (conn->ReadEnd(deadline_ns) == ErrorKind::kLongReply) RebookLongReply(w, was);
}

// A keep-alive connection at the end of a run, and whose stats it books into.
struct KeptConnection {
  LabConnection* conn;
  Worker* w;
};

// Ends the open connections among `kept` with one grace for all (every one
// is half-closed first).
void CloseKeptConnections(const LoadConfig& cfg, const std::vector<KeptConnection>& kept) {
  for (const KeptConnection& k : kept) k.conn->HalfClose();
  const int64_t deadline = MonotonicNanos() + int64_t{EndGraceMs(cfg)} * 1'000'000;
  for (const KeptConnection& k : kept) {
    ReadEndOf(k.conn, k.w, deadline);
    k.conn->Close();
  }
}

// One blocking request on `conn` sent at `sent`, connecting first if it is
// closed; a per-request connection is closed after its reply, once the
// server's end of stream shows that nothing more came. *done gets the time
// the reply was in (the close is not timed); *detail the connect error, or a
// description of any other failure.
ErrorKind BlockingRequest(const LoadConfig& cfg, LabConnection* conn, const Frame& request,
                          uint64_t sent, std::string* detail, Worker* w, uint64_t* done) {
  uint64_t start = sent;
  if (!conn->is_open()) {
    Status why;
    const ErrorKind kind = conn->Connect(cfg.endpoint, cfg.timeout_ms, &why,
                                         /*nodelay=*/cfg.keepalive);
    *done = NowNs();
    if (kind != ErrorKind::kNone) {
      *detail = why.message();
      return kind;
    }
    ++w->connected;
    start = *done;  // the exchange's deadline runs from here
  }
  ErrorKind kind = conn->RoundTrip(request, ExchangeDeadline(cfg, start));
  *done = NowNs();
  if (!cfg.keepalive) {
    conn->CloseAfterReply(EndGraceMs(cfg));
    kind = conn->last().outcome();  // bytes after the reply made it long
  }
  if (kind != ErrorKind::kNone) *detail = conn->last().Describe();
  return kind;
}

// Books one finished request into *w; returns true if it was measured (its
// intended start is past the warm-up).
bool Record(const Shared& shared, bool open_loop, uint64_t due, uint64_t sent, uint64_t done,
            ErrorKind kind, Worker* w) {
  if (kind == ErrorKind::kNone || kind == ErrorKind::kErrorReply) ++w->answered;
  if (due < shared.measure_ns) {
    ++w->warmup;
    return false;
  }
  if (kind == ErrorKind::kNone) {
    ++w->ok;
    w->latency.Record(done - due);
    if (open_loop) w->uncorrected.Record(done - sent);
  } else {
    ++w->errors[static_cast<int>(kind)];
  }
  if (open_loop && sent > due) w->max_lag_ns = std::max(w->max_lag_ns, sent - due);
  const std::size_t sec = static_cast<std::size_t>((done - shared.measure_ns) / 1'000'000'000ULL);
  if (sec < 100000) {
    if (w->timeline.size() <= sec) w->timeline.resize(sec + 1);
    ++(kind == ErrorKind::kNone ? w->timeline[sec].ok : w->timeline[sec].errors);
  }
  w->end_ns = done;
  return true;
}

// Open loop: thread t's request k is due at start + (k + t/T) * T/rate.
uint64_t DueTime(const Shared& shared, uint32_t t, uint64_t k) {
  const LoadConfig& cfg = *shared.config;
  const double interval_ns = 1e9 * cfg.threads / cfg.rate;
  return shared.start_ns +
         static_cast<uint64_t>((static_cast<double>(k) + static_cast<double>(t) / cfg.threads) *
                               interval_ns);
}

void FinishWorker(Shared* shared) {
  MutexLock guard(&shared->done_mu);
  if (--shared->running == 0) shared->done_cv.SignalAll();
}

// One client thread: blocking I/O, one request in flight at a time.
void RunWorker(Shared* shared, uint32_t t, Worker* w) {
  const LoadConfig& cfg = *shared->config;
  Workload workload(cfg.workload, t);
  const bool open_loop = cfg.rate > 0;
  // The default 50 us timer slack would make every scheduled send late.
  // Best effort, deliberately unchecked: without it sends are only later.
  if (open_loop) (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  const ClientPlan plan = PlanClient(cfg, t);
  std::vector<LabConnection> conns(plan.conns);
  uint32_t next_conn = 0;
  Frame request{};
  shared->ready.count_down();
  shared->go.wait();

  uint64_t measured = 0;
  for (uint64_t k = 0; measured < plan.quota; ++k) {
    if (shared->stop.load(std::memory_order_relaxed)) break;
    uint64_t due = open_loop ? DueTime(*shared, t, k) : NowNs();
    if (PastDeadline(shared, due)) break;
    if (open_loop && NowNs() < due && !SleepUntilNs(due, shared->stop)) break;
    workload.FillRequest(workload.Next(), &request);
    const uint64_t sent = NowNs();
    if (!open_loop) due = sent;
    LabConnection& conn = conns[next_conn];
    if (++next_conn == plan.conns) next_conn = 0;
    std::string detail;
    uint64_t done = 0;
    const ErrorKind kind = BlockingRequest(cfg, &conn, request, sent, &detail, w, &done);
    if (Record(*shared, open_loop, due, sent, done, kind, w)) {
      w->progress.store(++measured, std::memory_order_relaxed);
    }
    if (kind != ErrorKind::kNone && w->first_error.empty()) w->first_error = detail;
    if (kind == ErrorKind::kConnect) {
      NoteServerGone(shared, detail);
      break;
    }
  }
  std::vector<KeptConnection> kept;
  kept.reserve(conns.size());
  for (LabConnection& conn : conns) kept.push_back({&conn, w});
  CloseKeptConnections(cfg, kept);
  FinishWorker(shared);
}

// ---- keep-alive, closed loop: a few event-driven threads ------------------
//
// E = min(T, CPUs) threads, each with one epoll set, drive the T logical
// clients (client t on loop t % E). A logical client is exactly what a
// blocking worker is (its own workload stream, quota, connections used in
// turn, one request in flight, its own Worker stats), so results and
// traffic are the same; only the OS threads differ. Per request: one
// send(), one epoll_wait() share, one recv() (usually), two clock reads.
// Connects (once per connection) are blocking with the connect timeout;
// the receive timeout is enforced by a scan every 50 ms.

struct LogicalClient {
  uint32_t t = 0;
  uint32_t slot = 0;  // index in its loop's client list (epoll data)
  Worker* w = nullptr;
  Workload workload;
  ClientPlan plan;
  std::vector<LabConnection> conns;
  uint32_t next_conn = 0;
  LabConnection* busy = nullptr;  // connection with the request in flight
  Frame request{};
  uint64_t sent_ns = 0;
  uint64_t measured = 0;
  bool done = false;
  LogicalClient(const LoadConfig& cfg, uint32_t index, Worker* worker)
      : t(index),
        w(worker),
        workload(cfg.workload, index),
        plan(PlanClient(cfg, index)),
        conns(plan.conns) {}
};

class EventLoop {
 public:
  EventLoop(Shared* shared, std::vector<LogicalClient*> clients)
      : shared_(shared), cfg_(*shared->config), clients_(std::move(clients)) {}
  void Run();

 private:
  void StartNext(LogicalClient* c);
  void Conclude(LogicalClient* c, LabConnection* conn);
  void Finish(LogicalClient* c, ErrorKind kind, const std::string& detail);
  void OnEvent(uint64_t data);
  void OnReadable(LogicalClient* c);
  void ExpireTimeouts(uint64_t now);
  bool OpenConnection(LogicalClient* c, LabConnection* conn);
  void CloseConnections();

  Shared* shared_;
  const LoadConfig& cfg_;
  std::vector<LogicalClient*> clients_;
  UniqueFd ep_;  // the epoll set
  uint32_t active_ = 0;
};

// Connects `conn` (blocking, bounded by the connect timeout), makes it
// non-blocking and adds it to the epoll set. False: finished with an error.
bool EventLoop::OpenConnection(LogicalClient* c, LabConnection* conn) {
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
    } else if (::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, conn->fd(), &ev) != 0) {
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

// Starts c's next request, or marks c done. Requests that fail at once
// (connect, send) are booked and the next one is tried, as a worker would.
void EventLoop::StartNext(LogicalClient* c) {
  while (!c->done) {
    if (c->measured >= c->plan.quota || shared_->stop.load(std::memory_order_relaxed) ||
        PastDeadline(shared_, NowNs())) {
      c->done = true;
      --active_;
      return;
    }
    c->workload.FillRequest(c->workload.Next(), &c->request);
    LabConnection* conn = &c->conns[c->next_conn];
    if (++c->next_conn == c->plan.conns) c->next_conn = 0;
    c->sent_ns = NowNs();
    uint64_t start = c->sent_ns;
    if (!conn->is_open()) {
      if (!OpenConnection(c, conn)) continue;
      start = NowNs();  // the exchange's deadline runs from here
    }
    Exchange& ex = conn->BeginExchange(c->request, ExchangeDeadline(cfg_, start));
    SendRequest(conn->fd(), &ex);
    c->busy = conn;
    if (!ex.done()) return;  // wait for the reply
    Conclude(c, conn);
  }
}

// Books the finished exchange on conn (closed unless it keeps it).
void EventLoop::Conclude(LogicalClient* c, LabConnection* conn) {
  const ErrorKind kind = conn->EndExchange();
  Finish(c, kind, kind == ErrorKind::kNone ? std::string() : conn->last().Describe());
}

// Books c's request (in flight or failed to start) and moves on.
void EventLoop::Finish(LogicalClient* c, ErrorKind kind, const std::string& detail) {
  const uint64_t done = NowNs();
  c->busy = nullptr;
  if (Record(*shared_, /*open_loop=*/false, c->sent_ns, c->sent_ns, done, kind, c->w)) {
    c->w->progress.store(++c->measured, std::memory_order_relaxed);
  }
  if (kind != ErrorKind::kNone && c->w->first_error.empty()) c->w->first_error = detail;
  if (kind == ErrorKind::kConnect) NoteServerGone(shared_, detail);
}

// An event on connection (slot << 32 | index). One that is not carrying the
// client's request (an idle keep-alive connection the server closed, or
// sent something unasked on) is closed; it is reopened when its turn comes.
// Bytes on it belong to its last reply, which was longer than a frame.
void EventLoop::OnEvent(uint64_t data) {
  LogicalClient* c = clients_[data >> 32];
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
void EventLoop::OnReadable(LogicalClient* c) {
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
  StartNext(c);
}

void EventLoop::ExpireTimeouts(uint64_t now) {
  for (LogicalClient* c : clients_) {
    if (c->busy == nullptr) continue;
    c->busy->mutable_last()->Tick(static_cast<int64_t>(now));
    if (!c->busy->last().done()) continue;
    Conclude(c, c->busy);
    StartNext(c);
  }
}

// Both event loops' start: their epoll set (the status says why there is
// none), each client's slot, then the start line every worker waits at.
template <class Client>
Status OpenLoop(UniqueFd* ep, const std::vector<Client*>& clients, Shared* shared) {
  ep->Reset(::epoll_create1(EPOLL_CLOEXEC));
  Status status = *ep ? Status::OK() : Status::IOError("epoll_create1", errno);
  for (uint32_t i = 0; i < clients.size(); ++i) clients[i]->slot = i;
  shared->ready.count_down();
  shared->go.wait();
  return status;
}

void EventLoop::Run() {
  const Status ep_status = OpenLoop(&ep_, clients_, shared_);
  active_ = static_cast<uint32_t>(clients_.size());
  for (LogicalClient* c : clients_) {
    if (!ep_) {
      Finish(c, ErrorKind::kOther, ep_status.message());
    } else {
      StartNext(c);
    }
  }
  std::vector<epoll_event> events(std::max<std::size_t>(clients_.size(), 1));
  uint64_t last_scan = NowNs();
  while (active_ > 0 && ep_ && !shared_->stop.load(std::memory_order_relaxed)) {
    const int n = ::epoll_wait(ep_.get(), events.data(), static_cast<int>(events.size()), 50);
    for (int i = 0; i < n; ++i) OnEvent(events[i].data.u64);
    const uint64_t now = NowNs();
    if (now - last_scan >= 50'000'000ULL) {
      last_scan = now;
      ExpireTimeouts(now);
    }
  }
  CloseConnections();
  FinishWorker(shared_);
}

// At the end of the run: a connection with its request still in flight (the
// run was stopped) is closed as it is; every other open one is checked for
// bytes after its last reply.
void EventLoop::CloseConnections() {
  std::vector<KeptConnection> kept;
  for (LogicalClient* c : clients_) {
    if (c->busy != nullptr) c->busy->Close();
    for (LabConnection& conn : c->conns) kept.push_back({&conn, c->w});
  }
  CloseKeptConnections(cfg_, kept);
}

// ---- a connection per request, closed loop: event loops too --------------
//
// E = min(T, 2 x CPUs) threads (EventLoopCount) drive the T logical clients, each with
// one request in flight on a connection made for it and closed after it: the
// traffic of a blocking worker, on fewer threads and context switches. Per
// request: socket, connect (non-blocking), send, epoll_ctl, recv, close and
// a share of one epoll_wait. No socket has a timeout of its own: every phase
// has a deadline (the connect's from its start, the exchange's from the
// moment the connection is ready, the end of stream's grace from the reply),
// and epoll_wait never sleeps past the earliest one.
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

enum class OneShotPhase {
  kIdle,        // no request in flight
  kConnecting,  // connect() in progress; the request waits for EPOLLOUT
  kReply,       // request (being) sent, reply awaited
  kEnd,         // whole reply in, half-closed, the server's end awaited
};

struct OneShotClient {
  uint32_t slot = 0;  // index in its loop's client list (epoll data)
  Worker* w = nullptr;
  Workload workload;
  uint64_t quota = 0;
  uint64_t measured = 0;
  bool done = false;
  OneShotPhase phase = OneShotPhase::kIdle;
  bool watched = false;  // fd is in the epoll set
  UniqueFd fd;
  Frame request{};
  Exchange ex;
  uint64_t sent_ns = 0;  // the request's start (before socket())
  uint64_t done_ns = 0;  // when its reply (or its failure) was in
  uint64_t due_ns = 0;   // the phase's deadline
  OneShotClient(const LoadConfig& cfg, uint32_t index, Worker* worker)
      : w(worker), workload(cfg.workload, index), quota(PlanClient(cfg, index).quota) {}
};

class OneShotLoop {
 public:
  OneShotLoop(Shared* shared, std::vector<OneShotClient*> clients)
      : shared_(shared), cfg_(*shared->config), clients_(std::move(clients)) {}
  void Run();

 private:
  void StartNext(OneShotClient* c);
  bool Open(OneShotClient* c);
  bool TrySend(OneShotClient* c);
  bool Watch(OneShotClient* c, uint32_t events);
  void OnEvent(OneShotClient* c, uint32_t events);
  void OnReply(OneShotClient* c, uint32_t events);
  void OnEnd(OneShotClient* c);
  void ExpireDeadlines(uint64_t now);
  void SetDue(OneShotClient* c, uint64_t due);
  void ConnectFailed(OneShotClient* c, int err);
  void Conclude(OneShotClient* c, ErrorKind kind, const std::string& detail);
  int WaitMs(uint64_t now) const;

  Shared* shared_;
  const LoadConfig& cfg_;
  std::vector<OneShotClient*> clients_;
  UniqueFd ep_;
  uint32_t active_ = 0;
  uint64_t next_due_ = UINT64_MAX;  // no deadline of a client is earlier
};

void OneShotLoop::SetDue(OneShotClient* c, uint64_t due) {
  c->due_ns = due;
  next_due_ = std::min(next_due_, due);
}

// Books c's request and ends its connection (without a half-close: either
// the server's end is in, or the request failed and framing may be lost).
void OneShotLoop::Conclude(OneShotClient* c, ErrorKind kind, const std::string& detail) {
  c->fd.Reset();
  c->watched = false;
  c->phase = OneShotPhase::kIdle;
  if (Record(*shared_, /*open_loop=*/false, c->sent_ns, c->sent_ns, c->done_ns, kind, c->w)) {
    c->w->progress.store(++c->measured, std::memory_order_relaxed);
  }
  if (kind != ErrorKind::kNone && c->w->first_error.empty()) c->w->first_error = detail;
  if (kind == ErrorKind::kConnect) NoteServerGone(shared_, detail);
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
  if (::epoll_ctl(ep_.get(), c->watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd.get(), &ev) != 0) {
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
bool OneShotLoop::Open(OneShotClient* c) {
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

// Starts c's next request, or marks c done. Requests that fail at once are
// booked and the next one is tried, as a worker would.
void OneShotLoop::StartNext(OneShotClient* c) {
  while (!c->done) {
    if (c->measured >= c->quota || shared_->stop.load(std::memory_order_relaxed) ||
        PastDeadline(shared_, NowNs())) {
      c->done = true;
      --active_;
      return;
    }
    c->workload.FillRequest(c->workload.Next(), &c->request);
    c->sent_ns = NowNs();
    if (Open(c)) return;  // in flight
  }
}

void OneShotLoop::OnEvent(OneShotClient* c, uint32_t events) {
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
  if (c->phase == OneShotPhase::kIdle) StartNext(c);
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

// Ends every phase whose deadline passed: a connect or a request timed out;
// a server that keeps its end of a finished exchange open is left to it.
void OneShotLoop::ExpireDeadlines(uint64_t now) {
  next_due_ = UINT64_MAX;
  for (OneShotClient* c : clients_) {
    if (c->phase == OneShotPhase::kIdle) continue;
    if (now < c->due_ns) {
      next_due_ = std::min(next_due_, c->due_ns);
      continue;
    }
    if (c->phase == OneShotPhase::kConnecting) {
      ConnectFailed(c, ETIMEDOUT);
    } else {
      if (c->phase == OneShotPhase::kReply) c->done_ns = now;
      c->ex.Tick(static_cast<int64_t>(now));
      Conclude(c, c->ex.outcome(), c->ex.Describe());
    }
    StartNext(c);
  }
}

// How long epoll_wait may sleep: to the earliest deadline (rounded up), and
// at most 50 ms so that a stop is seen.
int OneShotLoop::WaitMs(uint64_t now) const {
  constexpr uint64_t kMaxNs = 50'000'000ULL;
  const uint64_t ns = next_due_ <= now ? 0 : std::min(next_due_ - now, kMaxNs);
  return static_cast<int>((ns + 999'999ULL) / 1'000'000ULL);
}

void OneShotLoop::Run() {
  const Status ep_status = OpenLoop(&ep_, clients_, shared_);
  active_ = static_cast<uint32_t>(clients_.size());
  for (OneShotClient* c : clients_) {
    if (!ep_) {
      c->sent_ns = c->done_ns = NowNs();
      Conclude(c, ErrorKind::kOther, ep_status.message());
      c->done = true;
      --active_;
    } else {
      StartNext(c);
    }
  }
  std::vector<epoll_event> events(std::max<std::size_t>(clients_.size(), 1));
  while (active_ > 0 && !shared_->stop.load(std::memory_order_relaxed)) {
    const int n =
        ::epoll_wait(ep_.get(), events.data(), static_cast<int>(events.size()), WaitMs(NowNs()));
    for (int i = 0; i < n; ++i) OnEvent(clients_[events[i].data.u64], events[i].events);
    const uint64_t now = NowNs();
    if (now >= next_due_) ExpireDeadlines(now);
  }
  // Stopped: a request still in flight is dropped as it is.
  for (OneShotClient* c : clients_) c->fd.Reset();
  FinishWorker(shared_);
}

// Closed loop: the event loops (keep-alive or a connection per request).
bool UseEventLoops(const LoadConfig& config) { return config.rate <= 0; }

// One keep-alive loop per CPU. One-shot loops spend most of their time in
// the kernel's connection set-up and tear-down and then wait for a batch of
// replies: two per CPU keep a CPU busy with one loop's work while the other
// waits, where one per CPU leaves it idle (measured on the 2-core machine:
// more requests per second at the same CPU per request; three per CPU cost
// more CPU per request).
uint32_t EventLoopCount(const LoadConfig& config) {
  const uint32_t cpus = std::max(1u, std::thread::hardware_concurrency());
  return std::min(config.threads, config.keepalive ? cpus : 2 * cpus);
}

// Sets the clock: start, end of warm-up, and the deadline (the earlier of
// warm-up + duration and the time limit).
void StartClock(const LoadConfig& config, Shared* shared) {
  shared->start_ns = NowNs();
  shared->measure_ns = shared->start_ns + static_cast<uint64_t>(config.warmup_s * 1e9);
  const uint64_t limit_ns = shared->start_ns + static_cast<uint64_t>(config.time_limit_s * 1e9);
  if (config.duration_s > 0) {
    shared->deadline_ns = shared->measure_ns + static_cast<uint64_t>(config.duration_s * 1e9);
  }
  if (limit_ns < shared->deadline_ns) {
    shared->deadline_ns = limit_ns;
    shared->limit_binds = true;
  }
}

void PrintProgress(const LoadConfig& config, const Shared& shared, uint64_t now,
                   const std::vector<std::unique_ptr<Worker>>& workers) {
  uint64_t done = 0;
  for (const auto& w : workers) done += w->progress.load(std::memory_order_relaxed);
  const double t = static_cast<double>(now - shared.start_ns) / 1e9;
  if (t < config.warmup_s) {
    std::fprintf(stderr, "client: %.0f s, warming up\n", t);
  } else if (config.requests > 0) {
    std::fprintf(stderr, "client: %.0f s, %llu of %llu requests\n", t,
                 static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(config.requests));
  } else {
    std::fprintf(stderr, "client: %.0f s of %.0f s, %llu requests\n", t,
                 config.warmup_s + config.duration_s, static_cast<unsigned long long>(done));
  }
}

// Waits for the workers; prints progress for long runs unless quiet.
void WaitForWorkers(const LoadConfig& config, Shared* shared,
                    const std::vector<std::unique_ptr<Worker>>& workers) {
  MutexLock guard(&shared->done_mu);
  uint64_t last_print = shared->start_ns;
  while (shared->running > 0) {
    shared->done_cv.WaitFor(&shared->done_mu, std::chrono::milliseconds(250));
    const uint64_t now = NowNs();
    if (config.progress && shared->running > 0 && now - shared->start_ns >= 3'000'000'000ULL &&
        now - last_print >= 1'000'000'000ULL) {
      last_print = now;
      PrintProgress(config, *shared, now, workers);
    }
  }
}

LoadResult MergeWorkers(const LoadConfig& config, const Shared& shared,
                        const std::vector<std::unique_ptr<Worker>>& workers) {
  LoadResult r;
  uint64_t end = shared.measure_ns;
  uint64_t max_lag = 0;
  for (const auto& w : workers) {
    r.ok += w->ok;
    for (int k = 0; k < kNumErrorKinds; ++k) r.errors[k] += w->errors[k];
    r.warmup_requests += w->warmup;
    r.answered += w->answered;
    r.connected += w->connected;
    r.latency.Merge(w->latency);
    r.uncorrected.Merge(w->uncorrected);
    end = std::max(end, w->end_ns);
    max_lag = std::max(max_lag, w->max_lag_ns);
    if (r.timeline.size() < w->timeline.size()) r.timeline.resize(w->timeline.size());
    for (std::size_t s = 0; s < w->timeline.size(); ++s) {
      r.timeline[s].ok += w->timeline[s].ok;
      r.timeline[s].errors += w->timeline[s].errors;
    }
    if (r.first_error.empty()) r.first_error = w->first_error;
    r.client_ok.push_back(w->ok);
  }
  r.requests = r.ok + r.total_errors();
  r.elapsed_s = static_cast<double>(end - shared.measure_ns) / 1e9;
  if (config.duration_s > 0 && config.rate > 0) {
    // An open-loop timed run's window is the schedule, not the last reply.
    r.elapsed_s = std::max(r.elapsed_s, config.duration_s);
  }
  r.max_send_lag_us = static_cast<double>(max_lag) / 1e3;
  r.server_gone = shared.server_gone.load();
  r.gone_detail = shared.gone_detail;
  r.time_limit_hit = shared.time_limit_hit.load();
  return r;
}

}  // namespace

uint64_t LoadResult::total_errors() const {
  uint64_t sum = 0;
  for (uint64_t e : errors) sum += e;
  return sum;
}

void RunLoad(const LoadConfig& config, LoadResult* result) {
  const uint32_t nthreads = config.threads;
  const bool events = UseEventLoops(config);
  const uint32_t os_threads = events ? EventLoopCount(config) : nthreads;
  Shared shared(os_threads);
  shared.config = &config;
  std::vector<std::unique_ptr<Worker>> workers;
  workers.reserve(nthreads);
  for (uint32_t t = 0; t < nthreads; ++t) workers.push_back(std::make_unique<Worker>());
  std::vector<std::unique_ptr<LogicalClient>> clients;
  std::vector<std::unique_ptr<EventLoop>> loops;
  std::vector<std::unique_ptr<OneShotClient>> one_shot_clients;
  std::vector<std::unique_ptr<OneShotLoop>> one_shot_loops;
  if (events && config.keepalive) {
    std::vector<std::vector<LogicalClient*>> share(os_threads);
    for (uint32_t t = 0; t < nthreads; ++t) {
      clients.push_back(std::make_unique<LogicalClient>(config, t, workers[t].get()));
      share[t % os_threads].push_back(clients.back().get());
    }
    for (auto& s : share) loops.push_back(std::make_unique<EventLoop>(&shared, std::move(s)));
  } else if (events) {
    std::vector<std::vector<OneShotClient*>> share(os_threads);
    for (uint32_t t = 0; t < nthreads; ++t) {
      one_shot_clients.push_back(std::make_unique<OneShotClient>(config, t, workers[t].get()));
      share[t % os_threads].push_back(one_shot_clients.back().get());
    }
    for (auto& s : share) {
      one_shot_loops.push_back(std::make_unique<OneShotLoop>(&shared, std::move(s)));
    }
  }
  std::vector<std::thread> threads;
  threads.reserve(os_threads);
  for (uint32_t i = 0; i < os_threads; ++i) {
    if (!events) {
      threads.emplace_back(RunWorker, &shared, i, workers[i].get());
    } else if (config.keepalive) {
      threads.emplace_back(&EventLoop::Run, loops[i].get());
    } else {
      threads.emplace_back(&OneShotLoop::Run, one_shot_loops[i].get());
    }
  }
  shared.ready.wait();
  // Agents on several hosts start together: sleep to the agreed wall-clock time.
  const timespec at{static_cast<time_t>(config.start_at_unix_ns / 1'000'000'000ULL),
                    static_cast<long>(config.start_at_unix_ns % 1'000'000'000ULL)};
  while (config.start_at_unix_ns > 0 &&
         ::clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, nullptr) == EINTR) {
  }
  StartClock(config, &shared);
  shared.go.count_down();
  WaitForWorkers(config, &shared, workers);
  for (auto& th : threads) th.join();
  *result = MergeWorkers(config, shared, workers);
}

}  // namespace kv
