#include "client/load_generator.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "client/drivers.h"
#include "client/load_run.h"
#include "common/mutex.h"

// The plan of a run (which driver, how many OS threads, the clock, the start
// line) and the merge of what the drivers booked; the drivers are
// client/drivers.h's.
namespace kv {
namespace {

using load::NowNs;
using load::Shared;
using load::Workers;

// Closed loop: the event loops (keep-alive or a connection per request).
bool UseEventLoops(const LoadConfig& config) { return config.rate <= 0; }

// One keep-alive loop per CPU. One-shot loops spend most of their time in
// the kernel's connection set-up and tear-down and then wait for a batch of
// replies: two per CPU keep a CPU busy with one loop's work while the other
// waits, where one per CPU leaves it idle (measured on the 2-core machine:
// more requests per second at the same CPU per request; three per CPU cost
// more CPU per request).
uint32_t EventLoopCount(const LoadConfig& config) {
  const uint32_t cpus = std::max(1u, std::thread::hardware_concurrency());
  return std::min(config.threads, config.keepalive ? cpus : 2 * cpus);
}

// Sets the clock: start, end of warm-up, and the deadline (the earlier of
// warm-up + duration and the time limit).
void StartClock(const LoadConfig& config, Shared* shared) {
  shared->start_ns = NowNs();
  shared->measure_ns = shared->start_ns + static_cast<uint64_t>(config.warmup_s * 1e9);
  const uint64_t limit_ns = shared->start_ns + static_cast<uint64_t>(config.time_limit_s * 1e9);
  if (config.duration_s > 0) {
    shared->deadline_ns = shared->measure_ns + static_cast<uint64_t>(config.duration_s * 1e9);
  }
  if (limit_ns < shared->deadline_ns) {
    shared->deadline_ns = limit_ns;
    shared->limit_binds = true;
  }
}

void PrintProgress(const LoadConfig& config, const Shared& shared, uint64_t now,
                   const Workers& workers) {
  uint64_t done = 0;
  for (const auto& w : workers) done += w->progress.load(std::memory_order_relaxed);
  const double t = static_cast<double>(now - shared.start_ns) / 1e9;
  if (t < config.warmup_s) {
    std::fprintf(stderr, "client: %.0f s, warming up\n", t);
  } else if (config.requests > 0) {
    std::fprintf(stderr, "client: %.0f s, %llu of %llu requests\n", t,
                 static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(config.requests));
  } else {
    std::fprintf(stderr, "client: %.0f s of %.0f s, %llu requests\n", t,
                 config.warmup_s + config.duration_s, static_cast<unsigned long long>(done));
  }
}

// Waits for the workers; prints progress for long runs unless quiet.
void WaitForWorkers(const LoadConfig& config, Shared* shared, const Workers& workers) {
  MutexLock guard(&shared->done_mu);
  uint64_t last_print = shared->start_ns;
  while (shared->running > 0) {
    shared->done_cv.WaitFor(&shared->done_mu, std::chrono::milliseconds(250));
    const uint64_t now = NowNs();
    if (config.progress && shared->running > 0 && now - shared->start_ns >= 3'000'000'000ULL &&
        now - last_print >= 1'000'000'000ULL) {
      last_print = now;
      PrintProgress(config, *shared, now, workers);
    }
  }
}

LoadResult MergeWorkers(const LoadConfig& config, const Shared& shared, const Workers& workers) {
  LoadResult r;
  uint64_t end = shared.measure_ns;
  uint64_t max_lag = 0;
  for (const auto& w : workers) {
    r.ok += w->ok;
    for (int k = 0; k < kNumErrorKinds; ++k) r.errors[k] += w->errors[k];
    r.warmup_requests += w->warmup;
    r.answered += w->answered;
    r.connected += w->connected;
    r.latency.Merge(w->latency);
    r.uncorrected.Merge(w->uncorrected);
    end = std::max(end, w->end_ns);
    max_lag = std::max(max_lag, w->max_lag_ns);
    if (r.timeline.size() < w->timeline.size()) r.timeline.resize(w->timeline.size());
    for (std::size_t s = 0; s < w->timeline.size(); ++s) {
      r.timeline[s].ok += w->timeline[s].ok;
      r.timeline[s].errors += w->timeline[s].errors;
    }
    if (r.first_error.empty()) r.first_error = w->first_error;
    r.client_ok.push_back(w->ok);
  }
  r.requests = r.ok + r.total_errors();
  r.elapsed_s = static_cast<double>(end - shared.measure_ns) / 1e9;
  if (config.duration_s > 0 && config.rate > 0) {
    // An open-loop timed run's window is the schedule, not the last reply.
    r.elapsed_s = std::max(r.elapsed_s, config.duration_s);
  }
  r.max_send_lag_us = static_cast<double>(max_lag) / 1e3;
  r.server_gone = shared.server_gone.load();
  r.gone_detail = shared.gone_detail;
  r.time_limit_hit = shared.time_limit_hit.load();
  return r;
}

// The OS threads of a run, each running one driver: a blocking thread per
// client (open loop), else the event loops the clients are dealt to.
std::vector<std::thread> StartDrivers(const LoadConfig& config, Shared* shared,
                                      const Workers& workers,
                                      std::vector<std::unique_ptr<load::EventLoop>>* loops) {
  std::vector<std::thread> threads;
  if (!UseEventLoops(config)) {
    threads.reserve(workers.size());
    for (uint32_t t = 0; t < workers.size(); ++t) {
      threads.emplace_back(load::RunBlockingClient, shared, t, workers[t].get());
    }
    return threads;
  }
  const uint32_t count = EventLoopCount(config);
  *loops = config.keepalive ? load::MakeKeepAliveLoops(shared, workers, count)
                            : load::MakeOneShotLoops(shared, workers, count);
  threads.reserve(loops->size());
  for (const auto& loop : *loops) threads.emplace_back(&load::EventLoop::Run, loop.get());
  return threads;
}

}  // namespace

uint64_t LoadResult::total_errors() const {
  uint64_t sum = 0;
  for (uint64_t e : errors) sum += e;
  return sum;
}

void RunLoad(const LoadConfig& config, LoadResult* result) {
  const uint32_t os_threads = UseEventLoops(config) ? EventLoopCount(config) : config.threads;
  Shared shared(os_threads);
  shared.config = &config;
  Workers workers;
  workers.reserve(config.threads);
  for (uint32_t t = 0; t < config.threads; ++t) workers.push_back(std::make_unique<load::Worker>());
  std::vector<std::unique_ptr<load::EventLoop>> loops;
  std::vector<std::thread> threads = StartDrivers(config, &shared, workers, &loops);
  shared.ready.wait();
  // Agents on several hosts start together: sleep to the agreed wall-clock time.
  const timespec at{static_cast<time_t>(config.start_at_unix_ns / 1'000'000'000ULL),
                    static_cast<long>(config.start_at_unix_ns % 1'000'000'000ULL)};
  while (config.start_at_unix_ns > 0 &&
         ::clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, nullptr) == EINTR) {
  }
  StartClock(config, &shared);
  shared.go.count_down();
  WaitForWorkers(config, &shared, workers);
  for (auto& th : threads) th.join();
  *result = MergeWorkers(config, shared, workers);
}

}  // namespace kv
