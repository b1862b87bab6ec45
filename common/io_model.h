// IoModel: how accepted connections get served.
//
// The accept loop (server.cpp) owns the listening sockets and hands every
// accepted fd to an IoModel; the IoModel owns it from then on. A model that
// accepts for itself (the epoll loops) takes the listeners instead
// (TakeListeners), and the accept loop then only waits for the stop. Thread
// per connection (the lab's model, thread_per_connection.h) is one
// implementation; the worker pool (pool_io.h), the epoll loops (epoll_io.h)
// and the io_uring loops (uring_io.h), on their shared base event_io.h, are
// three more, behind the same calls. All drive the same ConnectionCore.
//
// Thread safety: Dispatch(), TakeListeners() and StopAccepting() are called
// from the accept thread only; Drain() once, from the accept thread, after
// the last Dispatch() and after StopAccepting().
#ifndef KV_COMMON_IO_MODEL_H_
#define KV_COMMON_IO_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/acceptor.h"

namespace kv {

class IoModel {
 public:
  virtual ~IoModel() = default;

  virtual std::string_view name() const = 0;

  // Takes ownership of a connected fd and serves it. Returns false if it could
  // not (e.g. no thread could be created); the fd is then already closed.
  virtual bool Dispatch(int fd) = 0;

  // Offers the (non-blocking) listening sockets to a model that accepts by
  // itself under `policy` (both outlive StopAccepting()). Returns false if
  // the model does not: the caller accepts and calls Dispatch().
  virtual bool TakeListeners(const std::vector<int>& /*listeners*/, AcceptPolicy* /*policy*/) {
    return false;
  }

  // Stops accepting (after TakeListeners) and returns what was accepted;
  // once it returns, no thread touches the listeners.
  virtual AcceptStats StopAccepting() { return {}; }

  // Stops reading new requests on every open connection, lets requests in
  // flight finish, and waits until all connections are closed or
  // `deadline_ns` (MonotonicNanos()) passes. Returns how many remain open.
  virtual std::size_t Drain(int64_t deadline_ns) = 0;

  // Connections being served right now.
  virtual std::size_t open_connections() const = 0;

  // Of those, connections handed over (Dispatch) that the model has not
  // looked at yet, so their peers may have closed them already (acceptor.h,
  // WAIT). Read it before open_connections(): a connection no longer
  // counted here that its peer had closed is no longer counted open either.
  virtual std::size_t unseen_connections() const { return 0; }
};

}  // namespace kv

#endif  // KV_COMMON_IO_MODEL_H_
