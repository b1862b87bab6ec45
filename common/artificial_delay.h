// ArtificialDelay: the lab's deliberate pause inside every array access.
//
// The kit's getContent()/setContent() call usleep(ART_DELAY = 10) before they
// copy, to make threads contend for the locks. We do the same with a
// configurable delay (0 disables it), in one of two modes (--delay-mode):
//
//  - kUsleep (default, the kit's semantics): one relative nanosleep of the
//    nominal delay. On Linux a 10 us sleep really lasts about 60 us because of
//    the default 50 us timer slack (shared/PERF.md), and far longer when the
//    woken thread then waits for a CPU.
//  - kPrecise: the calling thread's timer slack is set to 1 ns (once per
//    thread, prctl(PR_SET_TIMERSLACK, 1)); the thread sleeps with
//    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) until kPreciseSpinNs
//    before the absolute deadline (start + nominal), then spins on the clock
//    until the deadline. So a pause never ends early, and on an idle CPU it
//    ends within about a microsecond of the deadline. The spin burns at most
//    kPreciseSpinNs of CPU per pause, and only when the thread woke before the
//    deadline; when threads outnumber cores (2 cores, 100+ serving threads)
//    that CPU is taken from runnable threads, while the wake-up itself is
//    already late (run-queue wait), so there the spin buys nothing and costs
//    up to kPreciseSpinNs per pause; docs/performance.md has the figures.
//
// Either way the delay records what it actually slept: in total (pauses(),
// MeanSleptNanos(), for the summary) and per thread (TakeThreadSleptNanos(),
// for the per-request split of the lab metric).
//
// Thread safety: Pause() may be called from any number of threads at once. It
// writes no shared memory: each thread counts its pauses in a shard of its
// own (a cache line it alone writes, registered under a mutex on the
// thread's first pause); pauses() and MeanSleptNanos() sum the shards when
// read. The per-thread sum for the request split is thread_local.
#ifndef KV_COMMON_ARTIFICIAL_DELAY_H_
#define KV_COMMON_ARTIFICIAL_DELAY_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace kv {

enum class DelayMode { kUsleep, kPrecise };

// "usleep" / "precise".
std::string_view DelayModeName(DelayMode mode);

// How long before the deadline a precise pause stops sleeping and spins.
// Chosen above the timer wake-up latency of an idle 2-vCPU KVM guest with
// 1 ns timer slack (about 2-3 us) so the spin absorbs it.
inline constexpr int64_t kPreciseSpinNs = 4'000;

class ArtificialDelay {
 public:
  explicit ArtificialDelay(std::chrono::microseconds nominal, DelayMode mode = DelayMode::kUsleep)
      : nominal_(nominal), mode_(mode), id_(NextId()) {}
  ArtificialDelay(const ArtificialDelay&) = delete;
  ArtificialDelay& operator=(const ArtificialDelay&) = delete;

  // Sleeps for the nominal delay (no-op when it is 0) in this delay's mode and
  // records how long the pause really took. In kPrecise mode it never returns
  // before start + nominal (CLOCK_MONOTONIC).
  void Pause();

  std::chrono::microseconds nominal() const { return nominal_; }
  DelayMode mode() const { return mode_; }
  // Number of pauses taken and their mean real duration in nanoseconds
  // (0 when none was taken).
  // Both sum the per-thread shards (a mutex; for summaries, not per request).
  uint64_t pauses() const;
  double MeanSleptNanos() const;

  // Nanoseconds the CALLING thread has paused (in any ArtificialDelay) since
  // its previous call; resets the thread's sum. The request handler calls it
  // before and after a request to attribute the delay slept to it.
  static int64_t TakeThreadSleptNanos();

 private:
  // One thread's counts; written by that thread only, read by Sum().
  struct alignas(64) Shard {
    std::thread::id owner;
    std::atomic<uint64_t> pauses{0};
    std::atomic<uint64_t> slept_ns{0};
  };
  struct Totals {
    uint64_t pauses = 0;
    uint64_t slept_ns = 0;
  };

  static uint64_t NextId();
  // The calling thread's shard (created on its first pause).
  Shard* ThreadShard() EXCLUDES(shards_mu_);
  Totals Sum() const EXCLUDES(shards_mu_);

  const std::chrono::microseconds nominal_;
  const DelayMode mode_;
  const uint64_t id_;  // unique per delay, for the threads' shard cache
  mutable Mutex shards_mu_;
  // Shards outlive their threads, so no count is lost when a thread ends.
  std::vector<std::unique_ptr<Shard>> shards_ GUARDED_BY(shards_mu_);
};

}  // namespace kv

#endif  // KV_COMMON_ARTIFICIAL_DELAY_H_
