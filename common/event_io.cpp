#include "common/event_io.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <limits>
#include <unordered_set>

#include "common/clock.h"

namespace kv {

struct EventIoModel::Conn {
  Conn(int f, Loop* l, const ConnectionLimits& limits, int64_t now)
      : fd(f), loop(l), core(limits, now) {}
  const int fd;
  Loop* const loop;
  ConnectionCore core;
  bool busy = false;          // with a worker
  int64_t wait_deadline = 0;  // while waiting on the loop
};

struct EventIoModel::Loop {
  int epfd = -1;
  int wake_fd = -1;
  std::mutex mu;
  std::vector<int> incoming;    // guarded by mu: new connections
  std::vector<Conn*> returned;  // guarded by mu: back from a worker
  bool quit = false;            // guarded by mu
  // Loop thread only:
  std::unordered_set<Conn*> conns;
  bool stop_applied = false;
  int64_t next_scan = std::numeric_limits<int64_t>::max();
};

namespace {

constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();

void Arm(int epfd, int fd, void* ptr, uint32_t events, int op) {
  epoll_event ev{};
  ev.events = events | EPOLLONESHOT;
  ev.data.ptr = ptr;
  epoll_ctl(epfd, op, fd, &ev);
}

}  // namespace

EventIoModel::EventIoModel(Mode mode, RequestHandler* handler, const ConnectionLimits& limits,
                           std::size_t loops, std::size_t workers)
    : mode_(mode), handler_(handler), limits_(limits) {
  if (mode_ == Mode::kPool) loops = 1;
  for (std::size_t i = 0; i < std::max<std::size_t>(loops, 1); ++i) {
    auto loop = std::make_unique<Loop>();
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    loop->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the wake-up
    epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wake_fd, &ev);
    loops_.push_back(std::move(loop));
  }
  for (auto& loop : loops_) {
    threads_.emplace_back([this, l = loop.get()] { LoopMain(l); });
  }
  for (std::size_t i = 0; i < std::max<std::size_t>(workers, 1); ++i) {
    threads_.emplace_back([this] { WorkerMain(); });
  }
}

EventIoModel::~EventIoModel() {
  JoinAll();
  for (auto& loop : loops_) {
    for (Conn* c : loop->conns) {
      close(c->fd);
      delete c;
    }
    close(loop->epfd);
    close(loop->wake_fd);
  }
}

void EventIoModel::Wake(Loop* loop) {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t r = write(loop->wake_fd, &one, sizeof one);
}

bool EventIoModel::Dispatch(int fd) {
  Loop* loop = loops_[next_loop_++ % loops_.size()].get();
  open_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> guard(loop->mu);
    loop->incoming.push_back(fd);
  }
  Wake(loop);
  return true;
}

void EventIoModel::ToWorkers(Conn* conn) {
  conn->busy = true;
  {
    std::lock_guard<std::mutex> guard(work_mu_);
    work_.push_back(conn);
  }
  work_cv_.notify_one();
}

void EventIoModel::BackToLoop(Conn* conn) {
  Loop* loop = conn->loop;
  {
    std::lock_guard<std::mutex> guard(loop->mu);
    loop->returned.push_back(conn);
  }
  Wake(loop);
}

void EventIoModel::CloseConn(Loop* loop, Conn* conn) {
  if (conn->core.cut_by_shutdown()) handler_->CountCutByShutdown();
  loop->conns.erase(conn);
  close(conn->fd);  // also leaves the epoll set
  delete conn;
  if (open_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard<std::mutex> guard(drain_mu_);
    all_closed_.notify_all();
  }
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
      case ConnectionCore::Action::kWrite: {
        const ssize_t r =
            send(conn->fd, core.out_data(), core.out_size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r > 0) {
          core.OnWritten(static_cast<std::size_t>(r), now);
        } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          conn->wait_deadline = core.deadline();
          loop->next_scan = std::min(loop->next_scan, conn->wait_deadline);
          Arm(loop->epfd, conn->fd, conn, EPOLLOUT, EPOLL_CTL_MOD);
          return;
        } else if (!(r < 0 && errno == EINTR)) {
          core.OnError();
        }
        break;
      }
      case ConnectionCore::Action::kRead: {
        const ssize_t r = recv(conn->fd, core.in_space(), core.in_space_size(), MSG_DONTWAIT);
        if (r > 0) {
          core.OnBytes(static_cast<std::size_t>(r), MonotonicNanos());
        } else if (r == 0) {
          core.OnEof(now);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
          conn->wait_deadline = core.deadline();
          loop->next_scan = std::min(loop->next_scan, conn->wait_deadline);
          Arm(loop->epfd, conn->fd, conn, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
          return;
        } else if (errno != EINTR) {
          core.OnError();
        }
        break;
      }
      case ConnectionCore::Action::kClose:
        CloseConn(loop, conn);
        return;
    }
  }
}

