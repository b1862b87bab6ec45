// LatencyLog: the lab's "memory access latency" bookkeeping.
//
// For every request that reached the array the server records its latency
// (from the end of receiving the request to the start of sending the reply:
// parsing, lock wait, array access; socket time excluded) split into lock wait
// and lock hold. Exactly as the kit does, after every `batch_size` (default
// 1000) recorded requests it appends the batch mean in SECONDS, printed with
// C's "%e" and a newline, to the timing file (default
// ./server_output_time_aggregated). Rejected requests are never recorded.
//
// The timing file, whole lines or nothing:
//  - It is reopened (O_WRONLY|O_APPEND|O_CREAT|O_NONBLOCK) for every line,
//    like the kit, so renaming it between runs (the kit's test.sh does)
//    starts a new file.
//  - Each line goes out in ONE write(2) on that O_APPEND descriptor; the
//    write and the close are checked. A short write (a full disk) is cut back
//    off with ftruncate, so no partial line is ever left behind.
//  - A line that cannot be written whole is lost: counted (Totals()
//    .lines_lost, the summary's timing_lines_lost=) and warned about on stderr
//    at most once a second (never with warnings off).
//  - Opening never blocks: a FIFO, device or directory is refused (at Open()
//    with an error; later, when someone swapped the file, the line is lost).
//
// Optionally a trace CSV gets one row per request:
//   pos,is_read,latency_ns,wait_ns,hold_ns,queue_ns,delay_ns,cpu_wait_ns,recv_ns,
//   unlock_ns,thread
// (at most `trace_limit` rows when that is non-zero; cpu_wait_ns is empty for
// a request whose CPU wait was not sampled, see schedstat.h). recv_ns is when
// the request had been received and unlock_ns when its lock was released, both
// from the log's creation (the server's start; empty when not known), and
// thread numbers the serving threads 1, 2, ... in the order they first
// recorded: with them, who held which lock when can be drawn (the report's
// timeline, a trace viewer's tracks).
//
// What the lab metric (latency_ns) is made of: queue_ns (waiting inside the
// server for a thread, 0 when a connection has its own), wait_ns (lock wait),
// hold_ns (lock hold, which contains delay_ns, the artificial delay actually
// slept), plus parsing and copying. cpu_wait_ns (schedstat run_delay) cuts
// across them: the part of the interval the serving thread was runnable but
// had no CPU.
//
// Hot path with no shared writes. Record() and
// CountRejected() touch only the calling thread's shard (a thread_local
// buffer of up to kShardSamples samples plus a rejected count): no lock, no
// shared counter, no allocation. The shard is handed off to the shared state
// (log_mu_: the batch, the totals, the trace, the timing file) in one go:
//  - when it is full (every kShardSamples requests of a busy thread);
//  - when the shard would complete the current batch (it reads, never
//    writes, the shared count pending in the batch), so the line for the
//    1000th request goes out at once;
//  - by IdleThread(), which every driver's thread calls before it waits
//    (for bytes, for work), once the thread has recorded nothing for
//    kQuietNs; it says when to call again, and the driver bounds its wait
//    by that. Not at every wait: a keep-alive client's next request comes
//    within microseconds, and a hand-off per request would bring the
//    shared lock back. The log alone decides; drivers know no quiet rule;
//  - by FlushThread(), which a driver's thread calls before it ends.
// So the timing file still gets exactly one %e line per `batch_size` valid
// requests, each line the mean of exactly batch_size of them; the requests
// enter the batches in the order the shards are handed off, i.e. in order of
// completion up to one shard of one thread (a request still in a busy
// thread's shard can fall into the next line). The lock is taken at most once
// per kShardSamples requests of a thread, or once per idle transition.
//
// Thread safety: Record(), CountRejected(), FlushThread(), IdleThread() and
// Totals() may be called from any thread. Totals() counts only handed-off
// shards: call it after the threads that recorded have flushed (drivers'
// threads do before they end). A thread records into one LatencyLog at a
// time; switching to another flushes its shard to the first (which must
// still exist).
#ifndef KV_COMMON_LATENCY_LOG_H_
#define KV_COMMON_LATENCY_LOG_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "common/unique_fd.h"
#include "common/unique_file.h"

namespace kv {

class RateLimitedLog;

struct RequestSample {
  uint64_t pos = 0;
  bool is_read = true;
  int64_t latency_ns = 0;
  int64_t wait_ns = 0;
  int64_t hold_ns = 0;
  int64_t queue_ns = 0;      // waiting for a worker (pool/epoll), inside latency
  int64_t delay_ns = 0;      // artificial delay actually slept
  int64_t cpu_wait_ns = -1;  // schedstat run_delay; -1: not sampled
  int64_t received_ns = 0;   // MonotonicNanos() when the request had been received
  int64_t released_ns = 0;   // MonotonicNanos() when its lock was released; 0: not known
  uint32_t thread = 0;       // the serving thread, set by Record()
};

struct LatencyTotals {
  uint64_t requests = 0;  // recorded (valid) requests
  uint64_t rejected = 0;  // CountRejected() calls
  double mean_latency_s = 0;
  double mean_wait_s = 0;
  double mean_hold_s = 0;
  double mean_queue_s = 0;
  double mean_delay_s = 0;     // delay slept per request
  double mean_cpu_wait_s = 0;  // over the sampled requests
  uint64_t cpu_wait_samples = 0;
  uint64_t batches_written = 0;
  uint64_t lines_lost = 0;  // batch lines that could not be written whole
};

struct LatencyLogOptions {
  std::string time_file = "server_output_time_aggregated";
  uint64_t batch_size = 1000;
  std::string trace_file;          // empty: no trace
  uint64_t trace_limit = 0;        // 0: no limit
  std::string program = "server";  // prefix of warnings
  bool warnings = true;            // false: lost lines are only counted
};

class LatencyLog {
 public:
  explicit LatencyLog(LatencyLogOptions options);
  ~LatencyLog();
  LatencyLog(const LatencyLog&) = delete;
  LatencyLog& operator=(const LatencyLog&) = delete;

