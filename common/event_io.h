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
// below, which order every access.
// Thread safety: as io_model.h.
#ifndef KV_COMMON_EVENT_IO_H_
#define KV_COMMON_EVENT_IO_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/connection_core.h"
#include "common/io_model.h"
#include "common/request_handler.h"

namespace kv {

class EventIoModel final : public IoModel {
 public:
  enum class Mode { kEpoll, kPool };

  // `loops` event loops (epoll; pool uses 1) and `workers` worker threads.
  // Returns with every thread started. `handler` must outlive the model.
  EventIoModel(Mode mode, RequestHandler* handler, const ConnectionLimits& limits,
               std::size_t loops, std::size_t workers);
  ~EventIoModel() override;

  std::string_view name() const override { return mode_ == Mode::kEpoll ? "epoll" : "pool"; }
  bool Dispatch(int fd) override;
  std::size_t Drain(int64_t deadline_ns) override;
  std::size_t open_connections() const override { return open_.load(std::memory_order_relaxed); }

 private:
  struct Conn;
  struct Loop;

  void LoopMain(Loop* loop);
  void WorkerMain();
  // Runs the connection's core on the loop thread until it must wait, is
  // handed to a worker, or closes.
  void DriveOnLoop(Loop* loop, Conn* conn, int64_t now);
  // Worker side: handles whole frames (and, in pool mode, does the I/O).
  void DriveOnWorker(Conn* conn);
  void CloseConn(Loop* loop, Conn* conn);
  void ToWorkers(Conn* conn);
  void BackToLoop(Conn* conn);
  void Wake(Loop* loop);
  void JoinAll();  // stops and joins every thread (idempotent)

  const Mode mode_;
  RequestHandler* const handler_;
  const ConnectionLimits limits_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::vector<std::thread> threads_;
  std::size_t next_loop_ = 0;  // accept thread only

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<Conn*> work_;  // guarded by work_mu_
  bool quit_ = false;       // guarded by work_mu_

  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> open_{0};
  std::mutex drain_mu_;
  std::condition_variable all_closed_;
};

}  // namespace kv

#endif  // KV_COMMON_EVENT_IO_H_