void EventIoModel::DriveOnWorker(Conn* conn) {
  ConnectionCore& core = conn->core;
  int64_t now = MonotonicNanos();
  for (;;) {
    if (stopping_.load(std::memory_order_acquire) && !core.stopping()) {
      core.OnStop(now);
    }
    switch (core.Next(now)) {
      case ConnectionCore::Action::kHandle: {
        const int64_t received = core.frame_received_ns();
        handler_->Handle(core.frame(), received, core.reply_slot(), now - received);
        core.FrameDone();
        now = MonotonicNanos();
        continue;
      }
      case ConnectionCore::Action::kReject:
        handler_->Reject(core.reject_message(), core.reply_slot());
        core.FrameDone();
        continue;
      case ConnectionCore::Action::kWrite:
        if (mode_ == Mode::kPool) {  // pool workers do their own I/O
          const ssize_t r =
              send(conn->fd, core.out_data(), core.out_size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          if (r > 0) {
            core.OnWritten(static_cast<std::size_t>(r), MonotonicNanos());
            now = MonotonicNanos();
            continue;
          }
          if (r < 0 && errno == EINTR) continue;
          if (!(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) {
            core.OnError();
            continue;
          }
        }
        break;  // the loop waits for the socket
      case ConnectionCore::Action::kRead:
        if (mode_ == Mode::kPool) {
          const ssize_t r = recv(conn->fd, core.in_space(), core.in_space_size(), MSG_DONTWAIT);
          if (r > 0) {
            now = MonotonicNanos();
            core.OnBytes(static_cast<std::size_t>(r), now);
            continue;
          }
          if (r == 0) {
            core.OnEof(now);
            continue;
          }
          if (errno == EINTR) continue;
          if (errno != EAGAIN && errno != EWOULDBLOCK) {
            core.OnError();
            continue;
          }
        }
        break;  // no whole frame left: back to the poller
      case ConnectionCore::Action::kClose:
        break;  // the loop owns the set of connections; it closes
    }
    BackToLoop(conn);
    return;
  }
}

void EventIoModel::WorkerMain() {
  for (;;) {
    Conn* conn = nullptr;
    {
      std::unique_lock<std::mutex> lock(work_mu_);
      // Work usually comes back within microseconds under load: wait a
      // little first, and hand the timing shard off (a shared lock) only
      // if the worker really goes idle (latency_log.h).
      if (!work_cv_.wait_for(lock, std::chrono::milliseconds(10),
                             [this] { return quit_ || !work_.empty(); })) {
        lock.unlock();
        handler_->FlushThread();
        lock.lock();
      }
      work_cv_.wait(lock, [this] { return quit_ || !work_.empty(); });
      if (work_.empty()) {  // quit_
        handler_->FlushThread();
        return;
      }
      conn = work_.front();
      work_.pop_front();
    }
    DriveOnWorker(conn);
  }
}

void EventIoModel::LoopMain(Loop* loop) {
  epoll_event events[64];
  std::vector<int> incoming;
  std::vector<Conn*> returned;
  for (;;) {
    int64_t now = MonotonicNanos();
    int timeout_ms = -1;
    if (loop->next_scan != kNoDeadline) {
      const int64_t left = loop->next_scan - now;
      timeout_ms =
          left <= 0 ? 0
                    : static_cast<int>(std::min<int64_t>((left + 999'999) / 1'000'000, 3'600'000));
    }
    const int n = epoll_wait(loop->epfd, events, 64, timeout_ms);
    now = MonotonicNanos();
    for (int i = 0; i < std::max(n, 0); ++i) {
      auto* conn = static_cast<Conn*>(events[i].data.ptr);
      if (conn == nullptr) {
        uint64_t count;
        [[maybe_unused]] const ssize_t r = read(loop->wake_fd, &count, sizeof count);
        continue;
      }
      if (conn->busy) continue;
      if (mode_ == Mode::kPool && !stopping_.load(std::memory_order_acquire)) {
        ToWorkers(conn);  // a worker reads, handles and writes
      } else {
        DriveOnLoop(loop, conn, now);
      }
    }
    bool quit;
    {
      std::lock_guard<std::mutex> guard(loop->mu);
      incoming.swap(loop->incoming);
      returned.swap(loop->returned);
      quit = loop->quit;
    }
    for (const int fd : incoming) {
      Conn* conn = new Conn(fd, loop, limits_, now);
      loop->conns.insert(conn);
      epoll_event ev{};
      ev.events = EPOLLONESHOT;  // armed by the first wait
      ev.data.ptr = conn;
      epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev);
      if (mode_ == Mode::kPool && !stopping_.load(std::memory_order_acquire)) {
        ToWorkers(conn);  // the request has usually arrived with the accept
      } else {
        DriveOnLoop(loop, conn, now);
      }
    }
    incoming.clear();
    for (Conn* conn : returned) {
      conn->busy = false;
      DriveOnLoop(loop, conn, now);
    }
    returned.clear();
    if (stopping_.load(std::memory_order_acquire) && !loop->stop_applied) {
      loop->stop_applied = true;
      loop->next_scan = now;  // visit every waiting connection now
    }
    if (now >= loop->next_scan) {
      // Deadlines (and the stop): every connection waiting on this loop.
      loop->next_scan = kNoDeadline;
      std::vector<Conn*> due;
      for (Conn* c : loop->conns) {
        if (c->busy) continue;
        if (now >= c->wait_deadline || loop->stop_applied) {
          due.push_back(c);
        } else {
          loop->next_scan = std::min(loop->next_scan, c->wait_deadline);
        }
      }
      for (Conn* c : due) DriveOnLoop(loop, c, now);
    }
    if (quit) return;
  }
}

std::size_t EventIoModel::Drain(int64_t deadline_ns) {
  stopping_.store(true, std::memory_order_release);
  for (auto& loop : loops_) Wake(loop.get());
  std::unique_lock<std::mutex> lock(drain_mu_);
  const int64_t left = deadline_ns - MonotonicNanos();
  all_closed_.wait_for(lock, std::chrono::nanoseconds(left > 0 ? left : 0),
                       [this] { return open_.load() == 0; });
  const std::size_t still_open = open_.load();
  lock.unlock();
  if (still_open == 0) JoinAll();  // workers hand their shards off as they end
  return still_open;
}

void EventIoModel::JoinAll() {
  {
    std::lock_guard<std::mutex> guard(work_mu_);
    quit_ = true;
  }
  work_cv_.notify_all();
  for (auto& loop : loops_) {
    {
      std::lock_guard<std::mutex> guard(loop->mu);
      loop->quit = true;
    }
    Wake(loop.get());
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace kv
