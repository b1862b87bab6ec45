// RequestHandler: one request frame in, one reply frame out. No sockets.
//
// Parses the frame (protocol.h), performs the read or write on the Store,
// fills the reply (the slot's value, or "ERROR <reason>"), and records the
// lab's latency sample for valid requests. Rejected requests never touch the
// array and are not recorded, only counted. The whole path is a pure function
// of (frame, store state), which is what the fuzz targets and unit tests drive.
//
// Thread safety: Handle() may be called concurrently from any number of
// threads; it relies on the Store's and LatencyLog's own guarantees. With a
// LatencyLog it writes no shared memory besides the Store.
#ifndef KV_COMMON_REQUEST_HANDLER_H_
#define KV_COMMON_REQUEST_HANDLER_H_

#include <atomic>
#include <cstdint>
#include <string_view>

#include "common/latency_log.h"
#include "common/protocol.h"
#include "common/store.h"

namespace kv {

// Counters of a handler WITHOUT a LatencyLog (fuzzing, tests); relaxed
// atomics, read on demand. With a LatencyLog the counts live in its
// per-thread shards instead (LatencyTotals::requests/rejected), so the
// request path writes nothing shared; cut_by_shutdown is counted here always
// (it happens only at shutdown).
struct RequestCounters {
  std::atomic<uint64_t> frames{0};    // every frame answered
  std::atomic<uint64_t> rejected{0};  // frames answered with ERROR
  // Unfinished frames dropped because the server stopped (not requests:
  // neither applied nor answered).
  std::atomic<uint64_t> cut_by_shutdown{0};
};

class RequestHandler {
 public:
  // `log` may be null (no latency bookkeeping, e.g. in fuzzing).
  RequestHandler(Store* store, LatencyLog* log, RequestCounters* counters)
      : store_(store), log_(log), counters_(counters) {}

  // Handles one frame whose last byte arrived at `received_ns`
  // (MonotonicNanos()) and that waited `queue_ns` of that for a thread to
  // run it (0 when the receiving thread runs it). Always fills *reply with a
  // complete reply frame. Returns true for a valid request, false for a
  // rejected one. The lab's latency stays received -> reply ready, so it
  // includes queue_ns; queue_ns is also recorded on its own.
  bool Handle(std::string_view frame, int64_t received_ns, Frame* reply, int64_t queue_ns = 0);

  // With `on`, every rejected request is logged to stderr as
  // "<program>: rejected: <reason>" (the -v option).
  void set_log_rejects(bool on, std::string_view program) {
    log_rejects_ = on;
    program_ = program;
  }

  // Answers a frame that could not be read whole (e.g. the peer stalled):
  // counts it as rejected and fills *reply with "ERROR <message>".
  void Reject(std::string_view message, Frame* reply);

  // Called by a driver's thread before it waits (for bytes, for work), at
  // `now_ns` (MonotonicNanos()). The timing log hands the thread's samples
  // off once it has been quiet a while (LatencyLog::IdleThread). Returns the
  // time by which the thread should call again at the latest: its wait is
  // bounded by that (LatencyLog::kNever: wait as long as you like).
  int64_t Idle(int64_t now_ns) {
    return log_ != nullptr ? log_->IdleThread(now_ns) : LatencyLog::kNever;
  }

  // Hands this thread's timing shard off (see latency_log.h); a driver's
  // thread calls it before it ends.
  void FlushThread() {
    if (log_ != nullptr) log_->FlushThread();
  }

  // Counts an unfinished frame dropped at shutdown (see RequestCounters).
  void CountCutByShutdown() { counters_->cut_by_shutdown.fetch_add(1, std::memory_order_relaxed); }

 private:
  void LogReject(std::string_view message) const;
  void CountRejected();

  Store* store_;
  LatencyLog* log_;
  RequestCounters* counters_;
  bool log_rejects_ = false;
  std::string_view program_;
};

}  // namespace kv

#endif  // KV_COMMON_REQUEST_HANDLER_H_
