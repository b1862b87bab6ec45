#include "common/request_handler.h"

#include <cstdio>

#include "common/artificial_delay.h"
#include "common/clock.h"
#include "common/schedstat.h"

namespace kv {

bool RequestHandler::Handle(std::string_view frame, int64_t received_ns, Frame* reply,
                            int64_t queue_ns) {
  // CPU wait (schedstat run_delay) of a sampled request, see schedstat.h.
  SchedStat sched_before;
  const bool cpu_sampled =
      log_ != nullptr && SampleCpuWait(received_ns) && ReadThreadSchedStat(&sched_before);
  ArtificialDelay::TakeThreadSleptNanos();  // the delay slept from here on
  Request request;
  Status status = ParseRequest(frame, store_->size(), &request);
  AccessTiming timing;
  if (status.ok()) {
    status = request.is_read ? store_->Read(request.pos, reply, &timing)
                             : store_->Write(request.pos, request.text, reply, &timing);
  }
  if (!status.ok()) {
    CountRejected();
    FillErrorFrame(status.message(), reply);
    if (log_rejects_) LogReject(status.message());
    return false;
  }
  // The reply is ready to send: this is the end of the lab's interval.
  const int64_t done_ns = MonotonicNanos();
  if (log_ == nullptr) {
    counters_->frames.fetch_add(1, std::memory_order_relaxed);
  } else {
    RequestSample sample{request.pos,    request.is_read, done_ns - received_ns,
                         timing.wait_ns, timing.hold_ns,  queue_ns};
    sample.delay_ns = ArtificialDelay::TakeThreadSleptNanos();
    sample.received_ns = received_ns;
    sample.released_ns = timing.released_ns;
    SchedStat sched_after;
    if (cpu_sampled && ReadThreadSchedStat(&sched_after)) {
      sample.cpu_wait_ns = sched_after.run_delay_ns - sched_before.run_delay_ns;
    }
    log_->Record(sample);
  }
  return true;
}

void RequestHandler::CountRejected() {
  if (log_ != nullptr) {
    log_->CountRejected();  // this thread's shard: no shared write
  } else {
    counters_->frames.fetch_add(1, std::memory_order_relaxed);
    counters_->rejected.fetch_add(1, std::memory_order_relaxed);
  }
}

void RequestHandler::Reject(std::string_view message, Frame* reply) {
  CountRejected();
  FillErrorFrame(message, reply);
  if (log_rejects_) LogReject(message);
}

void RequestHandler::LogReject(std::string_view message) const {
  // One write per line so lines from many threads do not interleave.
  std::fprintf(stderr, "%.*s: rejected: %.*s\n", static_cast<int>(program_.size()), program_.data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace kv
