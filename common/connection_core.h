// ConnectionCore: the policy of one client connection, with no I/O at all.
//
// Sans-I/O (after python-hyper/h11 and httpaf): the core
// is fed the bytes that arrived, the peer's half-close, the server's stop and
// the current time, and answers with the next thing its driver must do.
// Framing, the idle/frame/write deadlines, the half-close and the shutdown
// rules live here once; a thread-per-connection loop, a worker pool and an
// epoll loop are each a short driver of it, so all behave alike by
// construction. Time is always an argument, never read here.
//
// The rules:
//  - A request is a 100-byte frame. Frames may be pipelined; up to kBatch
//    frames are taken per read and their replies leave in one write.
//  - A frame cut short by the peer's half-close (EOF) is still a frame: it is
//    handled, answered, and the connection then closes.
//  - Idle: no byte of a new frame within idle_timeout_ns of the connection
//    start or of the last reply leaving: closed silently.
//  - Stalled: a frame not whole within frame_timeout_ns of its first byte:
//    answered "ERROR incomplete frame: K of 100 bytes within T ms of its
//    first byte; closing" (kReject) and closed (framing is lost).
//  - Write: replies not taken by the peer within write_timeout_ns of being
//    ready: closed.
//  - close_after_reply: the first frame is answered and the connection
//    closed by the server (anything pipelined behind it is not read).
//  - Stop (server shutdown): frames already whole are answered; an unfinished
//    frame is dropped (not applied, not answered; cut_by_shutdown() says so),
//    then closed.
//
// Driver loop:
//   for (;;) switch (Next(now)) {
//     kHandle: fill *reply_slot() for frame() (received at frame_received_ns()),
//              then FrameDone();
//     kReject: fill *reply_slot() with "ERROR " + reject_message(), FrameDone();
//     kWrite:  send out_data()/out_size(); OnWritten(n, now); if the socket is
//              full, wait for it until deadline() (then call Next again);
//     kRead:   recv into in_space()/in_space_size(); OnBytes(n, now) or
//              OnEof(now); if nothing is there, wait until deadline();
//     kClose:  close the fd.
//   }
//   OnStop(now) at any time the server stops; OnError() on a reset.
//
// Thread safety: none; one core per connection, used by one thread at a time.
// No allocation after construction.
#ifndef KV_COMMON_CONNECTION_CORE_H_
#define KV_COMMON_CONNECTION_CORE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/protocol.h"

namespace kv {

struct ConnectionLimits {
  int64_t idle_timeout_ns = 5'000'000'000;   // no byte of a new frame by then
  int64_t frame_timeout_ns = 1'000'000'000;  // frame not whole by then (from
                                             // its first byte)
  int64_t write_timeout_ns = 5'000'000'000;  // reply not taken by then
  // The kit's own servers' way: one request per connection, closed by the
  // server once its reply has left (--close-after-reply).
  bool close_after_reply = false;
};

class ConnectionCore {
 public:
  // Frames taken per read and replies sent per write (pipelined clients).
  static constexpr std::size_t kBatch = 16;

  enum class Action { kHandle, kReject, kWrite, kRead, kClose };

  ConnectionCore(const ConnectionLimits& limits, int64_t now_ns);

  // What the driver does next, given the time now. Idempotent until the
  // driver acts on the answer (FrameDone, OnWritten, OnBytes, ...). Deadlines that have
  // passed are acted on here (idle: kClose; stalled frame: kReject; write:
  // kClose).
  Action Next(int64_t now_ns);

  // With kRead / kWrite: when to give up waiting (then call Next again).
  int64_t deadline() const { return deadline_ns_; }

  // kHandle: the frame to handle (kFrameSize bytes, fewer at a half-close).
  std::string_view frame() const;
  int64_t frame_received_ns() const { return received_ns_; }
  // kHandle / kReject: where the reply goes; then FrameDone().
  Frame* reply_slot() { return &out_[out_count_]; }
  // kReject: the reason, without the "ERROR " prefix.
  std::string_view reject_message() const { return reject_; }
  void FrameDone();

  // kWrite: the bytes to send.
  const char* out_data() const { return out_[0].data() + out_sent_; }
  std::size_t out_size() const { return out_count_ * kFrameSize - out_sent_; }
  void OnWritten(std::size_t n, int64_t now_ns);

  // kRead: where to read to.
  char* in_space() { return in_.data() + in_end_; }
  std::size_t in_space_size() const { return in_.size() - in_end_; }
  void OnBytes(std::size_t n, int64_t now_ns);
  void OnEof(int64_t now_ns);

  void OnStop(int64_t now_ns);
  void OnError() { closed_ = true; }

  // The time given to the last OnBytes, OnWritten, OnEof or OnStop: a
  // driver that has just reported an I/O step may take it for "now" instead
  // of reading the clock again.
  int64_t event_ns() const { return event_ns_; }

  // True once a stop dropped an unfinished frame.
  bool cut_by_shutdown() const { return cut_by_shutdown_; }
  // Frames answered so far (kHandle and kReject).
  uint64_t answered() const { return answered_; }
  bool stopping() const { return stopping_; }

 private:
  std::size_t Buffered() const { return in_end_ - in_begin_; }
  // The steps of Next(): a whole frame to hand out (sets current_len_); the
  // replies to write (or the write deadline passed); the wait for bytes
  // (or the idle or frame deadline passed).
  bool NextFrame();
  Action NextWrite(int64_t now_ns);
  Action NextRead(int64_t now_ns);

  const ConnectionLimits limits_;
  std::array<char, kBatch * kFrameSize> in_;
  std::size_t in_begin_ = 0, in_end_ = 0;
  std::array<Frame, kBatch> out_;
  std::size_t out_count_ = 0, out_sent_ = 0;

  int64_t idle_since_ns_;           // start of the wait for a new frame
  int64_t frame_start_ns_ = 0;      // first byte of the unfinished frame
  int64_t received_ns_ = 0;         // the read that completed the current frames
  int64_t write_deadline_ns_ = -1;  // -1: nothing waiting to be written
  int64_t deadline_ns_ = 0;
  int64_t event_ns_ = 0;  // see event_ns()

  std::size_t current_len_ = 0;  // length of the frame handed out
  bool eof_ = false;
  bool stopping_ = false;
  bool closed_ = false;
  bool close_after_flush_ = false;
  bool reject_pending_ = false;
  bool cut_by_shutdown_ = false;
  uint64_t answered_ = 0;
  char reject_buf_[128] = {};
  std::string_view reject_;
};

}  // namespace kv

#endif  // KV_COMMON_CONNECTION_CORE_H_
