// LatencyLog: the lab's "memory access latency" bookkeeping.
//
// For every request that reached the array the server records its latency
// (from the end of receiving the request to the start of sending the reply:
// parsing, lock wait, array access; socket time excluded) split into lock wait
// and lock hold. Exactly as the kit does, after every `batch_size` (default
// 1000) recorded requests it appends the batch mean in SECONDS, printed with
// C's "%e" and a newline, to the timing file (default
// ./server_output_time_aggregated). The file is reopened in append mode for
// every line, like the kit, so renaming it between runs (the kit's test.sh
// does) starts a new file. Rejected requests are never recorded.
//
// Optionally a trace CSV gets one row per request:
//   pos,is_read,latency_ns,wait_ns,hold_ns,queue_ns,delay_ns,cpu_wait_ns
// (at most `trace_limit` rows when that is non-zero; cpu_wait_ns is empty for
// a request whose CPU wait was not sampled, see schedstat.h).
//
// What the lab metric (latency_ns) is made of: queue_ns (waiting inside the
// server for a thread, 0 when a connection has its own), wait_ns (lock wait),
// hold_ns (lock hold, which contains delay_ns, the artificial delay actually
// slept), plus parsing and copying. cpu_wait_ns (schedstat run_delay) cuts
// across them: the part of the interval the serving thread was runnable but
// had no CPU.
//
// Thread safety: Record() and Totals() may be called from any thread; one
// internal mutex (log_mu_) guards the batch, the totals and the trace. It is
// taken after the reply is ready, never inside the measured interval.
#ifndef KV_COMMON_LATENCY_LOG_H_
#define KV_COMMON_LATENCY_LOG_H_

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace kv {

struct RequestSample {
  uint64_t pos = 0;
  bool is_read = true;
  int64_t latency_ns = 0;
  int64_t wait_ns = 0;
  int64_t hold_ns = 0;
  int64_t queue_ns = 0;      // inside the server before a thread took it
  int64_t delay_ns = 0;      // artificial delay actually slept
  int64_t cpu_wait_ns = -1;  // schedstat run_delay; -1: not sampled
};

struct LatencyTotals {
  uint64_t requests = 0;  // recorded (valid) requests
  double mean_latency_s = 0;
  double mean_wait_s = 0;
  double mean_hold_s = 0;
  double mean_queue_s = 0;
  double mean_delay_s = 0;     // delay slept per request
  double mean_cpu_wait_s = 0;  // over the sampled requests
  uint64_t cpu_wait_samples = 0;
  uint64_t batches_written = 0;
};

struct LatencyLogOptions {
  std::string time_file = "server_output_time_aggregated";
  uint64_t batch_size = 1000;
  std::string trace_file;    // empty: no trace
  uint64_t trace_limit = 0;  // 0: no limit
};

class LatencyLog {
 public:
  explicit LatencyLog(LatencyLogOptions options);
  ~LatencyLog();
  LatencyLog(const LatencyLog&) = delete;
  LatencyLog& operator=(const LatencyLog&) = delete;

  // Checks that the timing file can be appended to and opens the trace.
  // Returns false and fills *error ("open FILE: reason") on failure.
  bool Open(std::string* error);

  // Records one served request; may append a line to the timing file.
  void Record(const RequestSample& sample);

  // Flushes the trace (the timing file is flushed line by line).
  void Flush();

  LatencyTotals Totals() const;

 private:
  void AppendBatchMeanLocked(double mean_s);

  const LatencyLogOptions options_;
  mutable std::mutex log_mu_;
  // Guarded by log_mu_:
  double batch_sum_ns_ = 0;
  uint64_t batch_count_ = 0;
  LatencyTotals totals_;
  double sum_latency_ns_ = 0, sum_wait_ns_ = 0, sum_hold_ns_ = 0;
  double sum_queue_ns_ = 0, sum_delay_ns_ = 0, sum_cpu_wait_ns_ = 0;
  std::FILE* trace_ = nullptr;
  uint64_t trace_rows_ = 0;
};

}  // namespace kv

#endif  // KV_COMMON_LATENCY_LOG_H_
