// EventIoModel: what the event-driven I/O models (--io pool, pool_io.h;
// --io epoll, epoll_io.h; --io uring, uring_io.h) share: event loops with
// their bookkeeping of connections, a fixed pool of worker threads fed by
// one queue, hand-offs between them, deadlines, and the drain at shutdown.
// The models differ in how a connection waits on a loop (one-shot or
// edge-triggered readiness, or an io_uring operation in flight), what a
// ready connection does (go to a worker, or be driven on the loop), who
// accepts, and whether workers do socket I/O: the virtual hooks below. The
// loops wait in epoll_wait unless a model waits its own way (WaitAndHandle).
//
// Every connection is driven through the same steps and dispatch loop as
// thread per connection (conn_io.h), so error replies, deadlines, half-close
// and shutdown behave identically. The time a batch waits for a worker is
// reported as queue_ns (RequestHandler).
//
// Ownership: a connection is owned by exactly one thread at a time, its loop
// or one worker; it moves between them only through the mutex-guarded queues
// below, which order every access. The queues are intrusive (linked through
// the connection), and a loop reuses the records of closed connections, so
// serving a request, or (once warm) a connection, allocates nothing. Open
// connections are counted per loop (mostly by the loop itself), not in one
// counter every connection writes.
// Thread safety: as io_model.h.
#ifndef KV_COMMON_EVENT_IO_H_
#define KV_COMMON_EVENT_IO_H_

#include <sys/epoll.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "common/conn_io.h"
#include "common/connection_core.h"
#include "common/io_model.h"
#include "common/mutex.h"
#include "common/request_handler.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "common/unique_fd.h"

namespace kv {

class EventIoModel : public IoModel {
 public:
  ~EventIoModel() override;

  bool Dispatch(int fd) override;
  std::size_t Drain(int64_t deadline_ns) override;
  std::size_t open_connections() const override;
  std::size_t unseen_connections() const override;
  // If an epoll set or an eventfd could not be made: why (Dispatch() then
  // refuses every connection).
  const Status& init_status() const { return init_status_; }

 protected:
  struct Target;
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
  // A worker's RunCore driver (conn_io.h) that handles whole frames and
  // leaves the socket to the loop. The time since a frame was received is
  // its queue_ns.
  struct HandlingDriver {
    RequestHandler* handler;
    Conn* conn;
    int64_t Now() const;
    bool Frame(ConnectionCore::Action action, int64_t now);
    bool Write() { return false; }
    bool Read() { return false; }
    void Close() {}  // the loop owns the set of connections; it closes
  };

  // Makes `loops` event loops (init_status() says if that failed); starts no
  // thread. `inline_requests`: the loops run requests themselves. `epoll`:
  // each loop gets an epoll set (a model that waits its own way needs none).
  EventIoModel(std::size_t loops, bool inline_requests, RequestHandler* handler,
               const ConnectionLimits& limits, bool epoll = true);
  // Starts the loop threads and `workers` worker threads. The subclass calls
  // it last in its constructor (the threads call its hooks), and JoinAll()
  // first in its destructor.
  void Start(std::size_t workers);
  void JoinAll() EXCLUDES(work_mu_);  // stops and joins every thread (idempotent)

  // The hooks. A connection `target` (or another target of the subclass's)
  // is ready with `events` (models that wait in epoll_wait).
  virtual void OnReady(Loop* /*loop*/, Target* /*target*/, uint32_t /*events*/, int64_t /*now*/) {}
  // Waits until `until` (MonotonicNanos(); kNoDeadline: without end; at or
  // before `before`, the time read before: only looks), calls Awake(loop)
  // as soon as the wait has ended, then acts on what happened. Returns the
  // time read after the wait. Default: epoll_wait, then OnReady per event.
  virtual int64_t WaitAndHandle(Loop* loop, int64_t until, int64_t before);
  // Serves a new connection, counted open on `loop`; `handed`: it came
  // through HandOff and counts as unseen until it has been looked at (read
  // once, and closed if its peer had closed it: Seen()).
  virtual void Adopt(Loop* loop, Conn* conn, int64_t now, bool handed) = 0;
  // Waits on the loop for `events` on the connection until its core's
  // deadline (or closes it if it cannot).
  virtual void WaitOnLoop(Loop* loop, Conn* conn, uint32_t events) = 0;
  // On a worker: drives the connection until it goes back to its loop.
  virtual void DriveOnWorker(Conn* conn) = 0;
  // At a deadline scan of the loop (a subclass may move next_scan).
  virtual void OnScan(Loop* /*loop*/, int64_t /*now*/) {}

