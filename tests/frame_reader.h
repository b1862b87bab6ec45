// A blocking, bounded reader of one frame, for the tests' own clients
// (tests/server_process.cpp) and the hardening tests. The servers read
// through common/conn_io.h; this is the tests' simple counterpart.
#ifndef KV_TESTS_FRAME_READER_H_
#define KV_TESTS_FRAME_READER_H_

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "common/clock.h"
#include "common/net.h"
#include "common/protocol.h"

namespace kv {

enum class FrameRead {
  kFrame,       // kFrameSize bytes arrived
  kShortFrame,  // 1..kFrameSize-1 bytes, then the peer half-closed
  kClosed,      // the peer closed before sending a byte
  kTimeout,     // the deadline passed (*got bytes arrived so far)
  kError,       // reset or other socket error
  kStopped,     // `stop_fd` became readable (server shutdown) while waiting;
                // *got bytes of an unfinished frame are to be dropped
};

// Reads one frame into buf (kFrameSize bytes; *got receives the number of
// bytes read) with two bounds, as the servers bound idle and "slowloris"
// peers: the first byte must arrive before `idle_deadline_ns`
// (MonotonicNanos() time); once it has, the whole frame must be in within
// `frame_timeout_ns` of it,
// however the peer trickles the rest (a byte a second cannot keep a
// connection alive). kTimeout with *got == 0 means idle, *got > 0 stalled.
// With `stop_fd` >= 0 (an eventfd/pipe that becomes readable at shutdown),
// the read also ends with kStopped as soon as it has to wait while stop_fd is
// readable: only the peer's own half-close (kShortFrame) makes a short frame.
inline FrameRead ReadFrameBounded(int fd, char* buf, std::size_t* got, int64_t idle_deadline_ns,
                                  int64_t frame_timeout_ns, int stop_fd = -1) {
  *got = 0;
  int64_t deadline_ns = idle_deadline_ns;
  while (*got < kFrameSize) {
    // Try first: the request has usually arrived already, saving a poll().
    const ssize_t r = recv(fd, buf + *got, kFrameSize - *got, MSG_DONTWAIT);
    if (r > 0) {
      if (*got == 0) {
        // The frame has started: from now on only the frame bound counts,
        // so a legitimate client that spoke late still gets its full frame
        // time, and a trickling one cannot stretch it.
        deadline_ns = MonotonicNanos() + frame_timeout_ns;
      }
      *got += static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) return *got == 0 ? FrameRead::kClosed : FrameRead::kShortFrame;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return FrameRead::kError;
    const int ready = WaitReady(fd, POLLIN, deadline_ns, stop_fd);
    if (ready == 2) return FrameRead::kStopped;
    if (ready == 0) return FrameRead::kTimeout;
    if (ready < 0) return FrameRead::kError;
  }
  return FrameRead::kFrame;
}

}  // namespace kv

#endif  // KV_TESTS_FRAME_READER_H_
