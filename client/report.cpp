#include "client/report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "client/fairness.h"

namespace kv {
namespace {

using nlohmann::json;

double Us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

json LatencyJson(const LatencyHistogram& h) {
  return json{{"mean", h.mean() / 1e3},          {"min", Us(h.min())},
              {"p50", Us(h.Percentile(0.50))},   {"p90", Us(h.Percentile(0.90))},
              {"p95", Us(h.Percentile(0.95))},   {"p99", Us(h.Percentile(0.99))},
              {"p999", Us(h.Percentile(0.999))}, {"max", Us(h.max())}};
}

// How evenly the logical clients shared the throughput, over their ok
// counts: FairnessOf (fairness.h, the microbenchmarks' too), but max_min is
// null when a client completed none (FairnessOf counts it as 1).
json FairnessJson(const std::vector<uint64_t>& client_ok) {
  if (client_ok.empty()) {
    return json{{"clients", 0}, {"jain", nullptr}, {"rsd", nullptr}, {"max_min", nullptr}};
  }
  const Fairness f = FairnessOf(client_ok);
  const bool none_done = *std::min_element(client_ok.begin(), client_ok.end()) == 0;
  return json{{"clients", client_ok.size()},
              {"jain", f.jain},
              {"rsd", f.rsd},
              {"max_min", none_done ? json(nullptr) : json(f.max_min)}};
}

const char* const kLatencyKeys[] = {"mean", "min", "p50", "p90", "p95", "p99", "p999", "max"};

// Formats a JSON scalar for a CSV cell (null -> empty).
std::string Cell(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) {
      if (c == '"') q += '"';
      q += c;
    }
    return q + "\"";
  }
  return v.dump();
}

// The flat (column, JSON pointer) list shared by header and rows.
std::vector<std::pair<std::string, std::string>> CsvColumns() {
  std::vector<std::pair<std::string, std::string>> cols = {
      {"tool", "/tool"},
      {"version", "/version"},
      {"n", "/config/n"},
      {"host", "/config/host"},
      {"port", "/config/port"},
      {"connect_port", "/config/connect_port"},
      {"mode", "/config/mode"},
      {"connection", "/config/connection"},
      {"threads", "/config/threads"},
      {"connections", "/config/connections"},
      {"config_requests", "/config/requests"},
      {"duration_s", "/config/duration_s"},
      {"warmup_s", "/config/warmup_s"},
      {"rate", "/config/rate"},
      {"read_ratio", "/config/read_ratio"},
      {"distribution", "/config/distribution"},
      {"text_len", "/config/text_len"},
      {"seed", "/config/seed"},
      {"requests", "/results/requests"},
      {"ok", "/results/ok"},
  };
  for (const char* e : {"total", "connect", "reset", "timeout", "error_reply", "short_reply",
                        "other", "long_reply"}) {
    cols.emplace_back(std::string("errors_") + e, std::string("/results/errors/") + e);
  }
  cols.emplace_back("elapsed_s", "/results/elapsed_s");
  cols.emplace_back("throughput_rps", "/results/throughput_rps");
  for (const char* k : kLatencyKeys) {
    cols.emplace_back(std::string("latency_us_") + k, std::string("/results/latency_us/") + k);
  }
  for (const char* k : kLatencyKeys) {
    cols.emplace_back(std::string("uncorrected_latency_us_") + k,
                      std::string("/results/uncorrected_latency_us/") + k);
  }
  cols.emplace_back("target_rate", "/results/target_rate");
  cols.emplace_back("saturated", "/results/saturated");
  cols.emplace_back("max_send_lag_us", "/results/max_send_lag_us");
  cols.emplace_back("warmup_requests", "/results/warmup_requests");
  return cols;
}

}  // namespace

bool IsSaturated(const RunReport& run) {
  if (run.config.rate <= 0) return false;
  const LoadResult& r = run.result;
  const double achieved = r.elapsed_s > 0 ? static_cast<double>(r.requests) / r.elapsed_s : 0;
  return achieved < 0.95 * run.config.rate;
}

json ToJson(const RunReport& run) {
  const LoadConfig& c = run.config;
  const LoadResult& r = run.result;
  const bool open = c.rate > 0;
  json config = {
      {"n", c.workload.n},
      {"host", c.endpoint.host},
      {"port", run.given_port},
      {"connect_port", c.endpoint.port},
      {"mode", open ? "open" : "closed"},
      {"connection", c.keepalive ? "keepalive" : "per-request"},
      {"threads", c.threads},
      {"connections", c.keepalive ? std::max(c.connections, c.threads) : c.threads},
      {"requests", c.requests > 0 ? json(c.requests) : json(nullptr)},
      {"duration_s", c.duration_s > 0 ? json(c.duration_s) : json(nullptr)},
      {"warmup_s", c.warmup_s},
      {"rate", open ? json(c.rate) : json(nullptr)},
      {"read_ratio", c.workload.read_ratio},
      {"distribution", c.workload.dist.ToString()},
      {"text_len", c.workload.text.ToString()},
      {"seed", c.workload.seed},
      {"timeout_ms", c.timeout_ms},
      {"time_limit_s", c.time_limit_s},
  };
  json errors = {{"total", r.total_errors()}};
  for (int k = 1; k < kNumErrorKinds; ++k) {
    errors[ErrorKindName(static_cast<ErrorKind>(k))] = r.errors[k];
  }
  json results = {
      {"requests", r.requests},
      {"ok", r.ok},
      {"errors", errors},
      {"elapsed_s", r.elapsed_s},
      {"throughput_rps", r.throughput_rps()},
      {"latency_us", LatencyJson(r.latency)},
      {"uncorrected_latency_us", open ? LatencyJson(r.uncorrected) : json(nullptr)},
      {"target_rate", open ? json(c.rate) : json(nullptr)},
      {"saturated", IsSaturated(run)},
      {"max_send_lag_us", open ? json(r.max_send_lag_us) : json(nullptr)},
      {"warmup_requests", r.warmup_requests},
      {"server_gone", r.server_gone},
      {"time_limit_hit", r.time_limit_hit},
      {"fairness", FairnessJson(r.client_ok)},
      {"histogram",
       {{"kind", "log-linear"}, {"relative_error", LatencyHistogram::kRelativeErrorBound}}},
  };
  if (run.with_timeline) {
    json tl = json::array();
    for (std::size_t s = 0; s < r.timeline.size(); ++s) {
      tl.push_back({{"t_s", s}, {"ok", r.timeline[s].ok}, {"errors", r.timeline[s].errors}});
    }
    results["timeline"] = tl;
  }
  return json{
      {"tool", kToolName}, {"version", kToolVersion}, {"config", config}, {"results", results}};
}

