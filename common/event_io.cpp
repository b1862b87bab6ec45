#include "common/event_io.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include "common/clock.h"
#include "common/net.h"
#include "common/unique_fd.h"

namespace kv {

// What an epoll event's data.ptr points at (nullptr: the loop's wake-up).
struct EventIoModel::Target {
  enum class Kind { kConn, kListener };
  explicit Target(Kind k) : kind(k) {}
  const Kind kind;
};

struct EventIoModel::Listener : Target {
  explicit Listener(int f) : Target(Kind::kListener), fd(f) {}
  const int fd;  // owned by server.cpp; outlives StopAccepting()
};

struct EventIoModel::Conn : Target {
  explicit Conn(Loop* l) : Target(Kind::kConn), loop(l) {}
  ConnectionCore& core() { return *core_storage; }

  Loop* const loop;
  UniqueFd fd;
  std::optional<ConnectionCore> core_storage;  // re-made for each connection
  bool busy = false;                           // with a worker
  bool registered = false;                     // in the loop's epoll set
  bool out_watched = false;                    // epoll: EPOLLOUT in its events
  // The last recv found the socket empty (it returned less than it asked
  // for): the next read waits for epoll to say there is more, instead of a
  // recv that would only say EAGAIN. So a keep-alive request costs one recv.
  bool drained = false;
  // epoll: the peer hung up (or an error is pending). No edge will follow,
  // so reading goes on until recv says so.
  bool hup_seen = false;
  // pool: handed over and given to a worker for its first look; seen once
  // it is back on the loop (the loop then closes it if its peer had).
  bool unseen = false;
  Conn* next = nullptr;       // in a ConnQueue, or the loop's free list
  Conn* open_prev = nullptr;  // the loop's list of open connections
  Conn* open_next = nullptr;
  int64_t wait_deadline = 0;  // while waiting on the loop
};

struct EventIoModel::Loop {
  UniqueFd epfd;
  UniqueFd wake_fd;
  Mutex mu;
  CondVar burst_done;
  std::vector<int> incoming GUARDED_BY(mu);  // new connections (Dispatch)
  ConnQueue returned GUARDED_BY(mu);         // back from a worker
  bool quit GUARDED_BY(mu) = false;
  // The loop is in (or about to enter) epoll_wait with nothing handed to it:
  // the next hand-off must write the eventfd. A busy loop finds hand-offs by
  // itself, so they cost no wake-up write.
  bool sleeping GUARDED_BY(mu) = false;
  // Accepting (TakeListeners): the policy, null once StopAccepting began;
  // whether a burst is under way; what the bursts accepted.
  AcceptPolicy* policy GUARDED_BY(mu) = nullptr;
  bool in_burst GUARDED_BY(mu) = false;
  AcceptStats accepted GUARDED_BY(mu);
  // Connections given to this loop (added: an atomic add by whichever thread
  // gives one, usually the loop itself) and closed (by the loop alone), on
  // the loop's own lines: no counter shared by every connection.
  std::atomic<uint64_t> added{0};
  std::atomic<uint64_t> closed{0};
  // Connections open on this loop (closed is read first: a connection
  // counted closed was counted added before).
  uint64_t open() const {
    const uint64_t c = closed.load(std::memory_order_acquire);
    return added.load(std::memory_order_acquire) - c;
  }
  // Loop thread only:
  std::vector<std::unique_ptr<Conn>> records;  // every Conn this loop made
  Conn* free_list = nullptr;                   // records not in use (by next)
  Conn* open_list = nullptr;                   // records in use
  std::vector<int> adopting;                   // incoming, taken out of the lock
  std::vector<Conn*> due;                      // the deadline scan's list
  bool stop_applied = false;
  int64_t next_scan = std::numeric_limits<int64_t>::max();
  int64_t accept_resume = 0;  // > 0: listeners left out of epoll until then
  int64_t last_handled = 0;   // inline: when the loop last ran a request
  bool shard_dirty = false;   // inline: the timing shard holds samples
};

namespace {

constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();
// How long a worker (or an inline loop) waits for work before it hands its
// timing shard off (connection.cpp has the same rule for its threads).
constexpr int64_t kQuietNs = 10'000'000;
constexpr int kMaxEvents = 64;
// Drain looks this often whether every connection has closed.
constexpr int64_t kDrainPollNs = 2'000'000;
// epoll: a connection's events, registered once.
constexpr uint32_t kEdgeEvents = EPOLLIN | EPOLLRDHUP | EPOLLET;

bool Ctl(int epfd, int op, int fd, void* ptr, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = ptr;
  return epoll_ctl(epfd, op, fd, &ev) == 0;
}

int TimeoutMs(int64_t deadline, int64_t now) {
  if (deadline == kNoDeadline) return -1;
  const int64_t left = deadline - now;
  return left <= 0 ? 0
                   : static_cast<int>(std::min<int64_t>((left + 999'999) / 1'000'000, 3'600'000));
}

}  // namespace

void EventIoModel::ConnQueue::Push(Conn* conn) {
  conn->next = nullptr;
  if (tail == nullptr) {
    head = conn;
  } else {
    tail->next = conn;
  }
  tail = conn;
}

EventIoModel::Conn* EventIoModel::ConnQueue::Pop() {
  Conn* conn = head;
  if (conn != nullptr) {
    head = conn->next;
    if (head == nullptr) tail = nullptr;
    conn->next = nullptr;
  }
  return conn;
}

EventIoModel::Conn* EventIoModel::ConnQueue::TakeAll() {
  Conn* all = head;
  head = tail = nullptr;
  return all;
}

EventIoModel::EventIoModel(const Config& config, RequestHandler* handler,
                           const ConnectionLimits& limits)
    : mode_(config.mode),
      inline_(config.mode == Mode::kEpoll && config.inline_requests),
      handler_(handler),
      limits_(limits) {
  const std::size_t loops = mode_ == Mode::kPool ? 1 : std::max<std::size_t>(config.loops, 1);
  for (std::size_t i = 0; i < loops && init_status_.ok(); ++i) init_status_ = MakeLoop();
  if (!init_status_.ok()) return;  // no thread started; Dispatch refuses
  for (auto& loop : loops_) {
    threads_.emplace_back([this, l = loop.get()] { LoopMain(l); });
  }
  const std::size_t workers = inline_ ? 0 : std::max<std::size_t>(config.workers, 1);
  for (std::size_t i = 0; i < workers; ++i) {
    threads_.emplace_back([this] { WorkerMain(); });
  }
}

Status EventIoModel::MakeLoop() {
  auto loop = std::make_unique<Loop>();
  loop->epfd.Reset(epoll_create1(EPOLL_CLOEXEC));
  if (!loop->epfd) return Status::IOError("epoll_create1", errno);
  loop->wake_fd.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!loop->wake_fd) return Status::IOError("eventfd", errno);
  if (!Ctl(loop->epfd.get(), EPOLL_CTL_ADD, loop->wake_fd.get(), nullptr, EPOLLIN)) {
    return Status::IOError("epoll_ctl add eventfd", errno);
  }
  // Hand-offs swap these two lists, so both need room for a burst up front:
  // a push into whichever holds none would allocate on a warm server.
  {
    MutexLock guard(&loop->mu);
    loop->incoming.reserve(kAcceptBurst);
  }
  loop->adopting.reserve(kAcceptBurst);
  loops_.push_back(std::move(loop));
  return Status::OK();
}

EventIoModel::~EventIoModel() {
  JoinAll();  // then the loops' connections close with them (UniqueFd)
}

std::size_t EventIoModel::open_connections() const {
  uint64_t open = 0;
  for (const auto& loop : loops_) open += loop->open();
  return static_cast<std::size_t>(open);
}

std::size_t EventIoModel::unseen_connections() const {
  return static_cast<std::size_t>(std::max<int64_t>(unseen_.load(std::memory_order_acquire), 0));
}

void EventIoModel::Seen() {
  // Release: a close made before it is seen by whoever reads 0 here.
  unseen_.fetch_sub(1, std::memory_order_release);
}

void EventIoModel::Wake(Loop* loop) {
  const uint64_t one = 1;
  // Only EAGAIN can fail it (the counter is at its maximum): the eventfd is
  // then readable already, which is all a wake-up needs.
  if (write(loop->wake_fd.get(), &one, sizeof one) < 0 && errno != EAGAIN) {
    // Unreachable with a valid eventfd; the loop still wakes at its next deadline.
  }
}

bool EventIoModel::Dispatch(int fd) {
  if (!init_status_.ok()) {
    RefuseConnection(fd, "server cannot serve: " + init_status_.message());
    errno = EIO;
    return false;
  }
  HandOff(loops_[next_loop_++ % loops_.size()].get(), fd);
  return true;
}

void EventIoModel::HandOff(Loop* loop, int fd) {
  unseen_.fetch_add(1, std::memory_order_relaxed);
  loop->added.fetch_add(1, std::memory_order_acq_rel);
  bool wake;
  {
    MutexLock guard(&loop->mu);
    loop->incoming.push_back(fd);
    wake = std::exchange(loop->sleeping, false);
  }
  if (wake) Wake(loop);
}

EventIoModel::Loop* EventIoModel::LeastLoaded(Loop* mine) const {
  Loop* best = mine;
  uint64_t best_open = mine->open();
  for (const auto& loop : loops_) {
    if (const uint64_t o = loop->open(); o + 1 < best_open) {
      best = loop.get();
      best_open = o;
    }
  }
  return best;
}

bool EventIoModel::WatchListeners(Loop* loop, bool on) {
  bool ok = true;
  for (const auto& l : listeners_) {
    if (on) {
      ok &= Ctl(loop->epfd.get(), EPOLL_CTL_ADD, l->fd, static_cast<Target*>(l.get()),
                EPOLLIN | EPOLLEXCLUSIVE);
    } else {
      // ENOENT when a pause had taken it out already: nothing to undo.
      Ctl(loop->epfd.get(), EPOLL_CTL_DEL, l->fd, nullptr, 0);
    }
  }
  return ok;
}

bool EventIoModel::TakeListeners(const std::vector<int>& listeners, AcceptPolicy* policy) {
  if (mode_ != Mode::kEpoll || !init_status_.ok() || listeners.empty()) return false;
  for (const int fd : listeners) listeners_.push_back(std::make_unique<Listener>(fd));
  bool ok = true;
  for (auto& loop : loops_) {
    MutexLock guard(&loop->mu);
    loop->policy = policy;
    ok &= WatchListeners(loop.get(), true);
  }
  if (ok) return true;
  StopAccepting();  // the accept loop accepts instead
  return false;
}

AcceptStats EventIoModel::StopAccepting() {
  AcceptStats total;
  for (auto& loop : loops_) {
    MutexLock guard(&loop->mu);
    loop->policy = nullptr;
    while (loop->in_burst) loop->burst_done.Wait(&loop->mu);
    WatchListeners(loop.get(), false);
    total += loop->accepted;
  }
  return total;
}

void EventIoModel::AcceptOnLoop(Loop* loop, const Listener* listener, int64_t now) {
  AcceptPolicy* policy;
  {
    MutexLock guard(&loop->mu);
    policy = loop->policy;
    if (policy == nullptr) return;  // StopAccepting has begun
    loop->in_burst = true;
  }
  AcceptStats stats;
  // A loop accepts only as fast as it serves: it never waits for unseen ones.
  const auto load = [this] {
    IoLoad l;
    l.open = open_connections();
    return l;
  };
  const bool go_on =
      AcceptBurst(policy, listener->fd, &stats, load, [this, loop, now](UniqueFd conn) {
        // Whichever loop wakes first accepts, so a burst of connects could
        // all land on one loop: a connection goes to a loop with at least
        // two fewer open, else it stays here (no hand-off).
        Loop* to = LeastLoaded(loop);
        if (to != loop) {
          HandOff(to, conn.Release());
          return true;
        }
        loop->added.fetch_add(1, std::memory_order_acq_rel);
        AdoptConn(loop, conn.Release(), now, /*handed=*/false);
        return true;
      }) != BurstEnd::kPause;
  {
    MutexLock guard(&loop->mu);
    loop->in_burst = false;
    loop->accepted += stats;
    if (!go_on && loop->policy != nullptr) {
      // Out of resources: leave the listeners to the kernel backlog a while.
      WatchListeners(loop, false);
      loop->accept_resume = now + kAcceptPauseNs;
      loop->next_scan = std::min(loop->next_scan, loop->accept_resume);
    }
  }
  loop->burst_done.SignalAll();
}

void EventIoModel::ResumeAccepting(Loop* loop, int64_t now) {
  if (loop->accept_resume == 0) return;
  if (now < loop->accept_resume) {
    loop->next_scan = std::min(loop->next_scan, loop->accept_resume);
    return;
  }
  loop->accept_resume = 0;
  MutexLock guard(&loop->mu);
  if (loop->policy != nullptr) WatchListeners(loop, true);
}

void EventIoModel::ToWorkers(Conn* conn) {
  conn->busy = true;
  {
    MutexLock guard(&work_mu_);
    work_.Push(conn);
  }
  work_cv_.Signal();
}

void EventIoModel::BackToLoop(Conn* conn) {
  Loop* loop = conn->loop;
  bool wake;
  {
    MutexLock guard(&loop->mu);
    loop->returned.Push(conn);
    wake = std::exchange(loop->sleeping, false);
  }
  if (wake) Wake(loop);
}

EventIoModel::Conn* EventIoModel::NewConn(Loop* loop, int fd, int64_t now) {
  Conn* conn = loop->free_list;
  if (conn != nullptr) {
    loop->free_list = conn->next;
  } else {
    loop->records.push_back(std::make_unique<Conn>(loop));
    conn = loop->records.back().get();
  }
  conn->fd.Reset(fd);
  conn->core_storage.emplace(limits_, now);
  conn->busy = conn->registered = conn->out_watched = false;
  conn->drained = conn->hup_seen = false;
  conn->next = conn->open_prev = nullptr;
  conn->open_next = loop->open_list;
  if (loop->open_list != nullptr) loop->open_list->open_prev = conn;
  loop->open_list = conn;
  conn->wait_deadline = 0;
  return conn;
}

void EventIoModel::RecycleConn(Loop* loop, Conn* conn) {
  conn->fd.Reset();  // closing it also takes it out of the epoll set
  (conn->open_prev != nullptr ? conn->open_prev->open_next : loop->open_list) = conn->open_next;
  if (conn->open_next != nullptr) conn->open_next->open_prev = conn->open_prev;
  conn->next = loop->free_list;
  loop->free_list = conn;
}

void EventIoModel::CloseConn(Loop* loop, Conn* conn) {
  if (conn->core().cut_by_shutdown()) handler_->CountCutByShutdown();
  RecycleConn(loop, conn);
  loop->closed.store(loop->closed.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void EventIoModel::WaitOnLoop(Loop* loop, Conn* conn, uint32_t events) {
  conn->wait_deadline = conn->core().deadline();
  loop->next_scan = std::min(loop->next_scan, conn->wait_deadline);
  const int epfd = loop->epfd.get();
  bool ok = true;
  if (mode_ == Mode::kPool) {  // one-shot: armed for each wait
    ok =
        Ctl(epfd, EPOLL_CTL_MOD, conn->fd.get(), static_cast<Target*>(conn), events | EPOLLONESHOT);
  } else if (!conn->registered || ((events & EPOLLOUT) != 0 && !conn->out_watched)) {
    // Edge-triggered, once (and once more to add EPOLLOUT): registering
    // after the first read means a request that came with the connection
    // costs no event.
    conn->out_watched = (events & EPOLLOUT) != 0;
    ok = Ctl(epfd, conn->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, conn->fd.get(),
             static_cast<Target*>(conn), kEdgeEvents | (events & EPOLLOUT));
    conn->registered = true;
  }
  if (!ok) {
    conn->core().OnError();  // cannot wait for it: drop it
    CloseConn(loop, conn);
  }
}

bool EventIoModel::WriteOnLoop(Loop* loop, Conn* conn, int64_t now) {
  ConnectionCore& core = conn->core();
  const ssize_t r =
      send(conn->fd.get(), core.out_data(), core.out_size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (r > 0) {
    core.OnWritten(static_cast<std::size_t>(r), now);
  } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    WaitOnLoop(loop, conn, EPOLLOUT);
    return false;
  } else if (!(r < 0 && errno == EINTR)) {
    core.OnError();
  }
  return true;
}

bool EventIoModel::ReadOnLoop(Loop* loop, Conn* conn, int64_t now) {
  ConnectionCore& core = conn->core();
  const std::size_t space = core.in_space_size();
  const ssize_t r = conn->drained ? -1 : recv(conn->fd.get(), core.in_space(), space, MSG_DONTWAIT);
  if (r > 0) {
    conn->drained = static_cast<std::size_t>(r) < space && !conn->hup_seen;
    core.OnBytes(static_cast<std::size_t>(r), MonotonicNanos());
  } else if (r == 0) {
    core.OnEof(now);
  } else if (conn->drained || errno == EAGAIN || errno == EWOULDBLOCK) {
    conn->drained = true;
    WaitOnLoop(loop, conn, EPOLLIN | EPOLLRDHUP);
    return false;
  } else if (errno != EINTR) {
    core.OnError();
  }
  return true;
}

void EventIoModel::HandleFrame(ConnectionCore& core, ConnectionCore::Action action,
                               int64_t queue_ns) {
  if (action == ConnectionCore::Action::kHandle) {
    handler_->Handle(core.frame(), core.frame_received_ns(), core.reply_slot(), queue_ns);
  } else {
    handler_->Reject(core.reject_message(), core.reply_slot());
  }
  core.FrameDone();
}

void EventIoModel::DriveOnLoop(Loop* loop, Conn* conn, int64_t now) {
  ConnectionCore& core = conn->core();
  if (stopping_.load(std::memory_order_acquire) && !core.stopping()) {
    core.OnStop(now);
  }
  for (;;) {
    switch (const ConnectionCore::Action action = core.Next(now)) {
      case ConnectionCore::Action::kHandle:
      case ConnectionCore::Action::kReject:
        if (!inline_) {
          ToWorkers(conn);  // the lock and the delay block: not on the loop
          return;
        }
        HandleFrame(core, action, 0);  // run by the thread that read it
        loop->shard_dirty = true;
        loop->last_handled = now;
        break;
      case ConnectionCore::Action::kWrite:
        if (!WriteOnLoop(loop, conn, now)) return;  // waits on epoll
        break;
      case ConnectionCore::Action::kRead:
        if (!ReadOnLoop(loop, conn, now)) return;  // waits on epoll
        break;
      case ConnectionCore::Action::kClose:
        CloseConn(loop, conn);
        return;
    }
  }
}

bool EventIoModel::WriteOnWorker(Conn* conn) {
  ConnectionCore& core = conn->core();
  const ssize_t r =
      send(conn->fd.get(), core.out_data(), core.out_size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (r > 0) {
    core.OnWritten(static_cast<std::size_t>(r), MonotonicNanos());
    return true;
  }
  if (r < 0 && errno == EINTR) return true;
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  core.OnError();
  return true;
}

bool EventIoModel::ReadOnWorker(Conn* conn) {
  if (conn->drained) return false;
  ConnectionCore& core = conn->core();
  const std::size_t space = core.in_space_size();
  const ssize_t r = recv(conn->fd.get(), core.in_space(), space, MSG_DONTWAIT);
  if (r > 0) {
    conn->drained = static_cast<std::size_t>(r) < space;
    core.OnBytes(static_cast<std::size_t>(r), MonotonicNanos());
    return true;
  }
  if (r == 0) {
    core.OnEof(MonotonicNanos());
    return true;
  }
  if (errno == EINTR) return true;
  if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
  core.OnError();
  return true;
}

void EventIoModel::DriveOnWorker(Conn* conn) {
  ConnectionCore& core = conn->core();
  const bool pool = mode_ == Mode::kPool;  // pool workers do their own I/O
  bool more = true;
  while (more) {
    int64_t now = MonotonicNanos();
    if (stopping_.load(std::memory_order_acquire) && !core.stopping()) {
      core.OnStop(now);
    }
    switch (const ConnectionCore::Action action = core.Next(now)) {
      case ConnectionCore::Action::kHandle:
      case ConnectionCore::Action::kReject:
        HandleFrame(core, action, now - core.frame_received_ns());
        break;
      case ConnectionCore::Action::kWrite:
        more = pool && WriteOnWorker(conn);  // else the loop writes
        break;
      case ConnectionCore::Action::kRead:
        more = pool && ReadOnWorker(conn);  // else: no whole frame left
        break;
      case ConnectionCore::Action::kClose:
        more = false;  // the loop owns the set of connections; it closes
        break;
    }
  }
  BackToLoop(conn);
}

bool EventIoModel::WaitForWork(int64_t max_ns) {
  const int64_t until = max_ns < 0 ? kNoDeadline : MonotonicNanos() + max_ns;
  while (!quit_ && work_.empty()) {
    if (max_ns < 0) {
      work_cv_.Wait(&work_mu_);
      continue;
    }
    const int64_t left = until - MonotonicNanos();
    if (left <= 0) return false;
    work_cv_.WaitFor(&work_mu_, std::chrono::nanoseconds(left));
  }
  return true;
}

EventIoModel::Conn* EventIoModel::TakeWork() {
  {
    // Work usually comes back within microseconds under load: wait a
    // little first, and hand the timing shard off (a shared lock) only if
    // the worker really goes idle (latency_log.h).
    MutexLock guard(&work_mu_);
    if (WaitForWork(kQuietNs)) return work_.Pop();  // nullptr: quit
  }
  handler_->FlushThread();
  MutexLock guard(&work_mu_);
  WaitForWork(-1);
  return work_.Pop();
}

void EventIoModel::WorkerMain() {
  while (Conn* conn = TakeWork()) DriveOnWorker(conn);
  handler_->FlushThread();
}

int64_t EventIoModel::PollEvents(Loop* loop) {
  epoll_event events[kMaxEvents];
  int64_t wake_at = loop->next_scan;
  // An inline loop hands its timing shard off once it has been quiet a while.
  if (loop->shard_dirty) wake_at = std::min(wake_at, loop->last_handled + kQuietNs);
  int timeout_ms = TimeoutMs(wake_at, MonotonicNanos());
  {
    // Sleep only with nothing handed over; else just look (timeout 0).
    MutexLock guard(&loop->mu);
    if (loop->quit || !loop->incoming.empty() || !loop->returned.empty()) {
      timeout_ms = 0;
    } else {
      loop->sleeping = true;
    }
  }
  const int n = epoll_wait(loop->epfd.get(), events, kMaxEvents, timeout_ms);
  {
    MutexLock guard(&loop->mu);
    loop->sleeping = false;
  }
  // n < 0 is EINTR (a signal) or a bug (EBADF, EINVAL): either way there is
  // nothing to do but go round (deadlines and hand-offs still run).
  const int64_t now = MonotonicNanos();
  for (int i = 0; i < n; ++i) OnEvent(loop, events[i], now);
  if (loop->shard_dirty && n <= 0 && now - loop->last_handled >= kQuietNs) {
    handler_->FlushThread();
    loop->shard_dirty = false;
  }
  return now;
}

void EventIoModel::OnEvent(Loop* loop, const epoll_event& event, int64_t now) {
  auto* target = static_cast<Target*>(event.data.ptr);
  if (target == nullptr) {
    uint64_t count;
    // Non-blocking: EAGAIN if another wake-up read it first; either way
    // the eventfd is clear for the next one.
    if (read(loop->wake_fd.get(), &count, sizeof count) < 0 && errno != EAGAIN) {
      // Unreachable with a valid eventfd.
    }
    return;
  }
  if (target->kind == Target::Kind::kListener) {
    AcceptOnLoop(loop, static_cast<const Listener*>(target), now);
    return;
  }
  auto* conn = static_cast<Conn*>(target);
  // Closed earlier in this batch of events (its record is free): stale.
  if (!conn->fd) return;
  if (mode_ == Mode::kEpoll) {
    // Edge-triggered: remember the edge even while a worker has the
    // connection; the loop reads when it is back.
    conn->drained = false;
    if ((event.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) conn->hup_seen = true;
    if (!conn->busy) DriveOnLoop(loop, conn, now);
    return;
  }
  if (conn->busy) return;
  conn->drained = false;  // readable (or writable, or hung up): look
  if (!stopping_.load(std::memory_order_acquire)) {
    ToWorkers(conn);  // a worker reads, handles and writes
  } else {
    DriveOnLoop(loop, conn, now);
  }
}

void EventIoModel::AdoptConn(Loop* loop, int fd, int64_t now, bool handed) {
  Conn* conn = NewConn(loop, fd, now);
  if (mode_ == Mode::kPool) {
    // Registered disarmed; the first wait arms it.
    if (!Ctl(loop->epfd.get(), EPOLL_CTL_ADD, fd, static_cast<Target*>(conn), EPOLLONESHOT)) {
      conn->core().OnError();
      CloseConn(loop, conn);
      if (handed) Seen();
      return;
    }
    conn->registered = true;
    if (!stopping_.load(std::memory_order_acquire)) {
      conn->unseen = handed;  // seen when the worker gives it back
      ToWorkers(conn);        // the request has usually arrived with the accept
      return;
    }
  }
  DriveOnLoop(loop, conn, now);  // epoll: registered at its first wait
  if (handed) Seen();            // (conn may be a worker's by now: not touched)
}

bool EventIoModel::TakeHandoffs(Loop* loop, int64_t now) {
  bool quit;
  Conn* returned;
  {
    MutexLock guard(&loop->mu);
    loop->adopting.swap(loop->incoming);
    returned = loop->returned.TakeAll();
    quit = loop->quit;
  }
  for (const int fd : loop->adopting) AdoptConn(loop, fd, now, /*handed=*/true);
  loop->adopting.clear();
  while (returned != nullptr) {
    Conn* conn = returned;
    returned = conn->next;  // before DriveOnLoop, which may queue it again
    conn->next = nullptr;
    conn->busy = false;
    const bool first_look = std::exchange(conn->unseen, false);
    DriveOnLoop(loop, conn, now);  // closes it if its peer has
    if (first_look) Seen();
  }
  return quit;
}

void EventIoModel::ScanDeadlines(Loop* loop, int64_t now) {
  if (stopping_.load(std::memory_order_acquire) && !loop->stop_applied) {
    loop->stop_applied = true;
    loop->next_scan = now;  // visit every waiting connection now
  }
  if (now < loop->next_scan) return;
  // Deadlines (and the stop): every connection waiting on this loop.
  loop->next_scan = kNoDeadline;
  ResumeAccepting(loop, now);
  std::vector<Conn*>& due = loop->due;
  due.clear();
  for (Conn* conn = loop->open_list; conn != nullptr; conn = conn->open_next) {
    if (conn->busy) continue;
    if (now >= conn->wait_deadline || loop->stop_applied) {
      due.push_back(conn);
    } else {
      loop->next_scan = std::min(loop->next_scan, conn->wait_deadline);
    }
  }
  for (Conn* c : due) DriveOnLoop(loop, c, now);
}

void EventIoModel::LoopMain(Loop* loop) {
  for (;;) {
    const int64_t now = PollEvents(loop);
    const bool quit = TakeHandoffs(loop, now);
    ScanDeadlines(loop, now);
    if (quit) break;
  }
  handler_->FlushThread();
}

std::size_t EventIoModel::Drain(int64_t deadline_ns) {
  stopping_.store(true, std::memory_order_release);
  for (auto& loop : loops_) Wake(loop.get());
  std::size_t still_open;
  while ((still_open = open_connections()) != 0) {
    const int64_t left = deadline_ns - MonotonicNanos();
    if (left <= 0) break;
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min(left, kDrainPollNs)));
  }
  if (still_open == 0) JoinAll();  // workers and loops hand their shards off as they end
  return still_open;
}

void EventIoModel::JoinAll() {
  {
    MutexLock guard(&work_mu_);
    quit_ = true;
  }
  work_cv_.SignalAll();
  for (auto& loop : loops_) {
    {
      MutexLock guard(&loop->mu);
      loop->quit = true;
    }
    Wake(loop.get());
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace kv
