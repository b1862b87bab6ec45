#include "common/uring_io.h"

#include <liburing.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/clock.h"
#include "common/conn_io.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "common/unique_fd.h"

namespace kv {

namespace {

// Submission queue entries per ring; a fuller queue is submitted early, and
// the kernel keeps completions that overflow (IORING_FEAT_NODROP).
constexpr unsigned kRingEntries = 1024;
// Completions taken per pass of a loop.
constexpr unsigned kCqeBatch = 256;
// A cancel that found no free queue entry is tried again this soon.
constexpr int64_t kRetryNs = 1'000'000;
// user_data of the operations that are not a Target's: the eventfd's poll;
// cancels and closes, whose results nobody needs. Targets are aligned, so
// no Target* has these values.
constexpr uint64_t kWakeTag = 1;
constexpr uint64_t kIgnoreTag = 2;

// LOCKBENCH_URING_ACCEPT=single takes the path of a kernel without multishot
// accept (before 5.19) on any kernel, so the tests serve through it too.
bool MultishotWanted() {
  const char* v = std::getenv("LOCKBENCH_URING_ACCEPT");
  return v == nullptr || std::strcmp(v, "single") != 0;
}

io_uring_sqe* Sqe(io_uring* ring) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (sqe != nullptr) return sqe;
  io_uring_submit(ring);  // full: hand the queue to the kernel and try again
  return io_uring_get_sqe(ring);
}

}  // namespace

// One listener's accept on one ring (user_data of its operation).
struct UringIoModel::AcceptSlot : Target {
  explicit AcceptSlot(int f) : Target(Kind::kListener), fd(f) {}
  const int fd;             // owned by server.cpp; outlives StopAccepting()
  bool armed = false;       // the accept is in the kernel (under the ring's mu)
  bool cancelling = false;  // and a cancel of it has been asked for
};

struct UringIoModel::Ring {
  io_uring ring{};
  bool ok = false;          // initialised
  bool multishot = true;    // one accept for many connections, until refused
  bool wake_armed = false;  // the eventfd's poll is in the kernel
  int64_t resume = 0;       // > 0: accepts paused until then (loop thread)
  Mutex mu;
  CondVar accepts_gone;
  std::vector<std::unique_ptr<AcceptSlot>> slots GUARDED_BY(mu);
  AcceptPolicy* policy GUARDED_BY(mu) = nullptr;  // null: not accepting
  std::size_t armed GUARDED_BY(mu) = 0;           // accepts in the kernel
  AcceptStats accepted GUARDED_BY(mu);

  ~Ring() {
    if (!ok) return;
    io_uring_submit(&ring);  // the last pass's closes
    io_uring_queue_exit(&ring);
  }
};

// The loop's RunCore driver: every recv and send is an operation on the ring.
struct UringIoModel::UringDriver {
  UringIoModel* model;
  Loop* loop;
  Conn* conn;
  int64_t now;

  int64_t Now() const { return now; }
  bool Frame(ConnectionCore::Action action, int64_t /*now*/) {
    if (!model->inline_requests()) {
      model->ToWorkers(conn);  // the lock and the delay block: not on the loop
      return false;
    }
    AnswerFrame(&conn->core(), action, model->handler_, 0);
    return true;
  }
  bool Write() {
    model->WaitOnLoop(loop, conn, EPOLLOUT);
    return false;
  }
  bool Read() {
    model->WaitOnLoop(loop, conn, EPOLLIN);
    return false;
  }
  void Close() { model->CloseOnRing(loop, conn); }
};

Status UringIoModel::Probe() {
  io_uring ring{};
  if (const int err = io_uring_queue_init(2, &ring, 0); err < 0) {
    return Status::InvalidArgument("the kernel refuses io_uring here (" +
                                   Status::IOError("io_uring_queue_init", -err).message() + ")");
  }
  io_uring_queue_exit(&ring);
  return Status::OK();
}

