// IoModel: how accepted connections get served.
//
// The accept loop (server.cpp) owns the listening sockets and hands every
// accepted fd to an IoModel; the IoModel owns it from then on. Thread per
// connection (the lab's model, thread_per_connection.h) is one
// implementation; the worker pool and the epoll loops (event_io.h) are
// another, behind the same calls. All drive the same ConnectionCore.
//
// Thread safety: Dispatch() is called from the accept thread only; Drain()
// once, from the accept thread, after the last Dispatch().
#ifndef KV_COMMON_IO_MODEL_H_
#define KV_COMMON_IO_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kv {

class IoModel {
 public:
  virtual ~IoModel() = default;

  virtual std::string_view name() const = 0;

  // Takes ownership of a connected fd and serves it. Returns false if it could
  // not (e.g. no thread could be created); the fd is then already closed.
  virtual bool Dispatch(int fd) = 0;

  // Stops reading new requests on every open connection, lets requests in
  // flight finish, and waits until all connections are closed or
  // `deadline_ns` (MonotonicNanos()) passes. Returns how many remain open.
  virtual std::size_t Drain(int64_t deadline_ns) = 0;

  // Connections being served right now.
  virtual std::size_t open_connections() const = 0;
};

}  // namespace kv

#endif  // KV_COMMON_IO_MODEL_H_
