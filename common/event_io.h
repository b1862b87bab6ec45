// EventIoModel: the two I/O models besides thread per connection (--io).
//
//  - epoll: one event loop per core (--loops), each with its own epoll set
//    holding the listening sockets (EPOLLEXCLUSIVE: a new connection wakes
//    one loop), so a loop accepts for itself and keeps the connections it
//    accepted; no acceptor thread and no hand-off, unless another loop has
//    at least two fewer connections open (a burst of connects would
//    otherwise land on whichever loop woke first). A connection is registered
//    once, edge-triggered (EPOLLOUT added only when a send would block), so
//    waiting costs no epoll_ctl. With no artificial delay a loop runs each
//    request itself (the lock is held for nanoseconds; Config::
//    inline_requests). With a delay it never does: the lock and the delay
//    block, so each batch of whole frames is handed to a fixed pool of worker
//    threads, and a sleeping request never stalls the loop's other
//    connections; the worker hands the connection back with its replies and
//    the loop writes them.
//  - pool: a fixed pool of worker threads fed by one poller (the acceptor
//    hands connections to it; one-shot registrations). A worker takes a
//    connection that is readable, reads, handles and writes until the
//    connection has no whole frame left (recv would block), then returns it
//    to the poller. So idle keep-alive connections hold no worker, and cannot
//    starve the others (the seed mserve's thread pool pinned one worker per
//    connection).
//
// Both drive the same ConnectionCore as thread per connection, so error
// replies, deadlines, half-close and shutdown behave identically. The time a
// batch waits for a worker is reported as queue_ns (RequestHandler).
//
// Ownership: a connection is owned by exactly one thread at a time, its loop
// or one worker; it moves between them only through the mutex-guarded queues
// below, which order every access. The queues are intrusive (linked through
// the connection), and a loop reuses the records of closed connections, so
// serving a request, or (once warm) a connection, allocates nothing. Open
// connections are counted per loop (mostly by the loop itself), not in one
// counter every connection writes.
// Thread safety: as io_model.h; a loop takes its listeners from the accept
// thread (TakeListeners, StopAccepting) under its mutex.
#ifndef KV_COMMON_EVENT_IO_H_
#define KV_COMMON_EVENT_IO_H_

#include <sys/epoll.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "common/connection_core.h"
#include "common/io_model.h"
#include "common/mutex.h"
#include "common/request_handler.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace kv {

class EventIoModel final : public IoModel {
 public:
  enum class Mode { kEpoll, kPool };

  struct Config {
    Mode mode = Mode::kEpoll;
    std::size_t loops = 1;    // event loops (epoll; pool uses 1)
    std::size_t workers = 1;  // worker threads (none in epoll with inline_requests)
    // epoll only: the loops run requests themselves (for stores whose
    // accesses never sleep: no artificial delay).
    bool inline_requests = false;
  };

  // Returns with every thread started. `handler` must outlive the model. If
  // an epoll set or an eventfd cannot be made, init_status() says why and
  // Dispatch() refuses every connection.
  EventIoModel(const Config& config, RequestHandler* handler, const ConnectionLimits& limits);
  ~EventIoModel() override;

  std::string_view name() const override { return mode_ == Mode::kEpoll ? "epoll" : "pool"; }
  bool Dispatch(int fd) override;
  bool TakeListeners(const std::vector<int>& listeners, AcceptPolicy* policy) override;
  AcceptStats StopAccepting() override;
  std::size_t Drain(int64_t deadline_ns) override;
  std::size_t open_connections() const override;
  std::size_t unseen_connections() const override;
  const Status& init_status() const { return init_status_; }

 private:
  struct Target;
  struct Conn;
  struct Listener;
  struct Loop;
  // A FIFO of connections linked through Conn::next (a connection is in at
  // most one queue at a time): pushing and popping allocate nothing.
  struct ConnQueue {
    Conn* head = nullptr;
    Conn* tail = nullptr;
    bool empty() const { return head == nullptr; }
    void Push(Conn* conn);
    Conn* Pop();
    // Moves every connection to the returned list (linked by next) and
    // leaves this queue empty.
    Conn* TakeAll();
  };

