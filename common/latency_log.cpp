#include "common/latency_log.h"

#include <cerrno>
#include <cstring>
#include <utility>

namespace kv {

LatencyLog::LatencyLog(LatencyLogOptions options)
    : options_(std::move(options)) {}

LatencyLog::~LatencyLog() {
  if (trace_ != nullptr) std::fclose(trace_);
}

bool LatencyLog::Open(std::string* error) {
  // Fail at start-up, not after the first 1000 requests, if the timing file
  // cannot be written. Opening in append mode creates nothing new if it exists.
  std::FILE* probe = std::fopen(options_.time_file.c_str(), "a");
  if (probe == nullptr) {
    *error = "open " + options_.time_file + ": " + std::strerror(errno);
    return false;
  }
  std::fclose(probe);
  if (!options_.trace_file.empty()) {
    trace_ = std::fopen(options_.trace_file.c_str(), "w");
    if (trace_ == nullptr) {
      *error = "open " + options_.trace_file + ": " + std::strerror(errno);
      return false;
    }
    std::fputs(
        "pos,is_read,latency_ns,wait_ns,hold_ns,queue_ns,delay_ns,cpu_wait_ns\n",
        trace_);
  }
  return true;
}

void LatencyLog::Record(const RequestSample& s) {
  std::lock_guard<std::mutex> guard(log_mu_);
  const auto latency = static_cast<double>(s.latency_ns);
  batch_sum_ns_ += latency;
  ++batch_count_;
  ++totals_.requests;
  sum_latency_ns_ += latency;
  sum_wait_ns_ += static_cast<double>(s.wait_ns);
  sum_hold_ns_ += static_cast<double>(s.hold_ns);
  sum_queue_ns_ += static_cast<double>(s.queue_ns);
  sum_delay_ns_ += static_cast<double>(s.delay_ns);
  if (s.cpu_wait_ns >= 0) {
    sum_cpu_wait_ns_ += static_cast<double>(s.cpu_wait_ns);
    ++totals_.cpu_wait_samples;
  }
  if (trace_ != nullptr &&
      (options_.trace_limit == 0 || trace_rows_ < options_.trace_limit)) {
    std::fprintf(trace_, "%llu,%d,%lld,%lld,%lld,%lld,%lld,",
                 static_cast<unsigned long long>(s.pos), s.is_read ? 1 : 0,
                 static_cast<long long>(s.latency_ns),
                 static_cast<long long>(s.wait_ns),
                 static_cast<long long>(s.hold_ns),
                 static_cast<long long>(s.queue_ns),
                 static_cast<long long>(s.delay_ns));
    if (s.cpu_wait_ns >= 0) {
      std::fprintf(trace_, "%lld", static_cast<long long>(s.cpu_wait_ns));
    }
    std::fputc('\n', trace_);
    ++trace_rows_;
  }
  if (batch_count_ == options_.batch_size) {
    AppendBatchMeanLocked(batch_sum_ns_ / static_cast<double>(batch_count_) / 1e9);
    batch_sum_ns_ = 0;
    batch_count_ = 0;
  }
}

void LatencyLog::AppendBatchMeanLocked(double mean_s) {
  // Reopened per line, like the kit: a rename between runs starts a new file.
  std::FILE* f = std::fopen(options_.time_file.c_str(), "a");
  if (f == nullptr) {
    std::fprintf(stderr, "warning: cannot append to %s: %s\n",
                 options_.time_file.c_str(), std::strerror(errno));
    return;
  }
  std::fprintf(f, "%e\n", mean_s);
  std::fclose(f);
  ++totals_.batches_written;
  if (trace_ != nullptr) std::fflush(trace_);
}

void LatencyLog::Flush() {
  std::lock_guard<std::mutex> guard(log_mu_);
  if (trace_ != nullptr) std::fflush(trace_);
}

LatencyTotals LatencyLog::Totals() const {
  std::lock_guard<std::mutex> guard(log_mu_);
  LatencyTotals t = totals_;
  if (t.requests > 0) {
    const auto n = static_cast<double>(t.requests);
    t.mean_latency_s = sum_latency_ns_ / n / 1e9;
    t.mean_wait_s = sum_wait_ns_ / n / 1e9;
    t.mean_hold_s = sum_hold_ns_ / n / 1e9;
    t.mean_queue_s = sum_queue_ns_ / n / 1e9;
    t.mean_delay_s = sum_delay_ns_ / n / 1e9;
  }
  if (t.cpu_wait_samples > 0) {
    t.mean_cpu_wait_s =
        sum_cpu_wait_ns_ / static_cast<double>(t.cpu_wait_samples) / 1e9;
  }
  return t;
}

}  // namespace kv
