#include "common/artificial_delay.h"

#include <cerrno>
#include <ctime>

#include "common/clock.h"

namespace kv {

void ArtificialDelay::Pause() {
  if (nominal_.count() == 0) return;
  const int64_t start = MonotonicNanos();
  timespec want{static_cast<time_t>(nominal_.count() / 1'000'000),
                static_cast<long>(nominal_.count() % 1'000'000) * 1000};
  timespec left{};
  // Finish the sleep even if a signal (e.g. SIGTERM at shutdown) interrupts it.
  while (nanosleep(&want, &left) != 0 && errno == EINTR) want = left;
  const int64_t slept = MonotonicNanos() - start;
  pauses_.fetch_add(1, std::memory_order_relaxed);
  slept_ns_.fetch_add(static_cast<uint64_t>(slept), std::memory_order_relaxed);
}

double ArtificialDelay::MeanSleptNanos() const {
  const uint64_t n = pauses();
  return n == 0 ? 0.0
                : static_cast<double>(slept_ns_.load(std::memory_order_relaxed)) /
                      static_cast<double>(n);
}

}  // namespace kv
