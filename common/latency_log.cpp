#include "common/latency_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "common/rate_limited_log.h"

namespace kv {

// One thread's unshared accumulator (see latency_log.h).
struct LatencyLog::Shard {
  LatencyLog* owner = nullptr;
  uint32_t count = 0;
  uint64_t rejected = 0;
  RequestSample samples[kShardSamples];
};

namespace {

std::string FileKind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

int OpenRegularFile(const std::string& path, int extra_flags, std::string* error) {
  // O_NONBLOCK: opening a FIFO for writing with no reader would block
  // forever (and ignore SIGTERM meanwhile); this way it fails with ENXIO.
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | extra_flags, 0644);
  if (fd < 0) {
    *error = errno == ENXIO ? "is a FIFO (or device) with no reader, not a "
                              "regular file"
                            : std::string("open: ") + std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *error = std::string("fstat: ") + std::strerror(errno);
    close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "is " + FileKind(st.st_mode) + ", not a regular file";
    close(fd);
    return -1;
  }
  // A regular file never blocks; clear the flag for ordinary stdio use.
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string AppendWholeLine(const std::string& path, std::string_view line) {
  std::string error;
  const int fd = OpenRegularFile(path, O_APPEND, &error);
  if (fd < 0) return error;
  const ssize_t put = write(fd, line.data(), line.size());
  if (put == static_cast<ssize_t>(line.size())) {
    if (close(fd) != 0) return std::string("close: ") + std::strerror(errno);
    return "";
  }
  const int write_errno = errno;
  if (put > 0) {
    // A short write (the disk filled up mid-line): with O_APPEND the partial
    // bytes end at the current offset; cut them back off so the file still
    // holds whole lines only.
    const off_t end = lseek(fd, 0, SEEK_CUR);
    if (end < put || ftruncate(fd, end - put) != 0) {
      std::string why = std::string("short write of ") + std::to_string(put) +
                        " bytes, and cannot cut "
                        "it off: " +
                        std::strerror(errno);
      close(fd);
      return why;
    }
    close(fd);
    return "write: short write of " + std::to_string(put) + " of " + std::to_string(line.size()) +
           " bytes (disk full?), cut off";
  }
  close(fd);
  return std::string("write: ") + std::strerror(write_errno);
}

LatencyLog::LatencyLog(LatencyLogOptions options)
    : options_(std::move(options)),
      warn_(std::make_unique<RateLimitedLog>(options_.program, options_.warnings)) {}

LatencyLog::~LatencyLog() {
  FlushThread();
  Shard& shard = ThisThreadShard();
  if (shard.owner == this) shard.owner = nullptr;
  if (trace_ != nullptr) std::fclose(trace_);
}

bool LatencyLog::Open(std::string* error) {
  // Fail at start-up, not after the first 1000 requests, if the timing file
  // cannot be written. Opening in append mode creates nothing new if it exists.
  std::string why;
  const int fd = OpenRegularFile(options_.time_file, O_APPEND, &why);
  if (fd < 0) {
    *error = "--time-file '" + options_.time_file + "': " + why;
    return false;
  }
  close(fd);
  if (!options_.trace_file.empty()) {
    const int tfd = OpenRegularFile(options_.trace_file, O_TRUNC, &why);
    if (tfd < 0) {
      *error = "--trace '" + options_.trace_file + "': " + why;
      return false;
    }
    trace_ = fdopen(tfd, "w");
    if (trace_ == nullptr) {
      *error = "--trace '" + options_.trace_file + "': fdopen: " + std::strerror(errno);
      close(tfd);
      return false;
    }
    std::fputs("pos,is_read,latency_ns,wait_ns,hold_ns,queue_ns,delay_ns,cpu_wait_ns\n", trace_);
  }
  return true;
}

LatencyLog::Shard& LatencyLog::ThisThreadShard() {
  // Constant-initialised, trivially destructible: static TLS, no guard.
  static thread_local Shard shard;
  return shard;
}

LatencyLog::Shard& LatencyLog::AdoptShard() {
  Shard& shard = ThisThreadShard();
  if (shard.owner != this) {
    if (shard.owner != nullptr) shard.owner->HandOff(&shard);
    shard.owner = this;
  }
  return shard;
}

void LatencyLog::Record(const RequestSample& s) {
  Shard& shard = AdoptShard();
  shard.samples[shard.count++] = s;
  if (shard.count == kShardSamples ||
      shard.count + pending_.load(std::memory_order_relaxed) >= options_.batch_size) {
    HandOff(&shard);
  }
}

void LatencyLog::CountRejected() { ++AdoptShard().rejected; }

void LatencyLog::FlushThread() {
  Shard& shard = ThisThreadShard();
  if (shard.owner == this) HandOff(&shard);
}

void LatencyLog::HandOff(Shard* shard) {
  if (shard->count == 0 && shard->rejected == 0) return;
  std::lock_guard<std::mutex> guard(log_mu_);
  totals_.rejected += shard->rejected;
  shard->rejected = 0;
  for (uint32_t i = 0; i < shard->count; ++i) {
    const RequestSample& s = shard->samples[i];
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
    if (trace_ != nullptr && (options_.trace_limit == 0 || trace_rows_ < options_.trace_limit)) {
      std::fprintf(trace_, "%llu,%d,%lld,%lld,%lld,%lld,%lld,",
                   static_cast<unsigned long long>(s.pos), s.is_read ? 1 : 0,
                   static_cast<long long>(s.latency_ns), static_cast<long long>(s.wait_ns),
                   static_cast<long long>(s.hold_ns), static_cast<long long>(s.queue_ns),
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
  shard->count = 0;
  pending_.store(batch_count_, std::memory_order_relaxed);
}

void LatencyLog::AppendBatchMeanLocked(double mean_s) {
  char line[64];
  const int len = std::snprintf(line, sizeof line, "%e\n", mean_s);
  const std::string why =
      AppendWholeLine(options_.time_file, std::string_view(line, static_cast<std::size_t>(len)));
  if (!why.empty()) {
    ++totals_.lines_lost;
    warn_->Warn("timing line lost (" + std::to_string(totals_.lines_lost) +
                " so far): " + options_.time_file + ": " + why);
  } else {
    ++totals_.batches_written;
  }
  if (trace_ != nullptr) std::fflush(trace_);
}

void LatencyLog::Flush() {
  FlushThread();
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
    t.mean_cpu_wait_s = sum_cpu_wait_ns_ / static_cast<double>(t.cpu_wait_samples) / 1e9;
  }
  return t;
}

}  // namespace kv
