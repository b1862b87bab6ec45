// ClientOptions: the client's command line, parsed and validated before
// anything runs (separate from running, as common/server_options).
//
// Every number (n and port included) follows the one rule of
// common/numbers.h, as the servers' do: decimal digits only, read as the
// kit's atoi reads them ("03000" is 3000); a sign, "0x10", "nan", "inf", a
// space, an empty value, "1.5" or "1e3" where a whole number is meant are
// refused; each is checked against its range. A bad value is refused with
// ONE line naming the option, the value and the range, e.g.
//   --threads: '1.5' is not a decimal integer (digits only); allowed 1..4096 (give T or a list like
//   1,2,4,8)
// and the program exits 2 without touching the network.
//
// Every run is bounded in time: a run point ends when its requests are done,
// at --warmup + --duration, or at --time-limit seconds after it started,
// whichever comes first (the request in flight then still has up to
// --timeout-ms). --time-limit defaults to 600 s, or to warmup + duration
// when --duration is given; reaching it before the requests are done is a
// failure (exit 1). An open-loop schedule longer than the limit, a warm-up
// that leaves no time to measure, or warmup + duration over an explicit
// limit are refused up front. The checker (--check) is bounded by --time-limit too.
//
// Thread safety: ClientOptions is a value; ParseClientOptions is reentrant.
#ifndef KV_CLIENT_CLIENT_OPTIONS_H_
#define KV_CLIENT_CLIENT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "client/lab_connection.h"
#include "client/workload.h"
#include "common/limits.h"
#include "common/status.h"

namespace kv {

inline constexpr double kDefaultTimeLimitS = 600;

enum class OutputFormat { kText, kJson, kCsv };

struct ClientOptions {
  // Positionals.
  uint64_t n = 0;
  std::string ip;
  uint16_t given_port = 0;  // as on the command line
  bool real_port = false;
  Endpoint endpoint;  // ip and the port actually connected to

  // Load runs.
  std::vector<uint32_t> threads{100};
  bool thread_list = false;  // --threads had a comma: one run per point
  uint64_t requests = 1000;  // 0 = bounded by --duration only
  double duration_s = 0;     // 0 = none
  double warmup_s = 0;
  double rate = 0;  // 0 = closed loop
  double time_limit_s = kDefaultTimeLimitS;
  bool keepalive = false;
  uint32_t connections = 0;  // keep-alive; 0 = one per thread
  WorkloadSpec spec;         // n, read ratio, distribution, text, seed
  int timeout_ms = 5000;

  // Output.
  OutputFormat format = OutputFormat::kText;
  bool timeline = false;
  bool quiet = false;
  // --histogram-out: every run point's raw latency buckets as JSON (for
  // merging the histograms of several load agents); empty = none.
  std::string histogram_out;
  // --start-at: wall-clock time (CLOCK_REALTIME, ns since the epoch) before
  // which no run starts (agents on several hosts start together); 0 = now.
  uint64_t start_at_ns = 0;

  // Checker.
  bool check = false;
  uint32_t check_requests = 125;

  // Non-empty after --help or --version: print it to stdout and exit 0.
  std::string show;
};

// Parses and validates argv. Returns OK (then *out is ready to run, or
// out->show is set), or InvalidArgument with a one-line message.
Status ParseClientOptions(int argc, const char* const* argv, ClientOptions* out);

}  // namespace kv

#endif  // KV_CLIENT_CLIENT_OPTIONS_H_
