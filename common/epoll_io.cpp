#include "common/epoll_io.h"

#include <sys/epoll.h>

#include <algorithm>
#include <atomic>

#include "common/clock.h"
#include "common/conn_io.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "common/unique_fd.h"

namespace kv {

namespace {

// A connection's events, registered once.
constexpr uint32_t kEdgeEvents = EPOLLIN | EPOLLRDHUP | EPOLLET;

}  // namespace

struct EpollIoModel::Listener : Target {
  explicit Listener(int f) : Target(Kind::kListener), fd(f) {}
  const int fd;  // owned by server.cpp; outlives StopAccepting()
};

// A loop's accepting (TakeListeners): the policy, null once StopAccepting
// began; whether a burst is under way; what the bursts accepted.
struct EpollIoModel::Accepting {
  Mutex mu;
  CondVar burst_done;
  AcceptPolicy* policy GUARDED_BY(mu) = nullptr;
  bool in_burst GUARDED_BY(mu) = false;
  AcceptStats accepted GUARDED_BY(mu);
  int64_t resume = 0;  // loop thread only; > 0: listeners left out of epoll until then
};

EpollIoModel::EpollIoModel(const Config& config, RequestHandler* handler,
                           const ConnectionLimits& limits)
    : EventIoModel(config.loops, config.inline_requests, handler, limits) {
  for (std::size_t i = 0; i < loops_.size(); ++i) {
    accepting_.push_back(std::make_unique<Accepting>());
  }
  Start(config.inline_requests ? 0 : std::max<std::size_t>(config.workers, 1));
}

EpollIoModel::~EpollIoModel() { JoinAll(); }

bool EpollIoModel::WatchListeners(Loop* loop, bool on) {
  bool ok = true;
  for (const auto& l : listeners_) {
    if (on) {
      ok &= EpollCtl(loop->epfd.get(), EPOLL_CTL_ADD, l->fd, static_cast<Target*>(l.get()),
                     EPOLLIN | EPOLLEXCLUSIVE);
    } else {
      // ENOENT when a pause had taken it out already: nothing to undo.
      EpollCtl(loop->epfd.get(), EPOLL_CTL_DEL, l->fd, nullptr, 0);
    }
  }
  return ok;
}

bool EpollIoModel::TakeListeners(const std::vector<int>& listeners, AcceptPolicy* policy) {
  if (!init_status().ok() || listeners.empty()) return false;
  for (const int fd : listeners) listeners_.push_back(std::make_unique<Listener>(fd));
  bool ok = true;
  for (auto& loop : loops_) {
    Accepting& a = *accepting_[loop->index];
    MutexLock guard(&a.mu);
    a.policy = policy;
    ok &= WatchListeners(loop.get(), true);
  }
  if (ok) return true;
  StopAccepting();  // the accept loop accepts instead
  return false;
}

AcceptStats EpollIoModel::StopAccepting() {
  AcceptStats total;
  for (auto& loop : loops_) {
    Accepting& a = *accepting_[loop->index];
    MutexLock guard(&a.mu);
    a.policy = nullptr;
    while (a.in_burst) a.burst_done.Wait(&a.mu);
    WatchListeners(loop.get(), false);
    total += a.accepted;
  }
  return total;
}

void EpollIoModel::AcceptOnLoop(Loop* loop, const Listener* listener, int64_t now) {
  Accepting& a = *accepting_[loop->index];
  AcceptPolicy* policy;
  {
    MutexLock guard(&a.mu);
    policy = a.policy;
    if (policy == nullptr) return;  // StopAccepting has begun
    a.in_burst = true;
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
        TakeAccepted(loop, conn.Release(), now);
        return true;
      }) != BurstEnd::kPause;
  {
    MutexLock guard(&a.mu);
    a.in_burst = false;
    a.accepted += stats;
    if (!go_on && a.policy != nullptr) {
      // Out of resources: leave the listeners to the kernel backlog a while.
      WatchListeners(loop, false);
      a.resume = now + kAcceptPauseNs;
      loop->next_scan = std::min(loop->next_scan, a.resume);
    }
  }
  a.burst_done.SignalAll();
}

void EpollIoModel::OnScan(Loop* loop, int64_t now) {
  Accepting& a = *accepting_[loop->index];
  if (a.resume == 0) return;
  if (now < a.resume) {
    loop->next_scan = std::min(loop->next_scan, a.resume);
    return;
  }
  a.resume = 0;
  MutexLock guard(&a.mu);
  if (a.policy != nullptr) WatchListeners(loop, true);
}

void EpollIoModel::WaitOnLoop(Loop* loop, Conn* conn, uint32_t events) {
  conn->wait_deadline = conn->core().deadline();
  loop->next_scan = std::min(loop->next_scan, conn->wait_deadline);
  if (conn->registered && ((events & EPOLLOUT) == 0 || conn->out_watched)) return;
  // Edge-triggered, once (and once more to add EPOLLOUT): registering after
  // the first read means a request that came with the connection costs no
  // event.
  conn->out_watched = (events & EPOLLOUT) != 0;
  const bool ok =
      EpollCtl(loop->epfd.get(), conn->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, conn->fd.get(),
               static_cast<Target*>(conn), kEdgeEvents | (events & EPOLLOUT));
  conn->registered = true;
  if (!ok) {
    conn->core().OnError();  // cannot wait for it: drop it
    CloseConn(loop, conn);
  }
}

void EpollIoModel::OnReady(Loop* loop, Target* target, uint32_t events, int64_t now) {
  if (target->kind == Target::Kind::kListener) {
    AcceptOnLoop(loop, static_cast<const Listener*>(target), now);
    return;
  }
  auto* conn = static_cast<Conn*>(target);
  // Edge-triggered: remember the edge even while a worker has the
  // connection; the loop reads when it is back.
  conn->drained = false;
  if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) conn->hup_seen = true;
  if (!conn->busy) DriveOnLoop(loop, conn, now);
}

void EpollIoModel::Adopt(Loop* loop, Conn* conn, int64_t now, bool handed) {
  DriveOnLoop(loop, conn, now);  // registered at its first wait
  if (handed) Seen();            // (conn may be a worker's by now: not touched)
}

void EpollIoModel::DriveOnWorker(Conn* conn) {
  HandlingDriver driver{handler_, conn};  // handles whole frames; the loop writes
  RunCore(&conn->core(), &stop_, &driver);
}

}  // namespace kv
