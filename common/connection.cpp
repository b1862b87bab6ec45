#include "common/connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>

#include "common/clock.h"
#include "common/conn_io.h"
#include "common/latency_log.h"
#include "common/net.h"
#include "common/status.h"

namespace kv {

namespace {

// SO_RCVTIMEO of zero means "no timeout": never ask for less than this.
constexpr int64_t kMinTimeoutNs = 1'000;

// The blocking driver of one connection (a RunCore driver, conn_io.h): the
// core's actions done with a blocking recv bounded by SO_RCVTIMEO and a
// non-blocking send. In keep-alive a request costs one recv and one send:
// the receive timeout is changed only when its bound changes (the timing
// log wants a call sooner, a deadline came nearer, a wait timed out), not
// per request.
class BlockingDriver {
 public:
  BlockingDriver(int fd, RequestHandler* handler, const ConnectionLimits& limits)
      : fd_(fd), handler_(handler), core_(limits, MonotonicNanos()) {}

  uint64_t Run(const StopSignal* stop) {
    stop_ = stop;
    RunCore(&core_, stop, this);
    return core_.answered();
  }

  // RunCore's driver. Now() is asked once per step; when the step before told
  // the core a new time (a recv or send reported: OnBytes, OnWritten, ...),
  // that time is now, to the nanoseconds the core's bookkeeping takes, so the
  // clock is read only after a handled frame or a wait: a keep-alive request
  // reads it for the bytes, the reply and the handler's timing, not once more
  // per step (on a machine whose clock is a system call, each read is one).
  int64_t Now() {
    const int64_t told = core_.event_ns();
    now_ = told != seen_ ? told : MonotonicNanos();
    seen_ = told;
    return now_;
  }
  bool Frame(ConnectionCore::Action action, int64_t /*now*/) {
    AnswerFrame(&core_, action, handler_, 0);
    return true;
  }
  bool Write();
  bool Read();
  void Close() {
    if (core_.cut_by_shutdown()) handler_->CountCutByShutdown();
  }

 private:
  // Sets SO_RCVTIMEO so the next recv waits at most until the core's
  // deadline and until the timing log wants to be called again.
  Status BoundNextRead();

  const int fd_;
  RequestHandler* const handler_;
  const StopSignal* stop_ = nullptr;
  ConnectionCore core_;
  int64_t now_ = 0;             // what Now() last answered
  int64_t seen_ = 0;            // the core's event_ns() when Now() last looked
  bool timed_out_ = false;      // the last recv ended at its timeout
  int64_t rcv_timeout_ns_ = 0;  // SO_RCVTIMEO now (0: none set yet)
};

bool BlockingDriver::Write() {
  if (WriteStep(fd_, &core_) == IoOutcome::kWouldBlock &&
      WaitReady(fd_, POLLOUT, core_.deadline()) < 0) {
    core_.OnError();
  }
  return true;
}

Status BlockingDriver::BoundNextRead() {
  const int64_t now = now_;  // Read() follows the Now() of its step at once
  int64_t want = std::min(core_.deadline(), handler_->Idle(now)) - now;
  // The first request usually arrives with the connection, and the log
  // then wants a call within kQuietNs: starting with that bound saves a
  // setsockopt per short connection.
  if (rcv_timeout_ns_ == 0) want = std::min(want, LatencyLog::kQuietNs);
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

bool BlockingDriver::Read() {
  if (!BoundNextRead().ok()) {
    core_.OnError();  // cannot bound the wait: do not wait unbounded
    return true;
  }
  // Blocking: kWouldBlock is the end of the SO_RCVTIMEO wait.
  if (ReadStep(fd_, &core_, 0, stop_) == IoOutcome::kWouldBlock) timed_out_ = true;
  return true;
}

}  // namespace

uint64_t ServeConnection(int fd, RequestHandler* handler, const ConnectionLimits& limits,
                         const StopSignal* stop) {
  return BlockingDriver(fd, handler, limits).Run(stop);
}

}  // namespace kv
