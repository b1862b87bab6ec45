// Report: renders load runs as text (for people), JSON or CSV (for the
// experiment runner). The JSON shape is a contract with runner/ and is
// documented in docs/client.md; fields may be added, never renamed.
//
// Thread safety: pure functions of their arguments.
#ifndef KV_CLIENT_REPORT_H_
#define KV_CLIENT_REPORT_H_

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // the declaration only: json.hpp is a heavy parse

#include "client/load_generator.h"

namespace kv {

inline constexpr const char* kToolName = "lockbench-client";
#ifdef LOCKBENCH_VERSION
inline constexpr const char* kToolVersion = LOCKBENCH_VERSION;
#else
inline constexpr const char* kToolVersion = "0.0.0";
#endif

// One run point: what was asked and what happened.
struct RunReport {
  LoadConfig config;
  uint16_t given_port = 0;  // the port on the command line
  bool with_timeline = false;
  LoadResult result;
};

// Saturated: an open-loop run whose achieved rate of sends missed the
// target by more than 5% (the client could not keep its schedule).
bool IsSaturated(const RunReport& run);

nlohmann::json ToJson(const RunReport& run);
// The CSV header line (no newline) and one row per run (no newline).
std::string CsvHeader();
std::string CsvRow(const RunReport& run);
// A few readable lines, ending in a newline.
std::string ToText(const RunReport& run);

}  // namespace kv

#endif  // KV_CLIENT_REPORT_H_
