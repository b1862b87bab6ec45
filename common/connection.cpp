#include "common/connection.h"

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/net.h"

namespace kv {

uint64_t ServeConnection(int fd, RequestHandler* handler,
                         const ConnectionLimits& limits) {
  char request[kFrameSize];
  Frame reply;
  uint64_t answered = 0;
  for (;;) {
    std::size_t got = 0;
    const FrameRead r =
        ReadFrameBounded(fd, request, &got,
                         MonotonicNanos() + limits.idle_timeout_ns,
                         limits.frame_timeout_ns);
    if (r == FrameRead::kClosed || r == FrameRead::kError) break;
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
