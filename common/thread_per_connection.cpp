#include "common/thread_per_connection.h"

#include <pthread.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <new>

#include "common/clock.h"
#include "common/net.h"
#include "common/unique_fd.h"

namespace kv {
namespace {

constexpr std::size_t kThreadStackBytes = std::size_t{256} * 1024;

struct ThreadStart {
  ThreadPerConnection* self;
  int fd;
};

// pthread_attr_t with its destroy call tied to scope.
class ThreadAttr {
 public:
  ThreadAttr() : rc_(pthread_attr_init(&attr_)) {}
  ~ThreadAttr() {
    if (rc_ == 0) pthread_attr_destroy(&attr_);
  }
  ThreadAttr(const ThreadAttr&) = delete;
  ThreadAttr& operator=(const ThreadAttr&) = delete;
  // Small stack, detached. Returns 0 or the error number.
  int SetUp() {
    if (rc_ != 0) return rc_;
    if (const int rc = pthread_attr_setstacksize(&attr_, kThreadStackBytes); rc != 0) return rc;
    return pthread_attr_setdetachstate(&attr_, PTHREAD_CREATE_DETACHED);
  }
  const pthread_attr_t* get() const { return &attr_; }

 private:
  pthread_attr_t attr_;
  const int rc_;
};

}  // namespace

int ThreadPerConnection::StartThread(int fd) {
  ThreadAttr attr;
  if (const int rc = attr.SetUp(); rc != 0) return rc;
  // nothrow: out of memory refuses this connection rather than ending the server.
  std::unique_ptr<ThreadStart> start(new (std::nothrow) ThreadStart{this, fd});
  if (start == nullptr) return ENOMEM;
  pthread_t thread;
  const int rc = pthread_create(&thread, attr.get(), &ThreadMain, start.get());
  // ThreadMain owns it now: the pointer it was given is the one kept.
  if (rc == 0) static_cast<void>(start.release());  // NOLINT(bugprone-unused-return-value)
  return rc;
}

bool ThreadPerConnection::Dispatch(int fd) {
  {
    MutexLock guard(&conn_mu_);
    open_fds_.insert(fd);
  }
  const int rc = StartThread(fd);
  if (rc != 0) {
    // Out of threads (RLIMIT_NPROC, threads-max) or memory for a stack: the
    // connection is refused like one over --max-connections, and the server
    // carries on; threads of finished connections free the resources again.
    {
      MutexLock guard(&conn_mu_);
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
  const std::unique_ptr<ThreadStart> start(static_cast<ThreadStart*>(arg));
  start->self->Serve(start->fd);
  return nullptr;
}

void ThreadPerConnection::Serve(int fd) {
  UniqueFd owned(fd);
  ServeConnection(fd, handler_, limits_, &stop_);
  // The thread ends: its timing shard goes to the totals before Drain() can
  // see the connection closed.
  handler_->FlushThread();
  MutexLock guard(&conn_mu_);
  // Forget the fd before closing it, so Drain() never shuts down a reused fd.
  open_fds_.erase(fd);
  owned.Reset();
  if (open_fds_.empty()) all_closed_.SignalAll();
}

std::size_t ThreadPerConnection::Drain(int64_t deadline_ns) {
  stop_.Request();
  MutexLock guard(&conn_mu_);
  // Wake every thread blocked in recv (connection.h StopSignal). Under
  // conn_mu_: a thread forgets its fd before closing it, so no fd here has
  // been reused. A failure (ENOTCONN: the peer reset already) leaves nothing
  // to wake.
  for (const int fd : open_fds_) shutdown(fd, SHUT_RD);
  while (!open_fds_.empty()) {
    const int64_t left = deadline_ns - MonotonicNanos();
    if (left <= 0) break;
    all_closed_.WaitFor(&conn_mu_, std::chrono::nanoseconds(left));
  }
  return open_fds_.size();
}

std::size_t ThreadPerConnection::open_connections() const {
  MutexLock guard(&conn_mu_);
  return open_fds_.size();
}

}  // namespace kv
