// ArtificialDelay: the lab's deliberate pause inside every array access.
//
// The kit's getContent()/setContent() call usleep(ART_DELAY = 10) before they
// copy, to make threads contend for the locks. We do the same with a
// configurable delay (0 disables it), in one of two modes (--delay-mode):
//
//  - kUsleep (default, the kit's semantics): one relative nanosleep of the
//    nominal delay. On Linux a 10 us sleep really lasts about 60 us because of
//    the default 50 us timer slack, and far longer when the
//    woken thread then waits for a CPU.
//  - kPrecise: the calling thread's timer slack is set to 1 ns (once per
//    thread, prctl(PR_SET_TIMERSLACK, 1)); the thread sleeps with
//    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) until spin_ns before
//    the absolute deadline (start + nominal), then spins on the clock until
//    the deadline. So a pause never ends early, and on an idle CPU it ends
//    within about a microsecond of the deadline. spin_ns is what a timer
//    wake-up really takes on this machine: the server measures it at start
//    (MeasureWakeUpLatencyNs(); --spin-ns sets it), because a spin shorter
//    than the wake-up cannot absorb it (a KVM guest wakes 15-30 us late,
//    not the 2-3 us of bare metal). When spin_ns >= nominal the pause never
//    sleeps: it spins the whole delay (sleeps() is false), and the server
//    then runs requests on its event loops (--io epoll) rather than handing
//    them to sleeping workers. The spin burns CPU: when threads outnumber
//    cores (2 cores, 100+ serving threads) that CPU is taken from runnable
//    threads, so spinning helps only where few threads serve (--io epoll);
//    docs/performance.md has the figures.
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

#include <algorithm>
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

// The spin of a precise pause when none is given: a bare-metal timer
// wake-up with 1 ns timer slack (2-3 us) and a margin.
inline constexpr int64_t kPreciseSpinNs = 4'000;

class ArtificialDelay {
 public:
  explicit ArtificialDelay(std::chrono::microseconds nominal, DelayMode mode = DelayMode::kUsleep,
                           int64_t spin_ns = kPreciseSpinNs)
      : nominal_(nominal), mode_(mode), spin_ns_(spin_ns < 0 ? 0 : spin_ns), id_(NextId()) {}
  ArtificialDelay(const ArtificialDelay&) = delete;
  ArtificialDelay& operator=(const ArtificialDelay&) = delete;

  // Sleeps for the nominal delay (no-op when it is 0) in this delay's mode and
  // records how long the pause really took. In kPrecise mode it never returns
  // before start + nominal (CLOCK_MONOTONIC).
  void Pause();

  std::chrono::microseconds nominal() const { return nominal_; }
  DelayMode mode() const { return mode_; }
  int64_t spin_ns() const { return spin_ns_; }
  // False when no pause ever blocks the thread: no delay, or a precise one
  // that spins all the way.
  bool sleeps() const {
    return nominal_.count() > 0 && (mode_ == DelayMode::kUsleep ||
                                    spin_ns_ < static_cast<int64_t>(nominal_.count()) * 1000);
  }

  // How late a timer wakes a thread with 1 ns timer slack on this machine:
  // the median overshoot of 21 sleeps of 50 us, on a thread of its own (the
  // caller's slack is left alone), plus 1 us; clamped to [2 us, 200 us].
  // Takes about 2 ms.
  static int64_t MeasureWakeUpLatencyNs();
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
  const int64_t spin_ns_;  // kPrecise: spin this long before the deadline
  const uint64_t id_;      // unique per delay, for the threads' shard cache
  mutable Mutex shards_mu_;
  // Shards outlive their threads, so no count is lost when a thread ends.
  std::vector<std::unique_ptr<Shard>> shards_ GUARDED_BY(shards_mu_);
};

}  // namespace kv

#endif  // KV_COMMON_ARTIFICIAL_DELAY_H_
