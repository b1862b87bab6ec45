#include "common/connection.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <string>
#include <string_view>

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

uint64_t ServeConnection(int fd, RequestHandler* handler,
                         const ConnectionLimits& limits,
                         const StopSignal* stop) {
  char request[kFrameSize];
  Frame reply;
  uint64_t answered = 0;
  for (;;) {
    if (stop != nullptr && stop->requested()) break;  // between frames
    std::size_t got = 0;
    const FrameRead r =
        ReadFrameBounded(fd, request, &got,
                         MonotonicNanos() + limits.idle_timeout_ns,
                         limits.frame_timeout_ns,
                         stop != nullptr ? stop->fd() : -1);
    if (r == FrameRead::kClosed || r == FrameRead::kError) break;
    if (r == FrameRead::kStopped) {
      // Cut off by shutdown, not by the peer: the bytes so far are not a
      // frame. Dropped whole: not applied, not counted, not answered.
      if (got > 0) handler->CountCutByShutdown();
      break;
    }
    if (r == FrameRead::kTimeout) {
      if (got > 0) {
        // Part of a frame, then too slow: we cannot tell where the next frame
        // would start, so answer once and hang up.
        handler->Reject("incomplete frame: " + std::to_string(got) + " of " +
                            std::to_string(kFrameSize) + " bytes within " +
                            std::to_string(limits.frame_timeout_ns / 1'000'000) +
                            " ms of its first byte; closing",
                        &reply);
        WriteFrame(fd, reply, MonotonicNanos() + limits.write_timeout_ns);
        ++answered;
      }
      break;
    }
    handler->Handle(std::string_view(request, got), MonotonicNanos(), &reply);
    if (!WriteFrame(fd, reply, MonotonicNanos() + limits.write_timeout_ns)) {
      break;  // the client left without its reply; nothing is lost
    }
    ++answered;
    if (r == FrameRead::kShortFrame) break;  // the peer has half-closed
  }
  return answered;
}

}  // namespace kv
