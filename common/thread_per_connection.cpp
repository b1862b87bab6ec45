#include "common/thread_per_connection.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>

#include "common/clock.h"
#include "common/net.h"

namespace kv {
namespace {

constexpr std::size_t kThreadStackBytes = std::size_t{256} * 1024;

struct ThreadStart {
  ThreadPerConnection* self;
  int fd;
};

}  // namespace

bool ThreadPerConnection::Dispatch(int fd) {
  {
    std::lock_guard<std::mutex> guard(conn_mu_);
    open_fds_.insert(fd);
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kThreadStackBytes);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  auto* start = new (std::nothrow) ThreadStart{this, fd};
  pthread_t thread;
  const int rc = start == nullptr ? ENOMEM : pthread_create(&thread, &attr, &ThreadMain, start);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    // Out of threads (RLIMIT_NPROC, threads-max) or memory for a stack: the
    // connection is refused like one over --max-connections, and the server
    // carries on; threads of finished connections free the resources again.
    delete start;
    {
      std::lock_guard<std::mutex> guard(conn_mu_);
      open_fds_.erase(fd);
    }
    RefuseConnection(fd,
                     "server busy: cannot start a thread for this "
                     "connection; try again");
    errno = rc;
    return false;
  }
  return true;
}

void* ThreadPerConnection::ThreadMain(void* arg) {
  auto* start = static_cast<ThreadStart*>(arg);
  ThreadPerConnection* self = start->self;
  const int fd = start->fd;
  delete start;
  self->Serve(fd);
  return nullptr;
}

void ThreadPerConnection::Serve(int fd) {
  ServeConnection(fd, handler_, limits_, &stop_);
  std::lock_guard<std::mutex> guard(conn_mu_);
  // Forget the fd before closing it, so Drain() never shuts down a reused fd.
  open_fds_.erase(fd);
  close(fd);
  if (open_fds_.empty()) all_closed_.notify_all();
}

std::size_t ThreadPerConnection::Drain(int64_t deadline_ns) {
  stop_.Request();
  std::unique_lock<std::mutex> lock(conn_mu_);
  const int64_t left = deadline_ns - MonotonicNanos();
  all_closed_.wait_for(lock, std::chrono::nanoseconds(left > 0 ? left : 0),
                       [this] { return open_fds_.empty(); });
  return open_fds_.size();
}

std::size_t ThreadPerConnection::open_connections() const {
  std::lock_guard<std::mutex> guard(conn_mu_);
  return open_fds_.size();
}

}  // namespace kv