  // Runs the connection's core on the loop thread until it must wait, is
  // handed to a worker, or closes. Also what a deadline scan (or the stop)
  // does to a connection waiting on the loop.
  virtual void DriveOnLoop(Loop* loop, Conn* conn, int64_t now);
  // Serves a new connection on `fd` (already counted open on `loop`): a
  // record for it, then Adopt().
  void AdoptConn(Loop* loop, int fd, int64_t now, bool handed);
  void CloseConn(Loop* loop, Conn* conn);
  // Takes a connection `loop` accepted, or hands it to a less loaded loop:
  // whichever loop wakes first accepts, so a burst of connects could all
  // land on one.
  void TakeAccepted(Loop* loop, int fd, int64_t now);
  // The loop with the fewest open connections if it has at least two fewer
  // than `mine`, else `mine`.
  Loop* LeastLoaded(Loop* mine) const;
  void ToWorkers(Conn* conn) EXCLUDES(work_mu_);
  // Gives a new connection to `loop` (its mutex-guarded incoming list).
  void HandOff(Loop* loop, int fd);
  void Seen();
  // The loop's wait has ended: hand-offs from now on must wake it.
  void Awake(Loop* loop);
  void Wake(Loop* loop);
  bool inline_requests() const { return inline_; }
  void SetInitFailed(Status why) { init_status_ = std::move(why); }

  static constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();

  RequestHandler* const handler_;
  StopSignal stop_;
  std::vector<std::unique_ptr<Loop>> loops_;

 private:
  struct LoopDriver;  // DriveOnLoop's RunCore driver
  Status MakeLoop(bool epoll);
  void LoopMain(Loop* loop);
  // One pass of a loop thread: wait for events and drive the ready
  // connections. Returns the time read after the wait.
  int64_t PollEvents(Loop* loop);
  void OnEvent(Loop* loop, const epoll_event& event, int64_t now);
  bool TakeHandoffs(Loop* loop, int64_t now);  // true: quit
  void ScanDeadlines(Loop* loop, int64_t now);
  // A record for a new connection on `fd` (a closed one's, if any);
  // RecycleConn gives it back.
  Conn* NewConn(Loop* loop, int fd, int64_t now);
  void RecycleConn(Loop* loop, Conn* conn);
  void WorkerMain();
  // The next connection for a worker; nullptr when the model quits. Lets
  // the timing log hand the thread's shard off while it waits.
  Conn* TakeWork() EXCLUDES(work_mu_);
  // Waits until `until` (MonotonicNanos(); LatencyLog::kNever: without end)
  // for work or the quit; true if either is there.
  bool WaitForWork(int64_t until) REQUIRES(work_mu_);
  void BackToLoop(Conn* conn);

  const bool inline_;
  const ConnectionLimits limits_;
  Status init_status_;
  std::vector<std::thread> threads_;
  std::size_t next_loop_ = 0;  // accept thread only

  Mutex work_mu_;
  CondVar work_cv_;
  ConnQueue work_ GUARDED_BY(work_mu_);
  bool quit_ GUARDED_BY(work_mu_) = false;

  // Connections handed over (HandOff) and not looked at yet: added by the
  // thread that hands one over, taken off by its loop (io_model.h).
  std::atomic<int64_t> unseen_{0};
};

// What an epoll event's data.ptr points at (nullptr: the loop's wake-up).
struct EventIoModel::Target {
  enum class Kind { kConn, kListener };
  explicit Target(Kind k) : kind(k) {}
  const Kind kind;
};

struct EventIoModel::Conn : Target {
  explicit Conn(Loop* l) : Target(Kind::kConn), loop(l) {}
  // Only called while the connection is open, between its set-up (emplace) and its close.
  ConnectionCore& core() { return *core_storage; }  // NOLINT(bugprone-unchecked-optional-access)

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
  // uring: a recv (or, with out_watched, a send) is in flight, so its
  // buffer is the kernel's and the record cannot be reused; cancelling: a
  // cancel of it has been asked for.
  bool in_flight = false;
  bool cancelling = false;
  Conn* next = nullptr;       // in a ConnQueue, or the loop's free list
  Conn* open_prev = nullptr;  // the loop's list of open connections
  Conn* open_next = nullptr;
  int64_t wait_deadline = 0;  // while waiting on the loop
};

struct EventIoModel::Loop {
  explicit Loop(std::size_t i) : index(i) {}

  const std::size_t index;  // in loops_
  UniqueFd epfd;            // none for a model that waits its own way
  UniqueFd wake_fd;
  Mutex mu;
  std::vector<int> incoming GUARDED_BY(mu);  // new connections (HandOff)
  ConnQueue returned GUARDED_BY(mu);         // back from a worker
  bool quit GUARDED_BY(mu) = false;
  // The loop is in (or about to enter) epoll_wait with nothing handed to it:
  // the next hand-off must write the eventfd. A busy loop finds hand-offs by
  // itself, so they cost no wake-up write.
  bool sleeping GUARDED_BY(mu) = false;
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
};

// epoll_ctl with `ptr` as the event's data. True on success.
bool EpollCtl(int epfd, int op, int fd, void* ptr, uint32_t events);

}  // namespace kv

#endif  // KV_COMMON_EVENT_IO_H_
