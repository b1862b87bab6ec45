// One load run's shared state and bookkeeping: what the plan (load_generator.cpp)
// and every driver share. The drivers are the blocking workers
// (driver_blocking.cpp: open loop), and the event loops (event_loop.h, their
// core, under loop_keepalive.cpp and loop_oneshot.cpp: closed loop); each
// drives logical clients, books every request here and ends here.
//
// Thread safety: a Worker is written by the one thread that drives its client
// (its progress is read by the plan's thread, relaxed); Shared is set before
// `go` opens and then read by every thread, apart from its atomics and what
// done_mu guards.
#ifndef KV_CLIENT_LOAD_RUN_H_
#define KV_CLIENT_LOAD_RUN_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <latch>
#include <memory>
#include <string>
#include <vector>

#include "client/exchange.h"
#include "client/lab_connection.h"
#include "client/latency_histogram.h"
#include "client/load_generator.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace kv::load {

// The project's monotonic clock (common/clock.h), unsigned for deadline maths.
inline uint64_t NowNs() { return static_cast<uint64_t>(MonotonicNanos()); }

// One logical client's figures, merged after the run.
struct alignas(64) Worker {
  std::atomic<uint64_t> progress{0};  // written by its thread only (relaxed)
  LatencyHistogram latency;
  LatencyHistogram uncorrected;
  std::array<uint64_t, kNumErrorKinds> errors{};
  uint64_t ok = 0;
  uint64_t warmup = 0;
  uint64_t answered = 0;   // requests that got a whole reply (warm-up too)
  uint64_t connected = 0;  // connections that were accepted
  uint64_t end_ns = 0;
  uint64_t max_lag_ns = 0;
  std::vector<TimelinePoint> timeline;
  std::string first_error;
};

using Workers = std::vector<std::unique_ptr<Worker>>;

struct Shared {
  const LoadConfig* config = nullptr;
  uint64_t start_ns = 0;              // set before `go` opens
  uint64_t measure_ns = 0;            // start + warm-up
  uint64_t deadline_ns = UINT64_MAX;  // the earlier of duration and time limit
  bool limit_binds = false;           // deadline_ns is the time limit's
  std::atomic<bool> time_limit_hit{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> server_gone{false};
  std::string gone_detail;  // written once, by the thread that set server_gone
  std::latch ready;
  std::latch go{1};
  Mutex done_mu;
  CondVar done_cv;                       // signalled (under done_mu) when running reaches 0
  uint32_t running GUARDED_BY(done_mu);  // threads not finished yet
  explicit Shared(uint32_t threads) : ready(threads), running(threads) {}
};

// One logical client's share of the run: its request quota and, with
// keep-alive, its connections t, t+T, t+2T, ... < C.
struct ClientPlan {
  uint64_t quota = 0;  // measured requests to do; UINT64_MAX = time-bounded
  uint32_t conns = 1;
};

ClientPlan PlanClient(const LoadConfig& cfg, uint32_t t);

// True (and the time limit noted, if it is the one that binds) once `now`
// is past the run's deadline: no request may start.
bool PastDeadline(Shared* shared, uint64_t now);

// The reply's grace for its server's end of stream (see lab_connection.h).
inline int EndGraceMs(const LoadConfig& cfg) {
  return std::min(cfg.timeout_ms, kEndOfStreamGraceMs);
}

// The deadline of an exchange that starts at `start_ns`.
inline int64_t ExchangeDeadline(const LoadConfig& cfg, uint64_t start_ns) {
  return static_cast<int64_t>(start_ns) + int64_t{cfg.timeout_ms} * 1'000'000;
}

// A finished request's times: when it was due (open loop: its schedule;
// closed loop: its send), sent, and when its reply (or failure) was in.
struct RequestTimes {
  uint64_t due = 0;
  uint64_t sent = 0;
  uint64_t done = 0;
};

// Books one finished request of a client into *w: its figures, its count of
// measured requests (*measured, published as w->progress), the first error's
// `detail`, and, for a refused connect, the server gone (every thread stops:
// see load_generator.h).
void BookRequest(Shared* shared, bool open_loop, const RequestTimes& times, ErrorKind kind,
                 const std::string& detail, Worker* w, uint64_t* measured);

// Reads what is left on an open connection whose replies were all read,
// until the server's end of stream or `deadline_ns`; a byte there re-books
// its last reply as a long_reply.
void ReadEndOf(LabConnection* conn, Worker* w, int64_t deadline_ns);

// A keep-alive connection at the end of a run, and whose stats it books into.
struct KeptConnection {
  LabConnection* conn;
  Worker* w;
};

// Ends the open connections among `kept` with one grace for all (every one
// is half-closed first).
void CloseKeptConnections(const LoadConfig& cfg, const std::vector<KeptConnection>& kept);

// A driver's thread is done: the last one wakes the plan's wait.
void FinishWorker(Shared* shared);

}  // namespace kv::load

#endif  // KV_CLIENT_LOAD_RUN_H_
