// RateLimitedLog: warnings that can repeat in a tight loop (accept failures,
// a full disk under the timing file), printed at most once a second.
//
// A line held back is counted; the next line printed says how many were
// ("(N similar lines suppressed)"). Disabled (--quiet), it prints nothing.
// Thread safety: Warn() may be called from any thread; an internal mutex
// guards the state. It is meant for failure paths only, never per request.
#ifndef KV_COMMON_RATE_LIMITED_LOG_H_
#define KV_COMMON_RATE_LIMITED_LOG_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace kv {

class RateLimitedLog {
 public:
  RateLimitedLog(std::string program, bool enabled)
      : program_(std::move(program)), enabled_(enabled) {}

  // Prints "<program>: <what>" unless a line was printed less than a second
  // ago. Returns true if it printed.
  bool Warn(std::string_view what) EXCLUDES(warn_mu_) {
    if (!enabled_) return false;
    MutexLock guard(&warn_mu_);
    const int64_t now = MonotonicNanos();
    if (now - last_ns_ < 1'000'000'000) {
      ++suppressed_;
      return false;
    }
    last_ns_ = now;
    if (suppressed_ > 0) {
      std::fprintf(stderr, "%s: %.*s (%llu similar lines suppressed)\n", program_.c_str(),
                   static_cast<int>(what.size()), what.data(),
                   static_cast<unsigned long long>(suppressed_));
    } else {
      std::fprintf(stderr, "%s: %.*s\n", program_.c_str(), static_cast<int>(what.size()),
                   what.data());
    }
    suppressed_ = 0;
    return true;
  }

 private:
  const std::string program_;
  const bool enabled_;
  Mutex warn_mu_;
  int64_t last_ns_ GUARDED_BY(warn_mu_) = -2'000'000'000;
  uint64_t suppressed_ GUARDED_BY(warn_mu_) = 0;
};

}  // namespace kv

#endif  // KV_COMMON_RATE_LIMITED_LOG_H_
