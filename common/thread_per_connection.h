// ThreadPerConnection: the lab's I/O model, one thread per accepted connection.
//
// Each connection gets a detached thread (small 256 KiB stack, so a thousand
// concurrent clients cost little memory) running ServeConnection() until the
// peer is done, then closing the fd. If no thread can be created, Dispatch()
// refuses the connection ("ERROR server busy ...", close; see net.h
// RefuseConnection) and returns false with errno set.
// Memory bound: at most --max-connections threads (the accept loop checks
// open_connections() first), each with a 256 KiB stack reserved, plus one fd
// and one set entry: 4096 x 256 KiB = 1 GiB of address space at the default
// limit; RSS counts only the stack pages a thread touches.
// Drain() raises the stop signal (conn_io.h) and shuts down the read side
// of every open connection (shutdown(SHUT_RD)), so a thread blocked waiting
// for a next request wakes up and ends, one waiting for the rest of a frame
// drops it, and one in the middle of a request finishes it and sends its
// reply.
//
// Thread safety: conn_mu_ guards open_fds_; the connection threads and the
// accept thread meet only there. Dispatch()/Drain() as in io_model.h.
#ifndef KV_COMMON_THREAD_PER_CONNECTION_H_
#define KV_COMMON_THREAD_PER_CONNECTION_H_

#include <cstddef>
#include <unordered_set>

#include "common/connection.h"
#include "common/io_model.h"
#include "common/mutex.h"
#include "common/request_handler.h"
#include "common/thread_annotations.h"

namespace kv {

class ThreadPerConnection final : public IoModel {
 public:
  // `handler` must outlive every connection thread (see Drain()).
  ThreadPerConnection(RequestHandler* handler, const ConnectionLimits& limits)
      : handler_(handler), limits_(limits) {}

  std::string_view name() const override { return "thread-per-connection"; }
  bool Dispatch(int fd) override EXCLUDES(conn_mu_);
  std::size_t Drain(int64_t deadline_ns) override EXCLUDES(conn_mu_);
  std::size_t open_connections() const override EXCLUDES(conn_mu_);

 private:
  static void* ThreadMain(void* arg);
  // Starts the detached thread serving fd (registered in open_fds_ already).
  // Returns 0 or an error number, as pthread_create (the caller sets errno).
  int StartThread(int fd);
  void Serve(int fd) EXCLUDES(conn_mu_);

  RequestHandler* const handler_;
  const ConnectionLimits limits_;
  StopSignal stop_;

  mutable Mutex conn_mu_;
  CondVar all_closed_;
  std::unordered_set<int> open_fds_ GUARDED_BY(conn_mu_);
};

}  // namespace kv

#endif  // KV_COMMON_THREAD_PER_CONNECTION_H_
