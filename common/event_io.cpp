#include "common/event_io.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>

#include "common/clock.h"
#include "common/latency_log.h"
#include "common/net.h"

namespace kv {

namespace {

constexpr int kMaxEvents = 64;
// Drain looks this often whether every connection has closed.
constexpr int64_t kDrainPollNs = 2'000'000;

int TimeoutMs(int64_t deadline, int64_t now) {
  if (deadline == std::numeric_limits<int64_t>::max()) return -1;
  const int64_t left = deadline - now;
  return left <= 0 ? 0
                   : static_cast<int>(std::min<int64_t>((left + 999'999) / 1'000'000, 3'600'000));
}

}  // namespace

bool EpollCtl(int epfd, int op, int fd, void* ptr, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = ptr;
  return epoll_ctl(epfd, op, fd, &ev) == 0;
}

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

int64_t EventIoModel::HandlingDriver::Now() const { return MonotonicNanos(); }

bool EventIoModel::HandlingDriver::Frame(ConnectionCore::Action action, int64_t now) {
  ConnectionCore& core = conn->core();
  AnswerFrame(&core, action, handler, now - core.frame_received_ns());
  return true;
}

EventIoModel::EventIoModel(std::size_t loops, bool inline_requests, RequestHandler* handler,
                           const ConnectionLimits& limits, bool epoll)
    : handler_(handler), inline_(inline_requests), limits_(limits) {
  for (std::size_t i = 0; i < std::max<std::size_t>(loops, 1) && init_status_.ok(); ++i) {
    init_status_ = MakeLoop(epoll);
  }
}

void EventIoModel::Start(std::size_t workers) {
  if (!init_status_.ok()) return;  // no thread started; Dispatch refuses
  // Each thread hands its timing shard off as it ends, before Drain()
  // (which joins them) returns.
  const auto start = [this](auto body) {
    threads_.emplace_back([this, body] {
      body();
      handler_->FlushThread();
    });
  };
  for (auto& loop : loops_) start([this, l = loop.get()] { LoopMain(l); });
  for (std::size_t i = 0; i < workers; ++i) start([this] { WorkerMain(); });
}

Status EventIoModel::MakeLoop(bool epoll) {
  auto loop = std::make_unique<Loop>(loops_.size());
  loop->wake_fd.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!loop->wake_fd) return Status::IOError("eventfd", errno);
  if (epoll) {
    loop->epfd.Reset(epoll_create1(EPOLL_CLOEXEC));
    if (!loop->epfd) return Status::IOError("epoll_create1", errno);
    if (!EpollCtl(loop->epfd.get(), EPOLL_CTL_ADD, loop->wake_fd.get(), nullptr, EPOLLIN)) {
      return Status::IOError("epoll_ctl add eventfd", errno);
    }
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
  conn->drained = conn->hup_seen = conn->unseen = false;
  conn->in_flight = conn->cancelling = false;
  conn->next = conn->open_prev = nullptr;
  conn->open_next = loop->open_list;
  if (loop->open_list != nullptr) loop->open_list->open_prev = conn;
  loop->open_list = conn;
  conn->wait_deadline = 0;
  return conn;
}

void EventIoModel::AdoptConn(Loop* loop, int fd, int64_t now, bool handed) {
  Adopt(loop, NewConn(loop, fd, now), now, handed);
}

void EventIoModel::RecycleConn(Loop* loop, Conn* conn) {
  conn->fd.Reset();  // closing it also takes it out of the epoll set
  (conn->open_prev != nullptr ? conn->open_prev->open_next : loop->open_list) = conn->open_next;
  if (conn->open_next != nullptr) conn->open_next->open_prev = conn->open_prev;
  conn->next = loop->free_list;
  loop->free_list = conn;
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

void EventIoModel::TakeAccepted(Loop* loop, int fd, int64_t now) {
  // A connection goes to a loop with at least two fewer open, else it stays
  // here (no hand-off).
  Loop* to = LeastLoaded(loop);
  if (to != loop) {
    HandOff(to, fd);
    return;
  }
  loop->added.fetch_add(1, std::memory_order_acq_rel);
  AdoptConn(loop, fd, now, /*handed=*/false);
}

void EventIoModel::CloseConn(Loop* loop, Conn* conn) {
  if (conn->core().cut_by_shutdown()) handler_->CountCutByShutdown();
  RecycleConn(loop, conn);
  loop->closed.store(loop->closed.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// The loop's RunCore driver: non-blocking steps, waits on epoll.
struct EventIoModel::LoopDriver {
  EventIoModel* model;
  Loop* loop;
  Conn* conn;
  int64_t now;  // one time for the whole pass: no clock read per step

  int64_t Now() const { return now; }
  bool Frame(ConnectionCore::Action action, int64_t /*now*/) {
    if (!model->inline_) {
      model->ToWorkers(conn);  // the lock and the delay block: not on the loop
      return false;
    }
    AnswerFrame(&conn->core(), action, model->handler_, 0);  // run by the thread that read it
    return true;
  }
  bool Write() {
    if (WriteStep(conn->fd.get(), &conn->core()) != IoOutcome::kWouldBlock) return true;
    model->WaitOnLoop(loop, conn, EPOLLOUT);
    return false;
  }
  bool Read() {
    if (!conn->drained) {
      bool emptied = false;
      const IoOutcome r =
          ReadStep(conn->fd.get(), &conn->core(), MSG_DONTWAIT, &model->stop_, &emptied);
      // After a hang-up no edge will come: read on until recv says so.
      conn->drained = emptied && !conn->hup_seen;
      if (r != IoOutcome::kWouldBlock) return true;
    }
    conn->drained = true;
    model->WaitOnLoop(loop, conn, EPOLLIN | EPOLLRDHUP);
    return false;
  }
  void Close() { model->CloseConn(loop, conn); }
};

void EventIoModel::DriveOnLoop(Loop* loop, Conn* conn, int64_t now) {
  LoopDriver driver{this, loop, conn, now};
  RunCore(&conn->core(), &stop_, &driver);
}

bool EventIoModel::WaitForWork(int64_t until) {
  while (!quit_ && work_.empty()) {
    if (until == LatencyLog::kNever) {
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
  for (;;) {
    // Outside work_mu_: the log may take its own lock to hand the shard off.
    const int64_t call_by = handler_->Idle(MonotonicNanos());
    MutexLock guard(&work_mu_);
    if (WaitForWork(call_by)) return work_.Pop();  // nullptr: quit
  }
}

void EventIoModel::WorkerMain() {
  while (Conn* conn = TakeWork()) {
    DriveOnWorker(conn);
    BackToLoop(conn);
  }
}

int64_t EventIoModel::PollEvents(Loop* loop) {
  const int64_t before = MonotonicNanos();
  // A loop that runs requests keeps timing samples: the log says by when
  // it wants to be asked again.
  int64_t until = std::min(loop->next_scan, handler_->Idle(before));
  {
    // Sleep only with nothing handed over; else just look.
    MutexLock guard(&loop->mu);
    if (loop->quit || !loop->incoming.empty() || !loop->returned.empty()) {
      until = before;
    } else {
      loop->sleeping = true;
    }
  }
  return WaitAndHandle(loop, until, before);
}

void EventIoModel::Awake(Loop* loop) {
  MutexLock guard(&loop->mu);
  loop->sleeping = false;
}

int64_t EventIoModel::WaitAndHandle(Loop* loop, int64_t until, int64_t before) {
  epoll_event events[kMaxEvents];
  const int n = epoll_wait(loop->epfd.get(), events, kMaxEvents, TimeoutMs(until, before));
  Awake(loop);
  // n < 0 is EINTR (a signal) or a bug (EBADF, EINVAL): either way there is
  // nothing to do but go round (deadlines and hand-offs still run).
  const int64_t now = MonotonicNanos();
  for (int i = 0; i < n; ++i) OnEvent(loop, events[i], now);
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
  // Closed earlier in this batch of events (its record is free): stale.
  if (target->kind == Target::Kind::kConn && !static_cast<Conn*>(target)->fd) return;
  OnReady(loop, target, event.events, now);
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
  if (stop_.requested() && !loop->stop_applied) {
    loop->stop_applied = true;
    loop->next_scan = now;  // visit every waiting connection now
  }
  if (now < loop->next_scan) return;
  // Deadlines (and the stop): every connection waiting on this loop.
  loop->next_scan = kNoDeadline;
  OnScan(loop, now);
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
}

std::size_t EventIoModel::Drain(int64_t deadline_ns) {
  stop_.Request();
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
