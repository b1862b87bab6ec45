// EpollIoModel (--io epoll): one event loop per core (--loops), each with
// its own epoll set holding the listening sockets (EPOLLEXCLUSIVE: a new
// connection wakes one loop), so a loop accepts for itself and keeps the
// connections it accepted; no acceptor thread and no hand-off, unless
// another loop has at least two fewer connections open (a burst of connects
// would otherwise land on whichever loop woke first). A connection is
// registered once, edge-triggered (EPOLLOUT added only when a send would
// block), so waiting costs no epoll_ctl. With no artificial delay a loop
// runs each request itself (the lock is held for nanoseconds;
// Config::inline_requests). With a delay it never does: the lock and the
// delay block, so each batch of whole frames is handed to a fixed pool of
// worker threads, and a sleeping request never stalls the loop's other
// connections; the worker hands the connection back with its replies and
// the loop writes them.
//
// The loop, queue and hand-off machinery is EventIoModel's (event_io.h).
// Thread safety: as io_model.h; a loop takes its listeners from the accept
// thread (TakeListeners, StopAccepting) under its Accepting mutex.
#ifndef KV_COMMON_EPOLL_IO_H_
#define KV_COMMON_EPOLL_IO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "common/acceptor.h"
#include "common/connection_core.h"
#include "common/event_io.h"
#include "common/request_handler.h"

namespace kv {

class EpollIoModel final : public EventIoModel {
 public:
  struct Config {
    std::size_t loops = 1;    // event loops
    std::size_t workers = 1;  // worker threads (none with inline_requests)
    // The loops run requests themselves (for stores whose accesses never
    // sleep: no artificial delay).
    bool inline_requests = false;
  };

  // Returns with every thread started. `handler` must outlive the model.
  EpollIoModel(const Config& config, RequestHandler* handler, const ConnectionLimits& limits);
  ~EpollIoModel() override;

  std::string_view name() const override { return "epoll"; }
  bool TakeListeners(const std::vector<int>& listeners, AcceptPolicy* policy) override;
  AcceptStats StopAccepting() override;

 private:
  struct Listener;
  struct Accepting;
  void OnReady(Loop* loop, Target* target, uint32_t events, int64_t now) override;
  void Adopt(Loop* loop, Conn* conn, int64_t now, bool handed) override;
  void WaitOnLoop(Loop* loop, Conn* conn, uint32_t events) override;
  void DriveOnWorker(Conn* conn) override;
  void OnScan(Loop* loop, int64_t now) override;  // resumes accepting after a pause

  // A listener is readable: accept a burst on this loop.
  void AcceptOnLoop(Loop* loop, const Listener* listener, int64_t now);
  // Adds (or removes) every listener to (from) the loop's epoll set; the
  // caller holds the loop's Accepting mutex.
  bool WatchListeners(Loop* loop, bool on);

  // Written by TakeListeners before any loop may see them (under each
  // loop's Accepting mutex), then read only.
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::vector<std::unique_ptr<Accepting>> accepting_;  // one per loop, by Loop::index
};

}  // namespace kv

#endif  // KV_COMMON_EPOLL_IO_H_
