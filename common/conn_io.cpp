#include "common/conn_io.h"

#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>

#include "common/clock.h"

namespace kv {

IoOutcome ReadStep(int fd, ConnectionCore* core, int recv_flags, const StopSignal* stop,
                   bool* emptied) {
  const std::size_t space = core->in_space_size();
  const ssize_t r = recv(fd, core->in_space(), space, recv_flags);
  if (r > 0 && emptied != nullptr) *emptied = static_cast<std::size_t>(r) < space;
  return ReportRead(core, r, r < 0 ? errno : 0, stop);
}

IoOutcome ReportRead(ConnectionCore* core, int64_t r, int err, const StopSignal* stop) {
  if (r > 0) {
    // The time after the read: a frame completed here was received now.
    core->OnBytes(static_cast<std::size_t>(r), MonotonicNanos());
    return IoOutcome::kProgress;
  }
  if (r == 0) {
    // A stopper may shut our read side down to wake us (conn_io.h): that
    // end of input is the stop, not the client's half-close.
    if (stop != nullptr && stop->requested()) {
      core->OnStop(MonotonicNanos());
    } else {
      core->OnEof(MonotonicNanos());
    }
    return IoOutcome::kPeerClosed;
  }
  if (err == EINTR) return IoOutcome::kProgress;
  if (err == EAGAIN || err == EWOULDBLOCK) return IoOutcome::kWouldBlock;
  core->OnError();  // reset
  return IoOutcome::kError;
}

IoOutcome WriteStep(int fd, ConnectionCore* core) {
  // Non-blocking: a 100-byte reply nearly always fits the socket buffer, so
  // this is one send; the driver waits for a full buffer within the write
  // deadline.
  const ssize_t r = send(fd, core->out_data(), core->out_size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return ReportWrite(core, r, r < 0 ? errno : 0);
}

IoOutcome ReportWrite(ConnectionCore* core, int64_t r, int err) {
  if (r > 0) {
    core->OnWritten(static_cast<std::size_t>(r), MonotonicNanos());
    return IoOutcome::kProgress;
  }
  if (r < 0 && err == EINTR) return IoOutcome::kProgress;
  if (r < 0 && (err == EAGAIN || err == EWOULDBLOCK)) return IoOutcome::kWouldBlock;
  core->OnError();  // the client left without its replies
  return IoOutcome::kError;
}

void AnswerFrame(ConnectionCore* core, ConnectionCore::Action action, RequestHandler* handler,
                 int64_t queue_ns) {
  if (action == ConnectionCore::Action::kHandle) {
    handler->Handle(core->frame(), core->frame_received_ns(), core->reply_slot(), queue_ns);
  } else {
    handler->Reject(core->reject_message(), core->reply_slot());
  }
  core->FrameDone();
}

}  // namespace kv