  // Checks, without ever blocking, that the timing file is (or can be
  // created as) a regular file open for appending, and opens the trace
  // likewise. Returns OK, or InvalidArgument/IOError with one line naming the
  // option and the path, e.g. "--time-file 'f': is a FIFO, not a regular file".
  Status Open() EXCLUDES(log_mu_);

  static constexpr uint32_t kShardSamples = 64;

  // Records one served request in this thread's shard; may hand the shard
  // off (and so append a line to the timing file).
  void Record(const RequestSample& sample) EXCLUDES(log_mu_);

  // Counts one rejected frame (never timed) in this thread's shard.
  void CountRejected() EXCLUDES(log_mu_);

  // Hands this thread's shard off to the shared totals and the timing file.
  void FlushThread() EXCLUDES(log_mu_);

  // How long a thread keeps requests in its shard once it has gone quiet:
  // the timing file is never late by more than this (plus a driver's
  // wake-up).
  static constexpr int64_t kQuietNs = 10'000'000;
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  // Called by a thread about to wait, at `now_ns` (MonotonicNanos()): hands
  // its shard off if it has recorded nothing since a call kQuietNs or more
  // ago. Returns the time by which it wants to be called again (the thread
  // bounds its wait by it), or kNever when the shard holds nothing of this
  // log's. Takes the shared lock only when it hands off.
  int64_t IdleThread(int64_t now_ns) EXCLUDES(log_mu_);

  // FlushThread(), then flushes the trace.
  void Flush() EXCLUDES(log_mu_);

  LatencyTotals Totals() const EXCLUDES(log_mu_);

 private:
  struct Shard;
  void AppendBatchMeanLocked(double mean_s) REQUIRES(log_mu_);
  void AddSampleLocked(const RequestSample& s) REQUIRES(log_mu_);
  void TraceSampleLocked(const RequestSample& s) REQUIRES(log_mu_);
  void HandOff(Shard* shard) EXCLUDES(log_mu_);
  static Shard& ThisThreadShard();
  Shard& AdoptShard() EXCLUDES(log_mu_);  // this thread's shard, now recording into *this

  const LatencyLogOptions options_;
  const int64_t start_ns_;                      // the trace's time origin
  const std::unique_ptr<RateLimitedLog> warn_;  // used under log_mu_ only
  std::atomic<uint32_t> threads_{0};            // serving threads numbered so far
  mutable Mutex log_mu_;
  double batch_sum_ns_ GUARDED_BY(log_mu_) = 0;
  uint64_t batch_count_ GUARDED_BY(log_mu_) = 0;
  LatencyTotals totals_ GUARDED_BY(log_mu_);
  double sum_latency_ns_ GUARDED_BY(log_mu_) = 0;
  double sum_wait_ns_ GUARDED_BY(log_mu_) = 0;
  double sum_hold_ns_ GUARDED_BY(log_mu_) = 0;
  double sum_queue_ns_ GUARDED_BY(log_mu_) = 0;
  double sum_delay_ns_ GUARDED_BY(log_mu_) = 0;
  double sum_cpu_wait_ns_ GUARDED_BY(log_mu_) = 0;
  UniqueFile trace_ GUARDED_BY(log_mu_);
  uint64_t trace_rows_ GUARDED_BY(log_mu_) = 0;
  // Valid requests in the batch being filled: written under log_mu_ at a
  // hand-off, read without the lock by Record() (see above).
  std::atomic<uint64_t> pending_{0};
};

// Appends `line` (which ends in '\n') to `path` whole or not at all: opens it
// O_WRONLY|O_APPEND|O_CREAT|O_NONBLOCK, refuses a non-regular file, writes
// with one write(2), cuts a short write back off, checks the close. Returns OK,
// else the reason ("write: No space left on device").
Status AppendWholeLine(const std::string& path, std::string_view line);

// Opens `path` for writing without blocking and checks it is a regular file.
// Returns OK with *out owning the fd (blocking mode, close-on-exec), or
// InvalidArgument("is a FIFO, not a regular file") / IOError("open: <strerror>").
Status OpenRegularFile(const std::string& path, int extra_flags, UniqueFd* out);

}  // namespace kv

#endif  // KV_COMMON_LATENCY_LOG_H_
