// ArtificialDelay: the lab's deliberate pause inside every array access.
//
// The kit's getContent()/setContent() call usleep(ART_DELAY = 10) before they
// copy, to make threads contend for the locks. We do the same with a
// configurable delay (0 disables it). On Linux a 10 us sleep really lasts about
// 60 us because of the default 50 us timer slack (shared/PERF.md), so the delay
// also records what it actually slept: reports quote both.
//
// Thread safety: Pause() may be called from any number of threads at once; the
// counters are relaxed atomics read on demand.
#ifndef KV_COMMON_ARTIFICIAL_DELAY_H_
#define KV_COMMON_ARTIFICIAL_DELAY_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kv {

class ArtificialDelay {
 public:
  explicit ArtificialDelay(std::chrono::microseconds nominal)
      : nominal_(nominal) {}
  ArtificialDelay(const ArtificialDelay&) = delete;
  ArtificialDelay& operator=(const ArtificialDelay&) = delete;

  // Sleeps for the nominal delay (no-op when it is 0) and records how long the
  // sleep really took.
  void Pause();

  std::chrono::microseconds nominal() const { return nominal_; }
  // Number of pauses taken and their mean real duration in nanoseconds
  // (0 when none was taken).
  uint64_t pauses() const { return pauses_.load(std::memory_order_relaxed); }
  double MeanSleptNanos() const;

 private:
  const std::chrono::microseconds nominal_;
  std::atomic<uint64_t> pauses_{0};
  std::atomic<uint64_t> slept_ns_{0};
};

}  // namespace kv

#endif  // KV_COMMON_ARTIFICIAL_DELAY_H_
