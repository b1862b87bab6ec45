#include "common/latency_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <utility>

#include "common/clock.h"
#include "common/rate_limited_log.h"

namespace kv {

// One thread's unshared accumulator (see latency_log.h).
struct LatencyLog::Shard {
  LatencyLog* owner = nullptr;
  uint32_t count = 0;
  uint64_t rejected = 0;
  // The first IdleThread() call since the last Record/CountRejected; -1:
  // none yet.
  int64_t quiet_since = -1;
  uint32_t thread = 0;  // this thread's number in the owner's trace; 0: none yet
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

Status OpenRegularFile(const std::string& path, int extra_flags, UniqueFd* out) {
  // O_NONBLOCK: opening a FIFO for writing with no reader would block
  // forever (and ignore SIGTERM meanwhile); this way it fails with ENXIO.
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | extra_flags, 0644));
  if (!fd) {
    if (errno == ENXIO) {
      return Status::InvalidArgument("is a FIFO (or device) with no reader, not a regular file");
    }
    return Status::IOError("open", errno);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Status::IOError("fstat", errno);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument("is " + FileKind(st.st_mode) + ", not a regular file");
  }
  // A regular file never blocks; clear the flag for ordinary stdio use.
  const int flags = fcntl(fd.get(), F_GETFL);
  if (flags < 0 || fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return Status::IOError("fcntl", errno);
  }
  *out = std::move(fd);
  return Status::OK();
}

namespace {

// Cuts the `put` bytes of a short O_APPEND write back off the end of fd.
Status CutShortWrite(int fd, ssize_t put, std::size_t wanted) {
  // With O_APPEND the partial bytes end at the current offset.
  const off_t end = lseek(fd, 0, SEEK_CUR);
  if (end < put || ftruncate(fd, end - put) != 0) {
    return Status::IOError(
        "short write of " + std::to_string(put) + " bytes, and cannot cut it off", errno);
  }
  return Status::InvalidArgument("write: short write of " + std::to_string(put) + " of " +
                                 std::to_string(wanted) + " bytes (disk full?), cut off");
}

}  // namespace

Status AppendWholeLine(const std::string& path, std::string_view line) {
  UniqueFd fd;
  if (Status s = OpenRegularFile(path, O_APPEND, &fd); !s.ok()) return s;
  const ssize_t put = write(fd.get(), line.data(), line.size());
  if (put == static_cast<ssize_t>(line.size())) return fd.Close("close");
  // A short write (the disk filled up mid-line): cut it back off so the file
  // still holds whole lines only.
  if (put > 0) return CutShortWrite(fd.get(), put, line.size());
  return Status::IOError("write", errno);
}

LatencyLog::LatencyLog(LatencyLogOptions options)
    : options_(std::move(options)),
      start_ns_(MonotonicNanos()),
      warn_(std::make_unique<RateLimitedLog>(options_.program, options_.warnings)) {}

LatencyLog::~LatencyLog() {
  FlushThread();
  Shard& shard = ThisThreadShard();
  if (shard.owner == this) shard.owner = nullptr;
  MutexLock guard(&log_mu_);
  // The trace was written to: its last buffer goes out in fclose.
  if (Status s = CloseFile(&trace_, "close"); !s.ok()) {
    warn_->Warn("--trace '" + options_.trace_file + "': " + s.message());
  }
}

Status LatencyLog::Open() {
  // Fail at start-up, not after the first 1000 requests, if the timing file
  // cannot be written. Opening in append mode creates nothing new if it exists.
  UniqueFd fd;
  if (Status s = OpenRegularFile(options_.time_file, O_APPEND, &fd); !s.ok()) {
    return Status::InvalidArgument("--time-file '" + options_.time_file + "': " + s.message());
  }
  if (options_.trace_file.empty()) return Status::OK();
  const std::string what = "--trace '" + options_.trace_file + "'";
  UniqueFd trace_fd;
  if (Status s = OpenRegularFile(options_.trace_file, O_TRUNC, &trace_fd); !s.ok()) {
    return Status::InvalidArgument(what + ": " + s.message());
  }
  // OpenRegularFile's OK means an open descriptor (the analyzer loses that through the
  // Status it returns).
  // NOLINTNEXTLINE(clang-analyzer-unix.StdCLibraryFunctions)
  UniqueFile trace(fdopen(trace_fd.get(), "w"));
  if (trace == nullptr) return Status::IOError(what + ": fdopen", errno);
  trace_fd.Release();  // now owned by the FILE
  if (std::fputs("pos,is_read,latency_ns,wait_ns,hold_ns,queue_ns,delay_ns,cpu_wait_ns,recv_ns,"
                 "unlock_ns,thread\n",
                 trace.get()) < 0) {
    return Status::IOError(what + ": write", errno);
  }
  MutexLock guard(&log_mu_);
  trace_ = std::move(trace);
  return Status::OK();
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
    shard.thread = 0;
  }
  return shard;
}

