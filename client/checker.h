// Checker: a consistency check of a lab server, stronger than the kit's
// attacker (docs/client.md). `client --check` runs it.
//
// Before anything is written, every position the check touches is read once
// (its "baseline": the initial value on a fresh server). Then three phases
// run one after the other; every reply of every phase must be ALLOWED:
//   - the baseline or the initial value "String <pos>: the initial value",
//   - one of the 4 pool strings (attacker positions only), or
//   - exactly a value some checker thread already sent to that position
//     (values carry tag, position, writer and count, plus a filler derived
//     from them, so a torn or mixed value never matches; the count must not
//     exceed what that writer has published as sent).
// Phase "attacker": for each of 4 positions (0, n/4, 2n/4, 3n/4, deduplicated)
//   7 writer threads write random pool strings while 1 reader reads it, each
//   thread sending `attack_requests` requests (the kit: 125), all positions at
//   once. Stricter than the kit: once the reader has seen a pool string, every
//   later read must be a pool string.
// Phase "read-your-writes": min(8, n) threads, each owning the positions
//   p with p % threads == t; each writes a fresh value to one of its positions
//   (the write reply must be that value) and reads it back (must be equal).
// Phase "all-positions": 8 threads sweep every position (at most 2048, a
//   random sample beyond that), each writing every position in its own random
//   order and reading a random position after each write.
//
// Thread safety: RunCheck is called from one thread; it starts its own.
#ifndef KV_CLIENT_CHECKER_H_
#define KV_CLIENT_CHECKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "client/lab_connection.h"

namespace kv {

struct CheckConfig {
  uint64_t n = 1;
  Endpoint endpoint;
  bool keepalive = false;
  int timeout_ms = 5000;
  uint64_t seed = 1;
  uint32_t attack_requests = 125;  // per attacker thread (kit: 1000/8)
  uint32_t ryw_requests = 100;     // write+read pairs per RYW thread
  double time_limit_s = 600;       // no request starts later; then INCOMPLETE
};

struct Violation {
  std::string phase;
  uint64_t pos = 0;
  std::string read;     // sanitised
  std::string allowed;  // human description of what was allowed
};

struct CheckResult {
  uint64_t replies_checked = 0;
  uint64_t violations_total = 0;
  std::vector<Violation> violations;  // the first few
  uint64_t io_errors = 0;             // requests without a proper reply
  uint64_t connected = 0;             // connections the server accepted
  std::string first_io_error;
  uint64_t non_initial_baselines = 0;  // positions not fresh at start
  std::vector<std::string> phase_lines;

  bool consistent() const { return violations_total == 0 && io_errors == 0; }
};

// Runs the whole check. REQUIRES: config.n in 1..10,000,000 and the server
// reachable (the caller probes first).
void RunCheck(const CheckConfig& config, CheckResult* result);

// Exposed for tests: the deterministic value a checker writer sends, of
// length `len`, and whether `text` is such a value for `pos` (out-params
// filled if so).
std::string CheckerValue(char tag, uint64_t pos, uint32_t writer, uint64_t count, std::size_t len);
bool ParseCheckerValue(std::string_view text, uint64_t pos, char* tag, uint32_t* writer,
                       uint64_t* count);

}  // namespace kv

#endif  // KV_CLIENT_CHECKER_H_