UringIoModel::UringIoModel(const Config& config, RequestHandler* handler,
                           const ConnectionLimits& limits)
    : EventIoModel(config.loops, config.inline_requests, handler, limits, /*epoll=*/false),
      multishot_(MultishotWanted()) {
  for (std::size_t i = 0; i < loops_.size() && init_status().ok(); ++i) {
    auto ring = std::make_unique<Ring>();
    if (const int err = io_uring_queue_init(kRingEntries, &ring->ring, 0); err < 0) {
      SetInitFailed(Status::IOError("io_uring_queue_init", -err));
      break;
    }
    ring->ok = true;
    ring->multishot = multishot_;
    rings_.push_back(std::move(ring));
  }
  if (!init_status().ok()) return;  // no thread started; Dispatch refuses
  Start(config.inline_requests ? 0 : std::max<std::size_t>(config.workers, 1));
}

UringIoModel::~UringIoModel() { JoinAll(); }

std::string_view UringIoModel::name() const { return multishot_ ? "uring" : "uring-single"; }

bool UringIoModel::TakeListeners(const std::vector<int>& listeners, AcceptPolicy* policy) {
  if (!init_status().ok() || listeners.empty()) return false;
  for (auto& loop : loops_) {
    Ring& r = RingOf(loop.get());
    {
      MutexLock guard(&r.mu);
      for (const int fd : listeners) r.slots.push_back(std::make_unique<AcceptSlot>(fd));
      r.policy = policy;
    }
    Wake(loop.get());  // arms the accepts
  }
  return true;
}

AcceptStats UringIoModel::StopAccepting() {
  AcceptStats total;
  for (std::size_t i = 0; i < rings_.size(); ++i) {
    Ring& r = *rings_[i];
    {
      MutexLock guard(&r.mu);
      r.policy = nullptr;
    }
    Wake(loops_[i].get());  // cancels the accepts
    MutexLock guard(&r.mu);
    // The accepts hold the listeners open in the kernel: they must be gone
    // before the caller closes them.
    while (r.armed > 0) r.accepts_gone.Wait(&r.mu);
    total += r.accepted;
  }
  return total;
}

void UringIoModel::SyncRing(Loop* loop) {
  Ring& r = RingOf(loop);
  if (!r.wake_armed) {
    if (io_uring_sqe* sqe = Sqe(&r.ring)) {
      io_uring_prep_poll_add(sqe, loop->wake_fd.get(), POLLIN);
      io_uring_sqe_set_data64(sqe, kWakeTag);
      r.wake_armed = true;
    }
  }
  if (r.resume > 0) loop->next_scan = std::min(loop->next_scan, r.resume);
  MutexLock guard(&r.mu);
  const bool want = r.policy != nullptr && r.resume == 0;
  for (auto& slot : r.slots) {
    if (want && !slot->armed) {
      io_uring_sqe* sqe = Sqe(&r.ring);
      if (sqe == nullptr) break;  // the next pass arms it
      if (r.multishot) {
        io_uring_prep_multishot_accept(sqe, slot->fd, nullptr, nullptr, SOCK_CLOEXEC);
      } else {
        io_uring_prep_accept(sqe, slot->fd, nullptr, nullptr, SOCK_CLOEXEC);
      }
      io_uring_sqe_set_data(sqe, static_cast<Target*>(slot.get()));
      slot->armed = true;
      ++r.armed;
    } else if (!want && slot->armed && !slot->cancelling) {
      io_uring_sqe* sqe = Sqe(&r.ring);
      if (sqe == nullptr) break;
      io_uring_prep_cancel(sqe, static_cast<Target*>(slot.get()), 0);
      io_uring_sqe_set_data64(sqe, kIgnoreTag);
      slot->cancelling = true;
    }
  }
  if (r.armed == 0) r.accepts_gone.SignalAll();
}