void LatencyLog::Record(const RequestSample& s) {
  Shard& shard = AdoptShard();
  shard.quiet_since = -1;
  if (shard.thread == 0) shard.thread = threads_.fetch_add(1, std::memory_order_relaxed) + 1;
  shard.samples[shard.count] = s;
  shard.samples[shard.count++].thread = shard.thread;
  if (shard.count == kShardSamples ||
      shard.count + pending_.load(std::memory_order_relaxed) >= options_.batch_size) {
    HandOff(&shard);
  }
}

void LatencyLog::CountRejected() {
  Shard& shard = AdoptShard();
  shard.quiet_since = -1;
  ++shard.rejected;
}

int64_t LatencyLog::IdleThread(int64_t now_ns) {
  Shard& shard = ThisThreadShard();
  if (shard.owner != this || (shard.count == 0 && shard.rejected == 0)) return kNever;
  // Quiet is counted from the first wait after the last request: waits
  // between requests of a busy thread restart it, so they never hand off.
  if (shard.quiet_since < 0) shard.quiet_since = now_ns;
  if (now_ns - shard.quiet_since < kQuietNs) return shard.quiet_since + kQuietNs;
  HandOff(&shard);
  return kNever;
}

void LatencyLog::FlushThread() {
  Shard& shard = ThisThreadShard();
  if (shard.owner == this) HandOff(&shard);
}

void LatencyLog::HandOff(Shard* shard) {
  if (shard->count == 0 && shard->rejected == 0) return;
  MutexLock guard(&log_mu_);
  totals_.rejected += shard->rejected;
  shard->rejected = 0;
  for (uint32_t i = 0; i < shard->count; ++i) AddSampleLocked(shard->samples[i]);
  shard->count = 0;
  pending_.store(batch_count_, std::memory_order_relaxed);
}

void LatencyLog::AddSampleLocked(const RequestSample& s) {
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
  TraceSampleLocked(s);
  if (batch_count_ == options_.batch_size) {
    AppendBatchMeanLocked(batch_sum_ns_ / static_cast<double>(batch_count_) / 1e9);
    batch_sum_ns_ = 0;
    batch_count_ = 0;
  }
}

void LatencyLog::TraceSampleLocked(const RequestSample& s) {
  if (trace_ == nullptr || (options_.trace_limit != 0 && trace_rows_ >= options_.trace_limit)) {
    return;
  }
  // Write errors stick in the stream's error flag and come out at fclose
  // (see the destructor); a trace row is not worth a syscall check each.
  std::FILE* f = trace_.get();
  std::fprintf(f, "%llu,%d,%lld,%lld,%lld,%lld,%lld,", static_cast<unsigned long long>(s.pos),
               s.is_read ? 1 : 0, static_cast<long long>(s.latency_ns),
               static_cast<long long>(s.wait_ns), static_cast<long long>(s.hold_ns),
               static_cast<long long>(s.queue_ns), static_cast<long long>(s.delay_ns));
  if (s.cpu_wait_ns >= 0) std::fprintf(f, "%lld", static_cast<long long>(s.cpu_wait_ns));
  for (const int64_t at : {s.received_ns, s.released_ns}) {
    std::fputc(',', f);
    if (at > 0) std::fprintf(f, "%lld", static_cast<long long>(at - start_ns_));  // 0: not known
  }
  std::fprintf(f, ",%u\n", s.thread);
  ++trace_rows_;
}

void LatencyLog::AppendBatchMeanLocked(double mean_s) {
  char line[64];
  const int len = std::snprintf(line, sizeof line, "%e\n", mean_s);
  const Status s =
      AppendWholeLine(options_.time_file, std::string_view(line, static_cast<std::size_t>(len)));
  if (!s.ok()) {
    ++totals_.lines_lost;
    warn_->Warn("timing line lost (" + std::to_string(totals_.lines_lost) +
                " so far): " + options_.time_file + ": " + s.message());
  } else {
    ++totals_.batches_written;
  }
  // Unchecked: a failed flush leaves the error flag set, reported at fclose.
  if (trace_ != nullptr) static_cast<void>(std::fflush(trace_.get()));
}

void LatencyLog::Flush() {
  FlushThread();
  MutexLock guard(&log_mu_);
  // Unchecked: a failed flush leaves the error flag set, reported at fclose.
  if (trace_ != nullptr) static_cast<void>(std::fflush(trace_.get()));
}

LatencyTotals LatencyLog::Totals() const {
  MutexLock guard(&log_mu_);
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
