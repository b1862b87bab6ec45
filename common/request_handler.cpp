#include "common/request_handler.h"

#include "common/clock.h"

namespace kv {

bool RequestHandler::Handle(std::string_view frame, int64_t received_ns,
                            Frame* reply) {
  counters_->frames.fetch_add(1, std::memory_order_relaxed);
  Request request;
  Status status = ParseRequest(frame, store_->size(), &request);
  AccessTiming timing;
  if (status.ok()) {
    status = request.is_read
                 ? store_->Read(request.pos, reply, &timing)
                 : store_->Write(request.pos, request.text, reply, &timing);
  }
  if (!status.ok()) {
    counters_->rejected.fetch_add(1, std::memory_order_relaxed);
    FillErrorFrame(status.message(), reply);
    return false;
  }
  // The reply is ready to send: this is the end of the lab's interval.
  const int64_t done_ns = MonotonicNanos();
  if (log_ != nullptr) {
    log_->Record({request.pos, request.is_read, done_ns - received_ns,
                  timing.wait_ns, timing.hold_ns});
  }
  return true;
}

void RequestHandler::Reject(std::string_view message, Frame* reply) {
  counters_->frames.fetch_add(1, std::memory_order_relaxed);
  counters_->rejected.fetch_add(1, std::memory_order_relaxed);
  FillErrorFrame(message, reply);
}

}  // namespace kv
