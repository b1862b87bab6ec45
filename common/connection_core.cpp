#include "common/connection_core.h"

#include <cstdio>
#include <cstring>

namespace kv {

// in_ is a receive buffer: only the bytes between in_begin_ and in_end_ are read.
// cppcheck-suppress uninitMemberVar
ConnectionCore::ConnectionCore(const ConnectionLimits& limits, int64_t now_ns)
    : limits_(limits), idle_since_ns_(now_ns) {}

ConnectionCore::Action ConnectionCore::Next(int64_t now_ns) {
  if (closed_) return Action::kClose;
  // Next() is idempotent until the driver acts: a handed-out frame or reject
  // stays handed out until FrameDone() (a loop may hand it to a worker that
  // asks again).
  if (reject_pending_) return Action::kReject;
  // 1. Frames already whole are handled while there is room for replies;
  //    also at a stop: they were received before it.
  if (NextFrame()) return Action::kHandle;
  // 2. Replies leave before anything more is read.
  if (out_count_ > 0) return NextWrite(now_ns);
  // 3. Nothing more will come, or nothing more is wanted.
  if (close_after_flush_ || eof_) {
    closed_ = true;
    return Action::kClose;
  }
  if (stopping_) {
    // Cut off by the shutdown, not by the peer: not a frame.
    cut_by_shutdown_ = Buffered() > 0;
    closed_ = true;
    return Action::kClose;
  }
  // 4. Wait for bytes, within the idle or the frame deadline.
  return NextRead(now_ns);
}

bool ConnectionCore::NextFrame() {
  if (close_after_flush_ || out_count_ >= kBatch) return false;
  if (Buffered() >= kFrameSize) {
    current_len_ = kFrameSize;
    return true;
  }
  // Only the peer's own half-close makes a short frame.
  if (eof_ && Buffered() > 0) {
    current_len_ = Buffered();
    return true;
  }
  return false;
}

ConnectionCore::Action ConnectionCore::NextWrite(int64_t now_ns) {
  if (write_deadline_ns_ < 0) {
    write_deadline_ns_ = now_ns + limits_.write_timeout_ns;
  }
  if (now_ns >= write_deadline_ns_) {  // the peer does not take its reply
    closed_ = true;
    return Action::kClose;
  }
  deadline_ns_ = write_deadline_ns_;
  return Action::kWrite;
}

ConnectionCore::Action ConnectionCore::NextRead(int64_t now_ns) {
  if (Buffered() > 0) {
    const int64_t deadline = frame_start_ns_ + limits_.frame_timeout_ns;
    if (now_ns >= deadline) {
      // Part of a frame, then too slow: we cannot tell where the next frame
      // would start, so answer once and hang up.
      const int len = std::snprintf(
          reject_buf_, sizeof reject_buf_,
          "incomplete frame: %zu of %zu bytes within %lld ms of its first "
          "byte; closing",
          Buffered(), kFrameSize, static_cast<long long>(limits_.frame_timeout_ns / 1'000'000));
      reject_ = std::string_view(reject_buf_, static_cast<std::size_t>(len));
      close_after_flush_ = true;
      reject_pending_ = true;
      current_len_ = 0;
      return Action::kReject;
    }
    deadline_ns_ = deadline;
  } else {
    const int64_t deadline = idle_since_ns_ + limits_.idle_timeout_ns;
    if (now_ns >= deadline) {  // idle: dropped silently
      closed_ = true;
      return Action::kClose;
    }
    deadline_ns_ = deadline;
  }
  if (in_begin_ > 0) {  // at most one partial frame (< 100 bytes) to move
    std::memmove(in_.data(), in_.data() + in_begin_, Buffered());
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  return Action::kRead;
}

std::string_view ConnectionCore::frame() const {
  return std::string_view(in_.data() + in_begin_, current_len_);
}

void ConnectionCore::FrameDone() {
  in_begin_ += current_len_;
  current_len_ = 0;
  reject_pending_ = false;
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  ++out_count_;
  ++answered_;
  if (limits_.close_after_reply) close_after_flush_ = true;
}

void ConnectionCore::OnWritten(std::size_t n, int64_t now_ns) {
  event_ns_ = now_ns;
  out_sent_ += n;
  if (out_sent_ >= out_count_ * kFrameSize) {
    out_count_ = 0;
    out_sent_ = 0;
    write_deadline_ns_ = -1;
    idle_since_ns_ = now_ns;  // the wait for the next frame starts now
  }
}

void ConnectionCore::OnBytes(std::size_t n, int64_t now_ns) {
  event_ns_ = now_ns;
  const std::size_t before = Buffered();
  in_end_ += n;
  received_ns_ = now_ns;
  // The unfinished frame left after this read started in it if the buffer
  // was empty, or if this read completed the frame that was pending.
  if (before == 0 || before + n >= kFrameSize) frame_start_ns_ = now_ns;
}

void ConnectionCore::OnEof(int64_t now_ns) {
  event_ns_ = now_ns;
  eof_ = true;
}

void ConnectionCore::OnStop(int64_t now_ns) {
  event_ns_ = now_ns;
  stopping_ = true;
}

}  // namespace kv