int64_t UringIoModel::WaitAndHandle(Loop* loop, int64_t until, int64_t before) {
  Ring& r = RingOf(loop);
  SyncRing(loop);
  // One system call submits what this pass queued and waits for the next
  // completion, within the next deadline.
  io_uring_cqe* cqe = nullptr;
  if (until <= before) {
    io_uring_submit(&r.ring);
  } else if (until == kNoDeadline) {
    io_uring_submit_and_wait(&r.ring, 1);
  } else {
    const int64_t left = until - before;
    __kernel_timespec ts{};
    ts.tv_sec = left / 1'000'000'000;
    ts.tv_nsec = left % 1'000'000'000;
    // -ETIME when the deadline came first, -EINTR on a signal: go round.
    io_uring_submit_and_wait_timeout(&r.ring, &cqe, 1, &ts, nullptr);
  }
  Awake(loop);
  const int64_t now = MonotonicNanos();
  io_uring_cqe* cqes[kCqeBatch];
  const unsigned n = io_uring_peek_batch_cqe(&r.ring, cqes, kCqeBatch);
  struct Done {
    uint64_t user_data;
    void* target;
    int res;
    uint32_t flags;
  } done[kCqeBatch];
  for (unsigned i = 0; i < n; ++i) {
    done[i] = {cqes[i]->user_data, io_uring_cqe_get_data(cqes[i]), cqes[i]->res, cqes[i]->flags};
  }
  // Taken off before they are acted on: acting queues (and may submit) more.
  io_uring_cq_advance(&r.ring, n);
  for (unsigned i = 0; i < n; ++i) {
    OnCompletion(loop, done[i].user_data, done[i].target, done[i].res, done[i].flags, now);
  }
  return now;
}

void UringIoModel::OnCompletion(Loop* loop, uint64_t user_data, void* data, int res, uint32_t flags,
                                int64_t now) {
  if (user_data == kWakeTag) {
    RingOf(loop).wake_armed = false;
    uint64_t count;
    // Non-blocking: EAGAIN if nothing is left to read; either way the
    // eventfd is clear for the next wake-up.
    if (read(loop->wake_fd.get(), &count, sizeof count) < 0 && errno != EAGAIN) {
      // Unreachable with a valid eventfd.
    }
    return;
  }
  // A kernel without IORING_FEAT_EXT_ARG makes liburing time the wait with
  // an operation of its own, tagged LIBURING_UDATA_TIMEOUT: not a Target.
  if (user_data == kIgnoreTag || user_data == LIBURING_UDATA_TIMEOUT) return;
  auto* target = static_cast<Target*>(data);
  if (target->kind == Target::Kind::kListener) {
    OnAccepted(loop, static_cast<AcceptSlot*>(target), res, flags, now);
  } else {
    OnConnDone(loop, static_cast<Conn*>(target), res, now);
  }
}

void UringIoModel::OnConnDone(Loop* loop, Conn* conn, int res, int64_t now) {
  conn->in_flight = conn->cancelling = false;
  // Cancelled (a deadline, the stop): nothing happened; the core decides.
  if (res != -ECANCELED) {
    const int err = res < 0 ? -res : 0;
    if (conn->out_watched) {
      ReportWrite(&conn->core(), res, err);
    } else {
      ReportRead(&conn->core(), res, err, &stop_);
    }
  }
  DriveOnLoop(loop, conn, now);
}

