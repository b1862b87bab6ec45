#include "client/load_generator.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>

#include "common/clock.h"

namespace kv {
namespace {

// The project's monotonic clock (common/clock.h), unsigned for deadline maths.
uint64_t NowNs() { return static_cast<uint64_t>(MonotonicNanos()); }

void SleepUntilNs(uint64_t t) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(t / 1'000'000'000ULL);
  ts.tv_nsec = static_cast<long>(t % 1'000'000'000ULL);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

struct alignas(64) Worker {
  std::atomic<uint64_t> progress{0};  // written by its thread only (relaxed)
  LatencyHistogram latency;
  LatencyHistogram uncorrected;
  std::array<uint64_t, kNumErrorKinds> errors{};
  uint64_t ok = 0;
  uint64_t warmup = 0;
  uint64_t answered = 0;  // requests that got a whole reply (warm-up too)
  uint64_t end_ns = 0;
  uint64_t max_lag_ns = 0;
  std::vector<TimelinePoint> timeline;
  std::string first_error;
};

struct Shared {
  const LoadConfig* config = nullptr;
  uint64_t start_ns = 0;    // set before `go` opens
  uint64_t measure_ns = 0;  // start + warm-up
  uint64_t deadline_ns = UINT64_MAX;  // the earlier of duration and time limit
  bool limit_binds = false;           // deadline_ns is the time limit's
  std::atomic<bool> time_limit_hit{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> server_gone{false};
  std::string gone_detail;  // written once, by the thread that set server_gone
  std::latch ready;
  std::latch go{1};
  std::mutex done_mu;
  std::condition_variable done_cv;
  uint32_t running;  // guarded by done_mu
  explicit Shared(uint32_t threads) : ready(threads), running(threads) {}
};

// One logical client's share of the run: its request quota and, with
// keep-alive, its connections t, t+T, t+2T, ... < C.
struct ClientPlan {
  uint64_t quota = 0;      // measured requests to do; UINT64_MAX = time-bounded
  uint32_t conns = 1;
};

ClientPlan PlanClient(const LoadConfig& cfg, uint32_t t) {
  const uint32_t nthreads = cfg.threads;
  ClientPlan plan;
  plan.quota = cfg.requests == 0
                   ? UINT64_MAX
                   : cfg.requests / nthreads + (t < cfg.requests % nthreads ? 1 : 0);
  if (cfg.keepalive) {
    const uint32_t total = std::max(cfg.connections, nthreads);
    plan.conns = (total - t + nthreads - 1) / nthreads;
  }
  return plan;
}

// True (and the time limit noted, if it is the one that binds) once `now`
// is past the run's deadline: no request may start.
bool PastDeadline(Shared* shared, uint64_t now) {
  if (now < shared->deadline_ns) return false;
  if (shared->limit_binds) shared->time_limit_hit.store(true);
  return true;
}

// A refused connect: nobody listens. Stop every thread (see the header).
void NoteServerGone(Shared* shared, const std::string& detail) {
  if (!shared->server_gone.exchange(true)) shared->gone_detail = detail;
  shared->stop.store(true, std::memory_order_relaxed);
}

// "timeout on request '...'" (and the ERROR reply's text).
std::string DescribeError(ErrorKind kind, const Frame& request, const Frame& reply) {
  std::string detail =
      std::string(ErrorKindName(kind)) + " on request '" +
      Sanitize(FrameText(std::string_view(request.data(), kFrameSize)), 48) + "'";
  if (kind == ErrorKind::kErrorReply) {
    detail += ": '" +
              Sanitize(FrameText(std::string_view(reply.data(), kFrameSize)), 64) + "'";
  }
  return detail;
}

// One blocking request on `conn`, connecting first if it is closed; a
// per-request connection is closed after its reply. *detail gets the
// connect error, or a description of any other failure.
ErrorKind Exchange(const LoadConfig& cfg, LabConnection* conn, const Frame& request,
                   Frame* reply, std::string* detail) {
  if (!conn->is_open()) {
    const ErrorKind kind = conn->Connect(cfg.endpoint, cfg.timeout_ms, detail,
                                         /*nodelay=*/cfg.keepalive);
    if (kind != ErrorKind::kNone) return kind;
  }
  const ErrorKind kind = conn->RoundTrip(request, reply);
  if (!cfg.keepalive) conn->Close();
  if (kind != ErrorKind::kNone) *detail = DescribeError(kind, request, *reply);
  return kind;
}

// Books one finished request into *w; returns true if it was measured (its
// intended start is past the warm-up).
bool Record(const Shared& shared, bool open_loop, uint64_t due, uint64_t sent,
            uint64_t done, ErrorKind kind, Worker* w) {
  if (kind == ErrorKind::kNone || kind == ErrorKind::kErrorReply) ++w->answered;
  if (due < shared.measure_ns) {
    ++w->warmup;
    return false;
  }
  if (kind == ErrorKind::kNone) {
    ++w->ok;
    w->latency.Record(done - due);
    if (open_loop) w->uncorrected.Record(done - sent);
  } else {
    ++w->errors[static_cast<int>(kind)];
  }
  if (open_loop && sent > due) w->max_lag_ns = std::max(w->max_lag_ns, sent - due);
  const std::size_t sec =
      static_cast<std::size_t>((done - shared.measure_ns) / 1'000'000'000ULL);
  if (sec < 100000) {
    if (w->timeline.size() <= sec) w->timeline.resize(sec + 1);
    ++(kind == ErrorKind::kNone ? w->timeline[sec].ok : w->timeline[sec].errors);
  }
  w->end_ns = done;
  return true;
}

// Open loop: thread t's request k is due at start + (k + t/T) * T/rate.
uint64_t DueTime(const Shared& shared, uint32_t t, uint64_t k) {
  const LoadConfig& cfg = *shared.config;
  const double interval_ns = 1e9 * cfg.threads / cfg.rate;
  return shared.start_ns +
         static_cast<uint64_t>((static_cast<double>(k) +
                                static_cast<double>(t) / cfg.threads) *
                               interval_ns);
}

void FinishWorker(Shared* shared) {
  std::lock_guard<std::mutex> guard(shared->done_mu);
  if (--shared->running == 0) shared->done_cv.notify_all();
}

// One client thread: blocking I/O, one request in flight at a time.
void RunWorker(Shared* shared, uint32_t t, Worker* w) {
  const LoadConfig& cfg = *shared->config;
  Workload workload(cfg.workload, t);
  const bool open_loop = cfg.rate > 0;
  // The default 50 us timer slack would make every scheduled send late.
  if (open_loop) (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  const ClientPlan plan = PlanClient(cfg, t);
  std::vector<LabConnection> conns(plan.conns);
  uint32_t next_conn = 0;
  Frame request{};
  Frame reply{};
  shared->ready.count_down();
  shared->go.wait();

  uint64_t measured = 0;
  for (uint64_t k = 0; measured < plan.quota; ++k) {
    if (shared->stop.load(std::memory_order_relaxed)) break;
    uint64_t due = open_loop ? DueTime(*shared, t, k) : NowNs();
    if (PastDeadline(shared, due)) break;
    if (open_loop && NowNs() < due) SleepUntilNs(due);
    workload.FillRequest(workload.Next(), &request);
    const uint64_t sent = NowNs();
    if (!open_loop) due = sent;
    LabConnection& conn = conns[next_conn];
    if (++next_conn == plan.conns) next_conn = 0;
    std::string detail;
    const ErrorKind kind = Exchange(cfg, &conn, request, &reply, &detail);
    if (Record(*shared, open_loop, due, sent, NowNs(), kind, w)) {
      w->progress.store(++measured, std::memory_order_relaxed);
    }
    if (kind != ErrorKind::kNone && w->first_error.empty()) w->first_error = detail;
    if (kind == ErrorKind::kConnect) {
      NoteServerGone(shared, detail);
      break;
    }
  }
  FinishWorker(shared);
}

// Sets the clock: start, end of warm-up, and the deadline (the earlier of
// warm-up + duration and the time limit).
void StartClock(const LoadConfig& config, Shared* shared) {
  shared->start_ns = NowNs();
  shared->measure_ns = shared->start_ns + static_cast<uint64_t>(config.warmup_s * 1e9);
  const uint64_t limit_ns =
      shared->start_ns + static_cast<uint64_t>(config.time_limit_s * 1e9);
  if (config.duration_s > 0) {
    shared->deadline_ns =
        shared->measure_ns + static_cast<uint64_t>(config.duration_s * 1e9);
  }
  if (limit_ns < shared->deadline_ns) {
    shared->deadline_ns = limit_ns;
    shared->limit_binds = true;
  }
}

void PrintProgress(const LoadConfig& config, const Shared& shared, uint64_t now,
                   const std::vector<std::unique_ptr<Worker>>& workers) {
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
                 config.warmup_s + config.duration_s,
                 static_cast<unsigned long long>(done));
  }
}

// Waits for the workers; prints progress for long runs unless quiet.
void WaitForWorkers(const LoadConfig& config, Shared* shared,
                    const std::vector<std::unique_ptr<Worker>>& workers) {
  std::unique_lock<std::mutex> lock(shared->done_mu);
  uint64_t last_print = shared->start_ns;
  while (shared->running > 0) {
    shared->done_cv.wait_for(lock, std::chrono::milliseconds(250));
    const uint64_t now = NowNs();
    if (config.progress && shared->running > 0 &&
        now - shared->start_ns >= 3'000'000'000ULL &&
        now - last_print >= 1'000'000'000ULL) {
      last_print = now;
      PrintProgress(config, *shared, now, workers);
    }
  }
}

LoadResult MergeWorkers(const LoadConfig& config, const Shared& shared,
                        const std::vector<std::unique_ptr<Worker>>& workers) {
  LoadResult r;
  uint64_t end = shared.measure_ns;
  uint64_t max_lag = 0;
  for (const auto& w : workers) {
    r.ok += w->ok;
    for (int k = 0; k < kNumErrorKinds; ++k) r.errors[k] += w->errors[k];
    r.warmup_requests += w->warmup;
    r.answered += w->answered;
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

}  // namespace

uint64_t LoadResult::total_errors() const {
  uint64_t sum = 0;
  for (uint64_t e : errors) sum += e;
  return sum;
}

void RunLoad(const LoadConfig& config, LoadResult* result) {
  const uint32_t nthreads = config.threads;
  Shared shared(nthreads);
  shared.config = &config;
  std::vector<std::unique_ptr<Worker>> workers;
  workers.reserve(nthreads);
  for (uint32_t t = 0; t < nthreads; ++t) workers.push_back(std::make_unique<Worker>());
  std::vector<std::thread> threads;
  threads.reserve(nthreads);
  for (uint32_t t = 0; t < nthreads; ++t) {
    threads.emplace_back(RunWorker, &shared, t, workers[t].get());
  }
  shared.ready.wait();
  StartClock(config, &shared);
  shared.go.count_down();
  WaitForWorkers(config, &shared, workers);
  for (auto& th : threads) th.join();
  *result = MergeWorkers(config, shared, workers);
}

}  // namespace kv