std::string CsvHeader() {
  std::string out;
  for (const auto& [name, ptr] : CsvColumns()) {
    if (!out.empty()) out += ',';
    out += name;
  }
  return out;
}

std::string CsvRow(const RunReport& run) {
  const json j = ToJson(run);
  std::string out;
  bool first = true;
  for (const auto& [name, ptr] : CsvColumns()) {
    if (!first) out += ',';
    first = false;
    const json::json_pointer p(ptr);
    out += j.contains(p) ? Cell(j.at(p)) : "";
  }
  return out;
}

namespace {

// "lockbench client 0.1.0: n=100 -> 127.0.0.1:47115 (...)" and the setup.
void TextHeader(const RunReport& run, std::ostream& os) {
  const LoadConfig& c = run.config;
  const bool open = c.rate > 0;
  std::string target = c.endpoint.ToString();
  if (c.endpoint.port != run.given_port) {
    target += " (port " + std::to_string(run.given_port) +
              " byte-swapped, as the kit does; --real-port to use it as is)";
  }
  os << "lockbench client " << kToolVersion << ": n=" << c.workload.n << " -> " << target << "\n";
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "  %s loop%s, %u threads, %s connections, read ratio %.2f, %s, "
      "seed %llu\n",
      open ? "open" : "closed",
      open ? (" at " + std::to_string(static_cast<long long>(c.rate)) + " req/s").c_str() : "",
      c.threads, c.keepalive ? "keep-alive" : "per-request", c.workload.read_ratio,
      c.workload.dist.ToString().c_str(), static_cast<unsigned long long>(c.workload.seed));
  os << buf;
}

// "requests N, ok N, errors N (kind N, ...)" and the window.
void TextCounts(const RunReport& run, std::ostream& os) {
  const LoadResult& r = run.result;
  char buf[256];
  std::snprintf(buf, sizeof buf, "  requests %llu, ok %llu, errors %llu",
                static_cast<unsigned long long>(r.requests), static_cast<unsigned long long>(r.ok),
                static_cast<unsigned long long>(r.total_errors()));
  os << buf;
  if (r.total_errors() > 0) {
    os << " (";
    bool first = true;
    for (int k = 1; k < kNumErrorKinds; ++k) {
      if (r.errors[k] == 0) continue;
      if (!first) os << ", ";
      first = false;
      os << ErrorKindName(static_cast<ErrorKind>(k)) << " " << r.errors[k];
    }
    os << ")";
  }
  os << "\n";
  std::snprintf(
      buf, sizeof buf, "  elapsed %.3f s, throughput %.0f req/s%s\n", r.elapsed_s,
      r.throughput_rps(),
      run.config.warmup_s > 0
          ? (" (after " + std::to_string(r.warmup_requests) + " warm-up requests)").c_str()
          : "");
  os << buf;
}

void TextLatency(const char* label, const LatencyHistogram& h, std::ostream& os) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "  %s us: mean %.1f  p50 %.1f  p90 %.1f  p95 %.1f  p99 %.1f  "
                "p99.9 %.1f  max %.1f\n",
                label, h.mean() / 1e3, Us(h.Percentile(0.5)), Us(h.Percentile(0.9)),
                Us(h.Percentile(0.95)), Us(h.Percentile(0.99)), Us(h.Percentile(0.999)),
                Us(h.max()));
  os << buf;
}

}  // namespace

std::string ToText(const RunReport& run) {
  const LoadConfig& c = run.config;
  const LoadResult& r = run.result;
  const bool open = c.rate > 0;
  std::ostringstream os;
  TextHeader(run, os);
  TextCounts(run, os);
  TextLatency(open ? "latency (from intended send)" : "latency", r.latency, os);
  if (open) {
    TextLatency("uncorrected latency (from send)", r.uncorrected, os);
    if (IsSaturated(run)) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "  SATURATED: achieved %.0f of %.0f req/s target\n",
                    r.elapsed_s > 0 ? static_cast<double>(r.requests) / r.elapsed_s : 0, c.rate);
      os << buf;
    }
  }
  if (run.with_timeline) {
    os << "  timeline (s: ok/errors):";
    for (std::size_t s = 0; s < r.timeline.size(); ++s) {
      os << " " << s << ":" << r.timeline[s].ok << "/" << r.timeline[s].errors;
    }
    os << "\n";
  }
  if (!r.first_error.empty()) os << "  first error: " << r.first_error << "\n";
  return os.str();
}

}  // namespace kv