void UringIoModel::OnAccepted(Loop* loop, AcceptSlot* slot, int res, uint32_t flags, int64_t now) {
  Ring& r = RingOf(loop);
  AcceptPolicy* policy;
  {
    MutexLock guard(&r.mu);
    policy = r.policy;
  }
  if (res == -EINVAL && r.multishot) {
    r.multishot = false;  // a kernel without multishot accept: one at a time
  } else if (res != -ECANCELED && policy == nullptr) {
    if (res >= 0) close(res);  // accepted as the stop began: dropped like the backlog
  } else if (res != -ECANCELED) {
    IoLoad load;
    load.open = open_connections();
    AcceptStats stats;
    UniqueFd conn;
    switch (policy->Admit(slot->fd, res, res < 0 ? -res : 0, load, &stats, &conn)) {
      case AcceptPolicy::Outcome::kConnection:
        TakeAccepted(loop, conn.Release(), now);
        ++stats.accepted;
        break;
      case AcceptPolicy::Outcome::kPause:
        r.resume = now + kAcceptPauseNs;  // SyncRing cancels the accepts meanwhile
        break;
      default:
        break;
    }
    MutexLock guard(&r.mu);
    r.accepted += stats;
  }
  // Last: once every accept is gone, StopAccepting may return, and nothing
  // here may touch a listener after that.
  if ((flags & IORING_CQE_F_MORE) == 0) {
    MutexLock guard(&r.mu);
    slot->armed = slot->cancelling = false;
    if (--r.armed == 0) r.accepts_gone.SignalAll();
  }
}

void UringIoModel::OnScan(Loop* loop, int64_t now) {
  Ring& r = RingOf(loop);
  if (r.resume == 0) return;
  if (now < r.resume) {
    loop->next_scan = std::min(loop->next_scan, r.resume);
    return;
  }
  r.resume = 0;  // SyncRing arms the accepts again
}

void UringIoModel::WaitOnLoop(Loop* loop, Conn* conn, uint32_t events) {
  ConnectionCore& core = conn->core();
  conn->wait_deadline = core.deadline();
  loop->next_scan = std::min(loop->next_scan, conn->wait_deadline);
  io_uring_sqe* sqe = Sqe(&RingOf(loop).ring);
  if (sqe == nullptr) {
    core.OnError();  // cannot wait for it: drop it
    CloseOnRing(loop, conn);
    return;
  }
  conn->out_watched = (events & EPOLLOUT) != 0;
  if (conn->out_watched) {
    io_uring_prep_send(sqe, conn->fd.get(), core.out_data(), core.out_size(), MSG_NOSIGNAL);
  } else {
    io_uring_prep_recv(sqe, conn->fd.get(), core.in_space(), core.in_space_size(), 0);
  }
  io_uring_sqe_set_data(sqe, static_cast<Target*>(conn));
  conn->in_flight = true;
}

void UringIoModel::DriveOnLoop(Loop* loop, Conn* conn, int64_t now) {
  if (conn->in_flight) {
    if (conn->cancelling) return;
    io_uring_sqe* sqe = Sqe(&RingOf(loop).ring);
    if (sqe == nullptr) {
      loop->next_scan = std::min(loop->next_scan, now + kRetryNs);
      return;
    }
    io_uring_prep_cancel(sqe, static_cast<Target*>(conn), 0);
    io_uring_sqe_set_data64(sqe, kIgnoreTag);
    conn->cancelling = true;
    return;
  }
  UringDriver driver{this, loop, conn, now};
  RunCore(&conn->core(), &stop_, &driver);
}

void UringIoModel::CloseOnRing(Loop* loop, Conn* conn) {
  const int fd = conn->fd.Release();
  if (io_uring_sqe* sqe = Sqe(&RingOf(loop).ring)) {
    io_uring_prep_close(sqe, fd);
    io_uring_sqe_set_data64(sqe, kIgnoreTag);
  } else {
    close(fd);
  }
  CloseConn(loop, conn);
}

void UringIoModel::Adopt(Loop* loop, Conn* conn, int64_t now, bool handed) {
  DriveOnLoop(loop, conn, now);
  if (handed) Seen();  // (conn may be a worker's by now: not touched)
}

void UringIoModel::DriveOnWorker(Conn* conn) {
  HandlingDriver driver{handler_, conn};  // handles whole frames; the loop writes
  RunCore(&conn->core(), &stop_, &driver);
}

}  // namespace kv
