#include "common/artificial_delay.h"

#include <sys/prctl.h>

#include <cerrno>
#include <ctime>

#include "common/clock.h"

namespace kv {
namespace {

thread_local int64_t t_slept_ns = 0;
thread_local bool t_slack_set = false;

timespec ToTimespec(int64_t ns) {
  return timespec{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

void SleepRelative(int64_t ns) {
  timespec want = ToTimespec(ns);
  timespec left{};
  // Finish the sleep even if a signal (e.g. SIGTERM at shutdown) interrupts it.
  while (nanosleep(&want, &left) != 0 && errno == EINTR) want = left;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Sleeps until kPreciseSpinNs before `deadline_ns`, then spins to it.
void SleepUntilPrecise(int64_t deadline_ns) {
  if (!t_slack_set) {
    // Once per thread; a failure (never seen on Linux) leaves the default
    // slack, which the spin cannot undo but the recorded sleep shows.
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    t_slack_set = true;
  }
  const int64_t wake_ns = deadline_ns - kPreciseSpinNs;
  if (MonotonicNanos() < wake_ns) {
    const timespec wake = ToTimespec(wake_ns);
    // Absolute deadline: an EINTR restart sleeps only what is left.
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, nullptr) == EINTR) {
    }
  }
  while (MonotonicNanos() < deadline_ns) CpuRelax();
}

}  // namespace

std::string_view DelayModeName(DelayMode mode) {
  return mode == DelayMode::kPrecise ? "precise" : "usleep";
}

void ArtificialDelay::Pause() {
  if (nominal_.count() == 0) return;
  const int64_t start = MonotonicNanos();
  const int64_t nominal_ns = static_cast<int64_t>(nominal_.count()) * 1000;
  if (mode_ == DelayMode::kPrecise) {
    SleepUntilPrecise(start + nominal_ns);
  } else {
    SleepRelative(nominal_ns);
  }
  const int64_t slept = MonotonicNanos() - start;
  t_slept_ns += slept;
  pauses_.fetch_add(1, std::memory_order_relaxed);
  slept_ns_.fetch_add(static_cast<uint64_t>(slept), std::memory_order_relaxed);
}

double ArtificialDelay::MeanSleptNanos() const {
  const uint64_t n = pauses();
  return n == 0 ? 0.0
                : static_cast<double>(slept_ns_.load(std::memory_order_relaxed)) /
                      static_cast<double>(n);
}

int64_t ArtificialDelay::TakeThreadSleptNanos() {
  const int64_t v = t_slept_ns;
  t_slept_ns = 0;
  return v;
}

}  // namespace kv
