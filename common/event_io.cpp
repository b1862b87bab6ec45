#include "common/event_io.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <limits>
#include <unordered_map>
#include <utility>

#include "common/clock.h"
#include "common/net.h"
#include "common/unique_fd.h"

namespace kv {

struct EventIoModel::Conn {
  Conn(int f, Loop* l, const ConnectionLimits& limits, int64_t now)
      : fd(f), loop(l), core(limits, now) {}
  const UniqueFd fd;
  Loop* const loop;
  ConnectionCore core;
  bool busy = false;     // with a worker
  Conn* next = nullptr;  // in a ConnQueue
  // The last recv found the socket empty (it returned less than it asked
  // for): the next read waits for epoll to say there is more, instead of a
  // recv that would only say EAGAIN. So a keep-alive request costs one recv.
  bool drained = false;
  int64_t wait_deadline = 0;  // while waiting on the loop
};

struct EventIoModel::Loop {
  UniqueFd epfd;
  UniqueFd wake_fd;
  Mutex mu;
  std::vector<int> incoming GUARDED_BY(mu);  // new connections
  ConnQueue returned GUARDED_BY(mu);         // back from a worker
  bool quit GUARDED_BY(mu) = false;
  // The loop is in (or about to enter) epoll_wait with nothing handed to it:
  // the next hand-off must write the eventfd. A busy loop finds hand-offs by
  // itself, so they cost no wake-up write.
  bool sleeping GUARDED_BY(mu) = false;
  // Loop thread only:
  std::unordered_map<const Conn*, std::unique_ptr<Conn>> conns;
  std::vector<int> adopting;  // incoming, taken out of the lock (reused)
  std::vector<Conn*> due;     // the deadline scan's list (reused)
  bool stop_applied = false;
  int64_t next_scan = std::numeric_limits<int64_t>::max();
};

namespace {

constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();
// How long a worker waits for work before it hands its timing shard off
// (connection.cpp has the same rule for its threads).
constexpr int64_t kQuietNs = 10'000'000;
constexpr int kMaxEvents = 64;

// Registers (EPOLL_CTL_ADD) or re-arms (EPOLL_CTL_MOD) fd, one-shot.
bool Arm(int epfd, int fd, void* ptr, uint32_t events, int op) {
  epoll_event ev{};
  ev.events = events | EPOLLONESHOT;
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

EventIoModel::EventIoModel(Mode mode, RequestHandler* handler, const ConnectionLimits& limits,
                           std::size_t loops, std::size_t workers)
    : mode_(mode), handler_(handler), limits_(limits) {
  if (mode_ == Mode::kPool) loops = 1;
  for (std::size_t i = 0; i < std::max<std::size_t>(loops, 1) && init_status_.ok(); ++i) {
    init_status_ = MakeLoop();
  }
  if (!init_status_.ok()) return;  // no thread started; Dispatch refuses
  for (auto& loop : loops_) {
    threads_.emplace_back([this, l = loop.get()] { LoopMain(l); });
  }
  for (std::size_t i = 0; i < std::max<std::size_t>(workers, 1); ++i) {
    threads_.emplace_back([this] { WorkerMain(); });
  }
}

Status EventIoModel::MakeLoop() {
  auto loop = std::make_unique<Loop>();
  loop->epfd.Reset(epoll_create1(EPOLL_CLOEXEC));
  if (!loop->epfd) return Status::IOError("epoll_create1", errno);
  loop->wake_fd.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!loop->wake_fd) return Status::IOError("eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake-up
  if (epoll_ctl(loop->epfd.get(), EPOLL_CTL_ADD, loop->wake_fd.get(), &ev) != 0) {
    return Status::IOError("epoll_ctl add eventfd", errno);
  }
  loops_.push_back(std::move(loop));
  return Status::OK();
}

EventIoModel::~EventIoModel() {
  JoinAll();  // then the loops' connections close with them (UniqueFd)
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
  Loop* loop = loops_[next_loop_++ % loops_.size()].get();
  open_.fetch_add(1, std::memory_order_relaxed);
  bool wake;
  {
    MutexLock guard(&loop->mu);
    loop->incoming.push_back(fd);
    wake = std::exchange(loop->sleeping, false);
  }
  if (wake) Wake(loop);
  return true;
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

void EventIoModel::CloseConn(Loop* loop, Conn* conn) {
  if (conn->core.cut_by_shutdown()) handler_->CountCutByShutdown();
  loop->conns.erase(conn);  // closes the fd, which also leaves the epoll set
  if (open_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    MutexLock guard(&drain_mu_);
    all_closed_.SignalAll();
  }
}

void EventIoModel::WaitOnLoop(Loop* loop, Conn* conn, uint32_t events) {
  conn->wait_deadline = conn->core.deadline();
  loop->next_scan = std::min(loop->next_scan, conn->wait_deadline);
  if (!Arm(loop->epfd.get(), conn->fd.get(), conn, events, EPOLL_CTL_MOD)) {
    conn->core.OnError();  // cannot wait for it: drop it
    CloseConn(loop, conn);
  }
}

bool EventIoModel::WriteOnLoop(Loop* loop, Conn* conn, int64_t now) {
  ConnectionCore& core = conn->core;
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
  ConnectionCore& core = conn->core;
  const std::size_t space = core.in_space_size();
  const ssize_t r = conn->drained ? -1 : recv(conn->fd.get(), core.in_space(), space, MSG_DONTWAIT);
  if (r > 0) {
    conn->drained = static_cast<std::size_t>(r) < space;
    core.OnBytes(static_cast<std::size_t>(r), MonotonicNanos());
  } else if (r == 0) {
    core.OnEof(now);
  } else if (conn->drained || errno == EAGAIN || errno == EWOULDBLOCK) {
    WaitOnLoop(loop, conn, EPOLLIN | EPOLLRDHUP);
    return false;
  } else if (errno != EINTR) {
    core.OnError();
  }
  return true;
}

void EventIoModel::DriveOnLoop(Loop* loop, Conn* conn, int64_t now) {
  ConnectionCore& core = conn->core;
  if (stopping_.load(std::memory_order_acquire) && !core.stopping()) {
    core.OnStop(now);
  }
  for (;;) {
    switch (core.Next(now)) {
      case ConnectionCore::Action::kHandle:
      case ConnectionCore::Action::kReject:
        ToWorkers(conn);  // the lock and the delay block: not on the loop
        return;
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
  ConnectionCore& core = conn->core;
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
  ConnectionCore& core = conn->core;
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
  ConnectionCore& core = conn->core;
  const bool pool = mode_ == Mode::kPool;  // pool workers do their own I/O
  bool more = true;
  while (more) {
    int64_t now = MonotonicNanos();
    if (stopping_.load(std::memory_order_acquire) && !core.stopping()) {
      core.OnStop(now);
    }
    switch (core.Next(now)) {
      case ConnectionCore::Action::kHandle: {
        const int64_t received = core.frame_received_ns();
        handler_->Handle(core.frame(), received, core.reply_slot(), now - received);
        core.FrameDone();
        break;
      }
      case ConnectionCore::Action::kReject:
        handler_->Reject(core.reject_message(), core.reply_slot());
        core.FrameDone();
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
  int timeout_ms = TimeoutMs(loop->next_scan, MonotonicNanos());
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
  for (int i = 0; i < n; ++i) {
    auto* conn = static_cast<Conn*>(events[i].data.ptr);
    if (conn == nullptr) {
      uint64_t count;
      // Non-blocking: EAGAIN if another wake-up read it first; either way
      // the eventfd is clear for the next one.
      if (read(loop->wake_fd.get(), &count, sizeof count) < 0 && errno != EAGAIN) {
        // Unreachable with a valid eventfd.
      }
      continue;
    }
    if (conn->busy) continue;
    conn->drained = false;  // readable (or writable, or hung up): look
    if (mode_ == Mode::kPool && !stopping_.load(std::memory_order_acquire)) {
      ToWorkers(conn);  // a worker reads, handles and writes
    } else {
      DriveOnLoop(loop, conn, now);
    }
  }
  return now;
}

void EventIoModel::AdoptConn(Loop* loop, int fd, int64_t now) {
  auto owned = std::make_unique<Conn>(fd, loop, limits_, now);
  Conn* conn = owned.get();
  loop->conns.emplace(conn, std::move(owned));
  // Registered disarmed; the first wait arms it.
  if (!Arm(loop->epfd.get(), fd, conn, 0, EPOLL_CTL_ADD)) {
    conn->core.OnError();
    CloseConn(loop, conn);
    return;
  }
  if (mode_ == Mode::kPool && !stopping_.load(std::memory_order_acquire)) {
    ToWorkers(conn);  // the request has usually arrived with the accept
  } else {
    DriveOnLoop(loop, conn, now);
  }
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
  for (const int fd : loop->adopting) AdoptConn(loop, fd, now);
  loop->adopting.clear();
  while (returned != nullptr) {
    Conn* conn = returned;
    returned = conn->next;  // before DriveOnLoop, which may queue it again
    conn->next = nullptr;
    conn->busy = false;
    DriveOnLoop(loop, conn, now);
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
  std::vector<Conn*>& due = loop->due;
  due.clear();
  for (const auto& [key, conn] : loop->conns) {
    if (conn->busy) continue;
    if (now >= conn->wait_deadline || loop->stop_applied) {
      due.push_back(conn.get());
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
    if (quit) return;
  }
}

std::size_t EventIoModel::Drain(int64_t deadline_ns) {
  stopping_.store(true, std::memory_order_release);
  for (auto& loop : loops_) Wake(loop.get());
  std::size_t still_open;
  {
    MutexLock guard(&drain_mu_);
    while ((still_open = open_.load()) != 0) {
      const int64_t left = deadline_ns - MonotonicNanos();
      if (left <= 0) break;
      all_closed_.WaitFor(&drain_mu_, std::chrono::nanoseconds(left));
    }
  }
  if (still_open == 0) JoinAll();  // workers hand their shards off as they end
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