  Status MakeLoop();
  // One pass of a loop thread: wait for events and drive the ready
  // connections; take new and returned connections; act on deadlines.
  // Returns the time read after the wait.
  int64_t PollEvents(Loop* loop);
  void OnEvent(Loop* loop, const epoll_event& event, int64_t now);
  bool TakeHandoffs(Loop* loop, int64_t now);  // true: quit
  // A record for a new connection on `fd` (a closed one's, if any), counted
  // open on its loop; RecycleConn gives it back.
  Conn* NewConn(Loop* loop, int fd, int64_t now);
  void RecycleConn(Loop* loop, Conn* conn);
  // Serves a new connection; `handed`: it came through HandOff and counts as
  // unseen until it has been looked at (read once, and closed if its peer
  // had closed it).
  void AdoptConn(Loop* loop, int fd, int64_t now, bool handed);
  void Seen();
  // Gives a new connection to `loop` (its mutex-guarded incoming list).
  void HandOff(Loop* loop, int fd);
  // The loop with the fewest open connections if it has at least two fewer
  // than `mine`, else `mine`.
  Loop* LeastLoaded(Loop* mine) const;
  // A listener is readable: accept a burst on this loop.
  void AcceptOnLoop(Loop* loop, const Listener* listener, int64_t now);
  // Adds (or removes) every listener to (from) the loop's epoll set; the
  // caller holds loop->mu.
  bool WatchListeners(Loop* loop, bool on);
  void ResumeAccepting(Loop* loop, int64_t now);
  void ScanDeadlines(Loop* loop, int64_t now);
  void LoopMain(Loop* loop);
  void WorkerMain();
  // The next connection for a worker; nullptr when the model quits. Hands
  // the thread's timing shard off if it waits longer than a moment.
  Conn* TakeWork() EXCLUDES(work_mu_);
  // Waits at most `max_ns` (< 0: without end) for work or the quit; true if
  // either is there.
  bool WaitForWork(int64_t max_ns) REQUIRES(work_mu_);
  // Runs the connection's core on the loop thread until it must wait, is
  // handed to a worker, or closes.
  void DriveOnLoop(Loop* loop, Conn* conn, int64_t now);
  // One send / recv on the loop. False when the connection now waits on
  // epoll (or was closed): the caller lets go of it.
  bool WriteOnLoop(Loop* loop, Conn* conn, int64_t now);
  bool ReadOnLoop(Loop* loop, Conn* conn, int64_t now);
  // Waits on the loop for `events` on the connection (one-shot), until its
  // core's deadline.
  void WaitOnLoop(Loop* loop, Conn* conn, uint32_t events);
  // Handles (or rejects) the frame the core handed out.
  void HandleFrame(ConnectionCore& core, ConnectionCore::Action action, int64_t queue_ns);
  // Worker side: handles whole frames (and, in pool mode, does the I/O).
  void DriveOnWorker(Conn* conn);
  // Pool mode: one send / recv on the worker. True to go on driving, false
  // when the socket is not ready (back to the poller).
  bool WriteOnWorker(Conn* conn);
  bool ReadOnWorker(Conn* conn);
  void CloseConn(Loop* loop, Conn* conn);
  void ToWorkers(Conn* conn) EXCLUDES(work_mu_);
  void BackToLoop(Conn* conn);
  void Wake(Loop* loop);
  void JoinAll() EXCLUDES(work_mu_);  // stops and joins every thread (idempotent)

  const Mode mode_;
  const bool inline_;  // loops run requests (epoll, Config::inline_requests)
  RequestHandler* const handler_;
  const ConnectionLimits limits_;
  Status init_status_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::vector<std::thread> threads_;
  std::size_t next_loop_ = 0;  // accept thread only
  // Written by TakeListeners before any loop may see them (under each
  // loop's mutex), then read only.
  std::vector<std::unique_ptr<Listener>> listeners_;

  Mutex work_mu_;
  CondVar work_cv_;
  ConnQueue work_ GUARDED_BY(work_mu_);
  bool quit_ GUARDED_BY(work_mu_) = false;

  std::atomic<bool> stopping_{false};
  // Connections handed over (HandOff) and not looked at yet: added by the
  // thread that hands one over, taken off by its loop (io_model.h).
  std::atomic<int64_t> unseen_{0};
};

}  // namespace kv

#endif  // KV_COMMON_EVENT_IO_H_
