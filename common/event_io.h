// EventIoModel: the two I/O models besides thread per connection (--io).
//
//  - epoll: one event loop per core (epoll, non-blocking sockets); the
//    acceptor spreads connections over the loops round-robin. A loop reads
//    and writes, but never runs a request: the lock and the artificial delay
//    block, so each batch of whole frames is handed to a fixed pool of worker
//    threads, and a sleeping request never stalls the loop's other
//    connections. The worker hands the connection back with its replies;
//    the loop writes them.
//  - pool: a fixed pool of worker threads fed by one poller (the acceptor
//    hands connections to it). A worker takes a connection that is readable,
//    reads, handles and writes until the connection has no whole frame left
//    (recv would block), then returns it to the poller. So idle keep-alive
//    connections hold no worker, and cannot starve the others (the seed
//    mserve's thread pool pinned one worker per connection).
//
// Both drive the same ConnectionCore as thread per connection, so error
// replies, deadlines, half-close and shutdown behave identically. The time a
// batch waits for a worker is reported as queue_ns (RequestHandler).
//
// Ownership: a connection is owned by exactly one thread at a time, its loop
// or one worker; it moves between them only through the mutex-guarded queues
// below, which order every access. The queues are intrusive (linked through
// the connection), so serving a request allocates nothing.
// Thread safety: as io_model.h.
#ifndef KV_COMMON_EVENT_IO_H_
#define KV_COMMON_EVENT_IO_H_

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

  // `loops` event loops (epoll; pool uses 1) and `workers` worker threads.
  // Returns with every thread started. `handler` must outlive the model. If
  // an epoll set or an eventfd cannot be made, init_status() says why and
  // Dispatch() refuses every connection.
  EventIoModel(Mode mode, RequestHandler* handler, const ConnectionLimits& limits,
               std::size_t loops, std::size_t workers);
  ~EventIoModel() override;

  std::string_view name() const override { return mode_ == Mode::kEpoll ? "epoll" : "pool"; }
  bool Dispatch(int fd) override;
  std::size_t Drain(int64_t deadline_ns) override;
  std::size_t open_connections() const override { return open_.load(std::memory_order_relaxed); }
  const Status& init_status() const { return init_status_; }

 private:
  struct Conn;
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
  bool TakeHandoffs(Loop* loop, int64_t now);  // true: quit
  void AdoptConn(Loop* loop, int fd, int64_t now);
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
  RequestHandler* const handler_;
  const ConnectionLimits limits_;
  Status init_status_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::vector<std::thread> threads_;
  std::size_t next_loop_ = 0;  // accept thread only

  Mutex work_mu_;
  CondVar work_cv_;
  ConnQueue work_ GUARDED_BY(work_mu_);
  bool quit_ GUARDED_BY(work_mu_) = false;

  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> open_{0};
  Mutex drain_mu_;  // orders the last close's signal with Drain()'s wait
  CondVar all_closed_;
};

}  // namespace kv

#endif  // KV_COMMON_EVENT_IO_H_
