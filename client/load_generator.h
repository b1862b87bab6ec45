// LoadGenerator: drives a lab server with T client threads and measures it.
//
// Closed loop (rate == 0): each thread sends its next request as soon as the
// previous reply arrived. Open loop (rate > 0): thread t's request k is due at
// start + (k + t/T) * T/rate, the whole client sending `rate` requests/s; a
// thread that falls behind sends at once, and latency is measured from the
// DUE time (the wrk2 correction for coordinated omission). The uncorrected
// latency (from the actual send) is recorded too.
//
// Connections: per-request (the kit: connect, write 100 bytes, read 100 bytes,
// close; connect time counts in the latency) or keep-alive (each thread owns
// connections/threads persistent connections and uses them in turn).
//
// Timing: all threads start together (start barrier). The first warmup_s
// seconds of intended send times are excluded from every figure. The run ends
// after `requests` measured requests (split evenly over threads: thread t does
// requests/T, plus one if t < requests%T), at warmup_s + duration_s, or at
// time_limit_s after the start, whichever comes first (0 = no bound of the
// first two kinds; the time limit always holds). A run cut short by the time
// limit with requests still to do sets time_limit_hit.
//
// Each logical client records into its own histograms and counters; they are
// merged after join, so the hot path takes no locks.
//
// OS threads: closed loop, with keep-alive and with a connection per request
// (the kit) alike, runs min(T, CPUs) event-driven threads (epoll; min(T,
// 2 x CPUs) with a connection per request), each driving its share of the T
// logical clients, so 100 or 1000 clients do not need 100 or 1000 threads
// and the client is not the bottleneck. A logical client behaves exactly as a
// blocking thread would (own workload stream, quota, one request in flight,
// connections used in turn), so traffic and results are the same. Open loop
// runs one blocking thread per client thread.
//
// The moment one connection attempt is refused (or the address is
// unreachable), every thread stops and server_gone is set: on a workload
// that makes one connection per request, a refused connect means nobody
// listens. Nothing else is sent to the server: no probe, no retry; a run
// against a live server makes exactly the connections the workload asks for.
#ifndef KV_CLIENT_LOAD_GENERATOR_H_
#define KV_CLIENT_LOAD_GENERATOR_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "client/lab_connection.h"
#include "client/latency_histogram.h"
#include "client/workload.h"

namespace kv {

struct LoadConfig {
  WorkloadSpec workload;
  Endpoint endpoint;
  uint32_t threads = 100;
  bool keepalive = false;
  uint32_t connections = 0;  // keep-alive only; 0 = one per thread; >= threads
  uint64_t requests = 1000;  // measured requests; 0 = no count bound
  double duration_s = 0;     // 0 = no time bound
  double warmup_s = 0;
  double rate = 0;                // requests/s over all threads; 0 = closed loop
  int timeout_ms = 5000;          // per connect, send and receive
  double time_limit_s = 600;      // no request is started after this (wall time)
  bool progress = false;          // progress lines on stderr (long runs only)
  uint64_t start_at_unix_ns = 0;  // CLOCK_REALTIME; the clock starts no earlier
};

struct TimelinePoint {
  uint64_t ok = 0;
  uint64_t errors = 0;
};

struct LoadResult {
  uint64_t requests = 0;  // measured requests attempted (ok + errors)
  uint64_t ok = 0;
  std::array<uint64_t, kNumErrorKinds> errors{};  // indexed by ErrorKind
  uint64_t warmup_requests = 0;
  double elapsed_s = 0;                 // measurement window: warm-up end to last reply
  LatencyHistogram latency;             // corrected in open loop; send->reply closed
  LatencyHistogram uncorrected;         // open loop only: send->reply
  double max_send_lag_us = 0;           // open loop: worst lateness of a send
  std::vector<TimelinePoint> timeline;  // per second of the window
  uint64_t answered = 0;                // requests with a whole reply, warm-up included
  uint64_t connected = 0;               // connections the server accepted
  bool server_gone = false;             // a connect was refused; the run stopped there
  bool time_limit_hit = false;          // stopped by time_limit_s, requests undone
  std::string gone_detail;              // that connect's error, e.g. "connect ...: refused"
  std::string first_error;              // first error's detail, for the user
  std::vector<uint64_t> client_ok;      // per logical client t: its ok (fairness)

  // A connect was refused and none was ever accepted: never reachable. (A
  // server that accepted connections and then died "went away".)
  bool unreachable() const { return server_gone && connected == 0; }

  uint64_t total_errors() const;
  double throughput_rps() const { return elapsed_s > 0 ? static_cast<double>(ok) / elapsed_s : 0; }
};

// Runs one load run. REQUIRES: config validated (threads >= 1, requests or
// duration set, connections 0 or >= threads, time_limit_s > 0; all finite). Fills *result; never
// throws on the request path.
void RunLoad(const LoadConfig& config, LoadResult* result);

}  // namespace kv

#endif  // KV_CLIENT_LOAD_GENERATOR_H_
