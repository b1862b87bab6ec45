#include "common/artificial_delay.h"

#include <sys/prctl.h>

#include <cerrno>
#include <algorithm>
#include <ctime>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/cpu_relax.h"

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

void SetMinimalTimerSlack() {
  if (!t_slack_set) {
    // Once per thread; a failure (never seen on Linux) leaves the default
    // slack, which the spin cannot undo but the recorded sleep shows.
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    t_slack_set = true;
  }
}

void SleepUntil(int64_t wake_ns) {
  const timespec wake = ToTimespec(wake_ns);
  // Absolute deadline: an EINTR restart sleeps only what is left.
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, nullptr) == EINTR) {
  }
}

// Sleeps until `spin_ns` before `deadline_ns`, then spins to it.
void SleepUntilPrecise(int64_t deadline_ns, int64_t spin_ns) {
  const int64_t wake_ns = deadline_ns - spin_ns;
  if (MonotonicNanos() < wake_ns) {
    SetMinimalTimerSlack();
    SleepUntil(wake_ns);
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
    SleepUntilPrecise(start + nominal_ns, spin_ns_);
  } else {
    SleepRelative(nominal_ns);
  }
  const int64_t slept = MonotonicNanos() - start;
  t_slept_ns += slept;
  Shard* shard = ThreadShard();
  // This thread is the shard's only writer: a load and a store, no
  // read-modify-write, on a cache line no other thread writes.
  shard->pauses.store(shard->pauses.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  shard->slept_ns.store(
      shard->slept_ns.load(std::memory_order_relaxed) + static_cast<uint64_t>(slept),
      std::memory_order_relaxed);
}

ArtificialDelay::Shard* ArtificialDelay::ThreadShard() {
  // One-entry cache per thread: the server has one delay, so it always hits;
  // a thread alternating between delays (tests) looks its shard up again.
  thread_local uint64_t t_owner_id = 0;
  thread_local Shard* t_shard = nullptr;
  if (t_owner_id == id_) return t_shard;
  const std::thread::id me = std::this_thread::get_id();
  MutexLock guard(&shards_mu_);
  Shard* found = nullptr;
  for (const std::unique_ptr<Shard>& s : shards_) {
    if (s->owner == me) found = s.get();
  }
  if (found == nullptr) {
    shards_.push_back(std::make_unique<Shard>());
    found = shards_.back().get();
    found->owner = me;
  }
  t_owner_id = id_;
  t_shard = found;
  return found;
}

ArtificialDelay::Totals ArtificialDelay::Sum() const {
  Totals t;
  MutexLock guard(&shards_mu_);
  for (const std::unique_ptr<Shard>& s : shards_) {
    t.pauses += s->pauses.load(std::memory_order_relaxed);
    t.slept_ns += s->slept_ns.load(std::memory_order_relaxed);
  }
  return t;
}

uint64_t ArtificialDelay::pauses() const { return Sum().pauses; }

double ArtificialDelay::MeanSleptNanos() const {
  const Totals t = Sum();
  return t.pauses == 0 ? 0.0 : static_cast<double>(t.slept_ns) / static_cast<double>(t.pauses);
}

int64_t ArtificialDelay::MeasureWakeUpLatencyNs() {
  constexpr int kSleeps = 21;
  constexpr int64_t kSleepNs = 50'000;
  std::vector<int64_t> late(kSleeps);
  std::thread probe([&late] {
    SetMinimalTimerSlack();
    for (int64_t& l : late) {
      const int64_t deadline = MonotonicNanos() + kSleepNs;
      SleepUntil(deadline);
      l = MonotonicNanos() - deadline;
    }
  });
  probe.join();
  std::nth_element(late.begin(), late.begin() + kSleeps / 2, late.end());
  return std::clamp<int64_t>(late[kSleeps / 2] + 1'000, 2'000, 200'000);
}

uint64_t ArtificialDelay::NextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

int64_t ArtificialDelay::TakeThreadSleptNanos() {
  const int64_t v = t_slept_ns;
  t_slept_ns = 0;
  return v;
}

}  // namespace kv
