// client: the kit-compatible lab client, a load generator and a consistency
// checker for the lab protocol. See docs/client.md.
//
//   client <n> <ip> <port> [options]
//
// Exit status: 0 every request of the run got its reply (or the check found
// the server consistent); 1 with one line on stderr saying why: the server is
// unreachable, went away during the run, some request failed, a run hit its
// time limit, or the check found a violation or could not complete; 2 a bad
// argument (one line on stderr naming the option, the value and what is
// allowed; nothing is sent).
#include <csignal>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/checker.h"
#include "client/client_options.h"
#include "client/lab_connection.h"
#include "client/load_generator.h"
#include "client/report.h"

namespace {

using kv::ClientOptions;
using kv::OutputFormat;

// Appended to "cannot reach the server" in kit-port mode.
std::string PortHint(const ClientOptions& o) {
  if (o.real_port) return "";
  return " (port " + std::to_string(o.given_port) +
         " byte-swapped, as the kit client does; add --real-port to connect to " +
         std::to_string(o.given_port) + " itself)";
}

int Fail(const std::string& line) {
  std::fprintf(stderr, "client: %s\n", line.c_str());
  return 1;
}

// ---- the checker -------------------------------------------------------

nlohmann::json CheckJson(const ClientOptions& o, const kv::CheckConfig& cfg,
                         const kv::CheckResult& r) {
  nlohmann::json violations = nlohmann::json::array();
  for (const auto& v : r.violations) {
    violations.push_back(
        {{"phase", v.phase}, {"pos", v.pos}, {"read", v.read}, {"allowed", v.allowed}});
  }
  return {{"tool", kv::kToolName},
          {"version", kv::kToolVersion},
          {"mode", "check"},
          {"config",
           {{"n", cfg.n},
            {"host", cfg.endpoint.host},
            {"port", o.given_port},
            {"connect_port", cfg.endpoint.port},
            {"connection", cfg.keepalive ? "keepalive" : "per-request"},
            {"attack_requests", cfg.attack_requests},
            {"seed", cfg.seed},
            {"time_limit_s", cfg.time_limit_s}}},
          {"consistent", r.consistent()},
          {"replies_checked", r.replies_checked},
          {"violations_total", r.violations_total},
          {"violations", violations},
          {"io_errors", r.io_errors},
          {"first_io_error", r.first_io_error},
          {"non_initial_baselines", r.non_initial_baselines},
          {"phases", r.phase_lines}};
}

void PrintCheckText(const ClientOptions& o, const kv::CheckResult& r) {
  std::printf("check: n=%llu -> %s, %s connections\n", static_cast<unsigned long long>(o.n),
              o.endpoint.ToString().c_str(), o.keepalive ? "keep-alive" : "per-request");
  for (const auto& line : r.phase_lines) std::printf("  %s\n", line.c_str());
  for (const auto& v : r.violations) {
    std::printf("VIOLATION [%s] pos %llu: read '%s'\n  allowed: %s\n", v.phase.c_str(),
                static_cast<unsigned long long>(v.pos), v.read.c_str(), v.allowed.c_str());
  }
  if (r.io_errors > 0) {
    std::printf("check: INCOMPLETE: %llu request(s) failed (first: %s)\n",
                static_cast<unsigned long long>(r.io_errors), r.first_io_error.c_str());
  }
  if (r.non_initial_baselines > 0) {
    std::printf(
        "  note: %llu position(s) did not hold their initial value at the "
        "start (server not fresh); those values were allowed too\n",
        static_cast<unsigned long long>(r.non_initial_baselines));
  }
  if (r.violations_total > 0) {
    std::printf("check: INCONSISTENT: %llu violation(s) in %llu replies\n",
                static_cast<unsigned long long>(r.violations_total),
                static_cast<unsigned long long>(r.replies_checked));
  } else if (r.io_errors == 0) {
    std::printf("check: CONSISTENT: %llu replies verified\n",
                static_cast<unsigned long long>(r.replies_checked));
  }
}

int RunCheckMode(const ClientOptions& o) {
  kv::CheckConfig cfg;
  cfg.n = o.n;
  cfg.endpoint = o.endpoint;
  cfg.keepalive = o.keepalive;
  cfg.timeout_ms = o.timeout_ms;
  cfg.seed = o.spec.seed == 0 ? 1 : o.spec.seed;
  cfg.attack_requests = o.check_requests;
  cfg.time_limit_s = o.time_limit_s;
  kv::CheckResult result;
  kv::RunCheck(cfg, &result);
  // Unreachable only if no connection was ever accepted: a server that
  // answers every request wrongly (ERROR replies, long replies) is reached.
  if (result.replies_checked == 0 && result.io_errors > 0 && result.connected == 0) {
    return Fail("cannot reach the server: " + result.first_io_error + PortHint(o));
  }
  if (o.format == OutputFormat::kJson) {
    std::cout << CheckJson(o, cfg, result).dump(2) << "\n";
  } else {
    PrintCheckText(o, result);
  }
  std::cout << std::flush;
  if (result.violations_total > 0) {
    return Fail("the check found " + std::to_string(result.violations_total) + " violation(s)");
  }
  if (result.io_errors > 0) {
    return Fail("the check is incomplete: " + std::to_string(result.io_errors) +
                " request(s) failed (first: " + result.first_io_error + ")");
  }
  return 0;
}

// ---- load runs ---------------------------------------------------------

kv::RunReport MakeRun(const ClientOptions& o, uint32_t threads) {
  kv::RunReport run;
  kv::LoadConfig& c = run.config;
  c.workload = o.spec;
  c.endpoint = o.endpoint;
  c.threads = threads;
  c.keepalive = o.keepalive;
  c.connections = o.connections;
  c.requests = o.requests;
  c.duration_s = o.duration_s;
  c.warmup_s = o.warmup_s;
  c.rate = o.rate;
  c.timeout_ms = o.timeout_ms;
  c.time_limit_s = o.time_limit_s;
  c.progress = !o.quiet;
  c.start_at_unix_ns = o.start_at_ns;
  run.given_port = o.given_port;
  run.with_timeline = o.timeline;
  return run;
}

// Whether a finished run point failed as a whole, and why.
kv::Status RunFailure(const kv::RunReport& run) {
  const kv::LoadResult& r = run.result;
  if (r.server_gone) {
    return kv::Status::Failed("the server went away during the run (" + r.gone_detail + ") after " +
                              std::to_string(r.ok) + " successful request(s); stopped");
  }
  if (r.total_errors() > 0) {
    return kv::Status::Failed(std::to_string(r.total_errors()) + " of " +
                              std::to_string(r.requests) + " request(s) failed with " +
                              std::to_string(run.config.threads) +
                              " thread(s) (first: " + r.first_error + ")");
  }
  if (r.time_limit_hit) {
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", run.config.time_limit_s);
    return kv::Status::Failed(std::string("the run hit its time limit of ") + limit + " s after " +
                              std::to_string(r.ok) + " of " + std::to_string(run.config.requests) +
                              " request(s) (--time-limit)");
  }
  return kv::Status::OK();
}

void PrintRun(const ClientOptions& o, const kv::RunReport& run, nlohmann::json* all) {
  switch (o.format) {
    case OutputFormat::kJson:
      all->push_back(kv::ToJson(run));
      break;
    case OutputFormat::kCsv:
      std::cout << kv::CsvRow(run) << "\n" << std::flush;
      break;
    case OutputFormat::kText:
      std::cout << kv::ToText(run) << std::flush;
      break;
  }
}

// One run point's latency histogram with its raw buckets ([lo_ns, hi_ns,
// count] for every non-empty bucket): several agents' histograms merge exactly.
nlohmann::json HistogramJson(const kv::RunReport& run) {
  const kv::LatencyHistogram& h = run.result.latency;
  nlohmann::json buckets = nlohmann::json::array();
  for (std::size_t i = 0; i < kv::LatencyHistogram::NumBuckets(); ++i) {
    if (h.bucket_count(i) == 0) continue;
    uint64_t lo = 0, hi = 0;
    kv::LatencyHistogram::BucketRange(i, &lo, &hi);
    buckets.push_back({lo, hi, h.bucket_count(i)});
  }
  return {{"threads", run.config.threads},
          {"count", h.count()},
          {"sum_ns", h.sum()},
          {"min_ns", h.min()},
          {"max_ns", h.max()},
          {"ok", run.result.ok},
          {"elapsed_s", run.result.elapsed_s},
          {"buckets", buckets}};
}

int RunLoadMode(const ClientOptions& o) {
  kv::Status failure;  // the first reason to exit 1, printed once at the end
  if (o.format == OutputFormat::kCsv) std::cout << kv::CsvHeader() << "\n" << std::flush;
  nlohmann::json all = nlohmann::json::array();
  nlohmann::json histograms = nlohmann::json::array();
  for (uint32_t t : o.threads) {
    kv::RunReport run = MakeRun(o, t);
    kv::RunLoad(run.config, &run.result);
    if (run.result.unreachable()) {
      return Fail("cannot reach the server: " + run.result.gone_detail + PortHint(o));
    }
    PrintRun(o, run, &all);
    histograms.push_back(HistogramJson(run));
    if (failure.ok()) failure = RunFailure(run);
    if (run.result.server_gone) break;
  }
  if (o.format == OutputFormat::kJson) {
    std::cout << (o.thread_list ? all : all[0]).dump(2) << "\n";
  }
  std::cout << std::flush;
  if (!o.histogram_out.empty()) {
    std::ofstream f(o.histogram_out, std::ios::trunc);
    f << nlohmann::json{{"tool", kv::kToolName},
                        {"version", kv::kToolVersion},
                        {"unit", "ns"},
                        {"runs", histograms}}
             .dump()
      << "\n";
    f.close();  // flushes; a full disk shows here as failbit
    if (f.fail()) return Fail("cannot write --histogram-out " + o.histogram_out);
  }
  return failure.ok() ? 0 : Fail(failure.message());
}

int RunClient(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // belt and braces: sends use MSG_NOSIGNAL
  ClientOptions options;
  if (kv::Status s = kv::ParseClientOptions(argc, argv, &options); !s.ok()) {
    // One line whatever the value held: control bytes (a newline in a value) are escaped.
    std::string message;
    for (const char c : s.message()) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x",
                      static_cast<unsigned>(static_cast<unsigned char>(c)));
        message += hex;
      } else {
        message += c;
      }
    }
    std::fprintf(stderr, "client: %s (client --help lists the options)\n", message.c_str());
    return 2;
  }
  if (!options.show.empty()) {
    std::fputs(options.show.c_str(), stdout);
    return 0;
  }
  // No probe connection: the workload's own first connections show whether
  // anyone listens (a kit-style server crashes on an empty connection).
  return options.check ? RunCheckMode(options) : RunLoadMode(options);
}

}  // namespace

int main(int argc, char** argv) {
  // Nothing is expected to throw past option parsing; if something does (e.g.
  // std::bad_alloc), say so in one line instead of std::terminate's abort.
  try {
    return RunClient(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "client: fatal: %s\n", e.what());
    return 1;
  }
}
