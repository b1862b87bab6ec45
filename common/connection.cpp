#include "common/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>

#include "common/clock.h"
#include "common/net.h"
#include "common/status.h"

namespace kv {

namespace {

// How long a connection must be quiet before its thread hands its timing
// shard off (so the timing file is never late by more than this).
constexpr int64_t kQuietNs = 10'000'000;
// SO_RCVTIMEO of zero means "no timeout": never ask for less than this.
constexpr int64_t kMinTimeoutNs = 1'000;

// The blocking driver of one connection: ConnectionCore's actions done with
// blocking recv (bounded by SO_RCVTIMEO) and non-blocking send. In keep-alive
// a request costs one recv and one send: the receive timeout is changed only
// on a state change (the shard was handed off, a deadline came nearer), not
// per request.
class BlockingDriver {
 public:
  BlockingDriver(int fd, RequestHandler* handler, const ConnectionLimits& limits,
                 const StopSignal* stop)
      : fd_(fd), handler_(handler), stop_(stop), core_(limits, MonotonicNanos()) {}

  uint64_t Run();

 private:
  void Write();
  void Read();
  // Sets SO_RCVTIMEO so the next recv waits at most until the core's
  // deadline and, while the shard holds requests, at most kQuietNs.
  Status BoundNextRead();

  const int fd_;
  RequestHandler* const handler_;
  const StopSignal* const stop_;
  ConnectionCore core_;
  bool flushed_ = true;         // this thread's timing shard holds nothing of ours
  bool timed_out_ = false;      // the last recv ended at its timeout
  int64_t rcv_timeout_ns_ = 0;  // SO_RCVTIMEO now (0: none set yet)
};

uint64_t BlockingDriver::Run() {
  for (;;) {
    if (stop_ != nullptr && !core_.stopping() && stop_->requested()) {
      core_.OnStop(0);  // checked between steps: an atomic load
    }
    switch (core_.Next(MonotonicNanos())) {
      case ConnectionCore::Action::kHandle:
        handler_->Handle(core_.frame(), core_.frame_received_ns(), core_.reply_slot());
        core_.FrameDone();
        flushed_ = false;
        break;
      case ConnectionCore::Action::kReject:
        handler_->Reject(core_.reject_message(), core_.reply_slot());
        core_.FrameDone();
        break;
      case ConnectionCore::Action::kWrite:
        Write();
        break;
      case ConnectionCore::Action::kRead:
        Read();
        break;
      case ConnectionCore::Action::kClose:
        if (core_.cut_by_shutdown()) handler_->CountCutByShutdown();
        handler_->FlushThread();
        return core_.answered();
    }
  }
}

void BlockingDriver::Write() {
  // Non-blocking: a 100-byte reply nearly always fits the socket buffer, so
  // this is one send; a full buffer is waited for within the write deadline.
  const ssize_t r = send(fd_, core_.out_data(), core_.out_size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (r > 0) {
    core_.OnWritten(static_cast<std::size_t>(r), MonotonicNanos());
  } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    if (WaitReady(fd_, POLLOUT, core_.deadline()) < 0) core_.OnError();
  } else if (!(r < 0 && errno == EINTR)) {
    core_.OnError();  // the client left without its reply
  }
}

Status BlockingDriver::BoundNextRead() {
  int64_t want = core_.deadline() - MonotonicNanos();
  // A keep-alive client usually sends its next request within microseconds:
  // wait a little first, and hand the timing shard off only if the
  // connection really goes quiet (so ping-pong traffic takes no shared lock
  // per request; latency_log.h). Before the first request, too.
  if (!flushed_ || rcv_timeout_ns_ == 0) want = std::min(want, kQuietNs);
  want = std::max(want, kMinTimeoutNs);
  // Too long a timeout would overshoot a deadline; too short one only wakes
  // early (Next() then finds the deadline not yet due): reset it after a
  // timeout only.
  if (rcv_timeout_ns_ != 0 && rcv_timeout_ns_ <= want && !timed_out_) return Status::OK();
  const timeval tv{static_cast<time_t>(want / 1'000'000'000),
                   static_cast<suseconds_t>((want % 1'000'000'000 + 999) / 1'000)};
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
    return Status::IOError("setsockopt SO_RCVTIMEO", errno);
  }
  rcv_timeout_ns_ = want;
  timed_out_ = false;
  return Status::OK();
}

void BlockingDriver::Read() {
  if (!BoundNextRead().ok()) {
    core_.OnError();  // cannot bound the wait: do not wait unbounded
    return;
  }
  const ssize_t r = recv(fd_, core_.in_space(), core_.in_space_size(), 0);
  if (r > 0) {
    core_.OnBytes(static_cast<std::size_t>(r), MonotonicNanos());
  } else if (r == 0) {
    // The stopper shuts our read side down to wake us (connection.h): that
    // is a stop, not the client's half-close.
    if (stop_ != nullptr && stop_->requested()) {
      core_.OnStop(MonotonicNanos());
    } else {
      core_.OnEof(MonotonicNanos());
    }
  } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
    timed_out_ = true;
    if (!flushed_) {
      handler_->FlushThread();
      flushed_ = true;
    }
  } else if (errno != EINTR) {
    core_.OnError();  // reset
  }
}

}  // namespace

uint64_t ServeConnection(int fd, RequestHandler* handler, const ConnectionLimits& limits,
                         const StopSignal* stop) {
  return BlockingDriver(fd, handler, limits, stop).Run();
}

}  // namespace kv
