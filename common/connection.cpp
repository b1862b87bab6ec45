#include "common/connection.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/clock.h"
#include "common/net.h"

namespace kv {

StopSignal::StopSignal() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

StopSignal::~StopSignal() {
  if (fd_ >= 0) close(fd_);
}

void StopSignal::Request() {
  stop_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  // Never read back: the eventfd stays readable, waking every poll on it.
  [[maybe_unused]] const ssize_t r = write(fd_, &one, sizeof one);
}

namespace {
// How long a connection must be quiet before its thread hands its timing
// shard off (so the timing file is never late by more than this).
constexpr int64_t kQuietNs = 10'000'000;
}  // namespace

uint64_t ServeConnection(int fd, RequestHandler* handler, const ConnectionLimits& limits,
                         const StopSignal* stop) {
  ConnectionCore core(limits, MonotonicNanos());
  const int stop_fd = stop != nullptr ? stop->fd() : -1;
  bool flushed = true;  // this thread's timing shard holds nothing of ours
  for (;;) {
    if (stop != nullptr && !core.stopping() && stop->requested()) {
      core.OnStop(0);  // checked between steps: an atomic load
    }
    switch (core.Next(MonotonicNanos())) {
      case ConnectionCore::Action::kHandle:
        handler->Handle(core.frame(), core.frame_received_ns(), core.reply_slot());
        core.FrameDone();
        flushed = false;
        break;
      case ConnectionCore::Action::kReject:
        handler->Reject(core.reject_message(), core.reply_slot());
        core.FrameDone();
        break;
      case ConnectionCore::Action::kWrite: {
        const ssize_t r = send(fd, core.out_data(), core.out_size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r > 0) {
          core.OnWritten(static_cast<std::size_t>(r), MonotonicNanos());
        } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          if (WaitReady(fd, POLLOUT, core.deadline()) < 0) core.OnError();
        } else if (!(r < 0 && errno == EINTR)) {
          core.OnError();  // the client left without its reply
        }
        break;
      }
      case ConnectionCore::Action::kRead: {
        const ssize_t r = recv(fd, core.in_space(), core.in_space_size(), MSG_DONTWAIT);
        if (r > 0) {
          core.OnBytes(static_cast<std::size_t>(r), MonotonicNanos());
        } else if (r == 0) {
          core.OnEof(MonotonicNanos());
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
          // A keep-alive client usually sends its next request within
          // microseconds: wait a little first, and hand the timing shard
          // off only if the connection really goes quiet (so ping-pong
          // traffic takes no shared lock per request; latency_log.h).
          int64_t wait_until = core.deadline();
          if (!flushed) {
            wait_until = std::min(wait_until, MonotonicNanos() + kQuietNs);
          }
          const int ready = WaitReady(fd, POLLIN, wait_until, stop_fd);
          if (ready == 0 && !flushed) {
            handler->FlushThread();
            flushed = true;
          }
          if (ready == 2) core.OnStop(MonotonicNanos());
          if (ready < 0) core.OnError();
        } else if (errno != EINTR) {
          core.OnError();  // reset
        }
        break;
      }
      case ConnectionCore::Action::kClose:
        if (core.cut_by_shutdown()) handler->CountCutByShutdown();
        handler->FlushThread();
        return core.answered();
    }
  }
}

}  // namespace kv
