#include "client/exchange.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

namespace kv {

const char* ErrorKindName(ErrorKind kind) {
  // Indexed by ErrorKind.
  static constexpr const char* kNames[kNumErrorKinds] = {
      "none", "connect", "reset", "timeout", "error_reply", "short_reply", "other", "long_reply"};
  const auto i = static_cast<int>(kind);
  return i >= 0 && i < kNumErrorKinds ? kNames[i] : "other";
}

ErrorKind ClassifyIoError(int err) {
  switch (err) {
    // EAGAIN reaches the exchange only from a blocking socket whose
    // SO_SNDTIMEO/SO_RCVTIMEO ran out: a timeout, not a failure of the peer.
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case ETIMEDOUT:
      return ErrorKind::kTimeout;
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
      return ErrorKind::kReset;
    default:
      return ErrorKind::kOther;
  }
}

ErrorKind ClassifyConnectError(int err) {
  switch (err) {
    case EINPROGRESS:  // connect() bounded by SO_SNDTIMEO ran out
    case ETIMEDOUT:
      return ErrorKind::kTimeout;
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
      return ErrorKind::kOther;
    default:
      return ErrorKind::kConnect;
  }
}

Exchange::Exchange(const Frame& request, int64_t deadline_ns)
    : request_(request), sent_(0), deadline_ns_(deadline_ns), done_(false) {}

std::span<const char> Exchange::ToSend() const {
  if (done_) return {};
  return {request_.data() + sent_, kFrameSize - sent_};
}

void Exchange::Sent(std::size_t n) { sent_ = std::min(kFrameSize, sent_ + n); }

void Exchange::Received(std::span<const char> bytes) {
  if (bytes.empty()) return;
  if (done_) {
    // Bytes after a whole reply: that reply was longer than a frame.
    if (keeps_connection()) outcome_ = ErrorKind::kLongReply;
    return;
  }
  const std::size_t take = std::min(bytes.size(), kFrameSize - received_);
  std::memcpy(reply_.data() + received_, bytes.data(), take);
  received_ += take;
  if (received_ < kFrameSize) return;
  if (bytes.size() > take) {
    Finish(ErrorKind::kLongReply);
  } else if (IsErrorReply(FrameText(std::string_view(reply_.data(), kFrameSize)))) {
    Finish(ErrorKind::kErrorReply);
  } else {
    Finish(ErrorKind::kNone);
  }
}

void Exchange::PeerClosed() {
  if (!done_) Finish(ErrorKind::kShortReply);
}

void Exchange::IoError(int err) {
  // A reset after a whole reply took nothing from it.
  if (!done_) Finish(ClassifyIoError(err));
}

void Exchange::Tick(int64_t now_ns) {
  if (!done_ && now_ns >= deadline_ns_) Finish(ErrorKind::kTimeout);
}

void Exchange::Finish(ErrorKind kind) {
  outcome_ = kind;
  done_ = true;
}

std::string Exchange::Describe() const {
  if (outcome_ == ErrorKind::kNone) return {};
  std::string detail = std::string(ErrorKindName(outcome_)) + " on request '" +
                       Sanitize(FrameText(std::string_view(request_.data(), kFrameSize)), 48) + "'";
  if (outcome_ == ErrorKind::kErrorReply) {
    detail += ": '" + Sanitize(FrameText(std::string_view(reply_.data(), kFrameSize)), 64) + "'";
  }
  if (outcome_ == ErrorKind::kLongReply) {
    detail += ": ";
    detail += kLongReplyMeaning;
  }
  return detail;
}

}  // namespace kv
