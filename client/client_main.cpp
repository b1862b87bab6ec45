// client: the kit-compatible lab client, a load generator and a consistency
// checker for the lab protocol. See docs/client.md.
//
//   client <n> <ip> <port> [options]
//
// Exit status: 0 every request of the run got its reply (or the check found
// the server consistent); 1 with one line on stderr saying why: the server is
// unreachable, went away during the run, some request failed, or the check
// found a violation or could not complete; 2 bad arguments.
#include <charconv>
#include <csignal>
#include <exception>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "client/checker.h"
#include "client/lab_connection.h"
#include "client/load_generator.h"
#include "client/report.h"
#include "client/workload.h"

namespace {

constexpr const char* kUsage =
    "usage: client <n> <ip> <port> [options]   (client --help lists the options)";
constexpr uint32_t kMaxThreads = 4096;

int UsageError(const std::string& message) {
  std::fprintf(stderr, "client: %s\n%s\n", message.c_str(), kUsage);
  return 2;
}

// Parses "8" or "1,2,4,8" into thread counts, each in 1..kMaxThreads.
bool ParseThreadList(const std::string& text, std::vector<uint32_t>* out,
                     std::string* error) {
  out->clear();
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos
                                                       : comma - start);
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() ||
        v < 1 || v > kMaxThreads) {
      *error = "--threads: '" + item + "' is not a thread count in 1.." +
               std::to_string(kMaxThreads) + " (give T or a list like 1,2,4,8)";
      return false;
    }
    out->push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return !out->empty();
}

nlohmann::json CheckJson(const kv::CheckConfig& cfg, uint16_t given_port,
                         const kv::CheckResult& r) {
  nlohmann::json violations = nlohmann::json::array();
  for (const auto& v : r.violations) {
    violations.push_back({{"phase", v.phase}, {"pos", v.pos}, {"read", v.read},
                          {"allowed", v.allowed}});
  }
  return {{"tool", kv::kToolName},
          {"version", kv::kToolVersion},
          {"mode", "check"},
          {"config",
           {{"n", cfg.n},
            {"host", cfg.endpoint.host},
            {"port", given_port},
            {"connect_port", cfg.endpoint.port},
            {"connection", cfg.keepalive ? "keepalive" : "per-request"},
            {"attack_requests", cfg.attack_requests},
            {"seed", cfg.seed}}},
          {"consistent", r.consistent()},
          {"replies_checked", r.replies_checked},
          {"violations_total", r.violations_total},
          {"violations", violations},
          {"io_errors", r.io_errors},
          {"first_io_error", r.first_io_error},
          {"non_initial_baselines", r.non_initial_baselines},
          {"phases", r.phase_lines}};
}

int RunClient(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // belt and braces: sends use MSG_NOSIGNAL

  CLI::App app{
      "lockbench client: the ECE 420 Lab 2 kit client (no options), a load "
      "generator, and a consistency checker (--check).\n"
      "Like the kit, it connects to the byte-swapped twin of <port> unless "
      "--real-port is given."};
  app.set_version_flag("--version", kv::kToolVersion);

  uint64_t n = 0;
  std::string ip;
  int port = 0;
  std::string threads_text = "100";
  uint64_t requests = 0;
  double duration_s = 0, warmup_s = 0, rate = 0, read_ratio = 0.7;
  std::string connection = "per-request";
  uint32_t connections = 0;
  std::string dist_text = "uniform", text_len_text = "kit";
  uint64_t seed = 0;
  std::string format = "text";
  bool timeline = false, quiet = false, check = false, real_port = false;
  uint32_t check_requests = 125;
  int timeout_ms = 5000;

  app.add_option("n", n, "array size (1..10,000,000)")
      ->required()
      ->check(CLI::Range(uint64_t{1}, uint64_t{10'000'000}));
  app.add_option("ip", ip, "server IPv4 or IPv6 address (numeric)")->required();
  app.add_option("port", port, "server port (1..65535), as given to the server")
      ->required()
      ->check(CLI::Range(1, 65535));
  auto* threads_opt = app.add_option(
      "--threads", threads_text,
      "client threads T, or a comma list (1,2,4,8,16,32): one run per point "
      "[100]");
  auto* requests_opt = app.add_option(
      "--requests", requests,
      "total measured requests per run [1000 unless --duration is given]")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50));
  auto* duration_opt = app.add_option("--duration", duration_s,
                                      "run for S seconds after warm-up")
                           ->check(CLI::Range(1e-3, 86400.0));
  app.add_option("--warmup", warmup_s, "seconds excluded from the results [0]")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--connection", connection,
                 "per-request (kit) or keepalive [per-request]")
      ->check(CLI::IsMember({"per-request", "keepalive"}));
  app.add_option("--connections", connections,
                 "keep-alive: total connections, >= threads; each thread uses "
                 "its share in turn [threads]")
      ->check(CLI::Range(1u, 65536u));
  app.add_option("--rate", rate,
                 "open loop: total requests/s; latency from the intended send "
                 "time (wrk2)")
      ->check(CLI::Range(1e-3, 1e9));
  app.add_option("--read-ratio", read_ratio, "fraction of reads, 0..1 [0.7]")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--dist", dist_text,
                 "positions: uniform | zipf:S | hotspot:KEYFRAC:REQFRAC [uniform]");
  app.add_option("--text-len", text_len_text,
                 "write text: kit | fixed:L | gamma:K:THETA (capped to fit "
                 "the frame) [kit]");
  app.add_option("--seed", seed,
                 "workload seed; 0 = the kit's (thread t seeds rand_r with t) [0]");
  app.add_option("--format", format, "text | json | csv [text]")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  app.add_flag("--timeline", timeline, "per-second throughput in the output");
  app.add_flag("--quiet", quiet, "no progress lines on stderr");
  app.add_flag("--check", check,
               "run the consistency checker instead of a load run");
  app.add_option("--check-requests", check_requests,
                 "checker: requests per attacker thread [125, as the kit]")
      ->check(CLI::Range(1u, 10'000'000u));
  app.add_flag("--real-port", real_port,
               "connect to <port> itself, not its byte-swapped twin");
  app.add_option("--timeout-ms", timeout_ms,
                 "timeout of every connect, send and receive [5000]")
      ->check(CLI::Range(1, 600'000));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return UsageError(e.what());
  }

  std::vector<uint32_t> thread_list;
  std::string error;
  if (!ParseThreadList(threads_text, &thread_list, &error)) return UsageError(error);
  kv::WorkloadSpec spec;
  spec.n = n;
  spec.read_ratio = read_ratio;
  spec.seed = seed;
  if (kv::Status s = kv::Distribution::Parse(dist_text, &spec.dist); !s.ok()) {
    return UsageError(s.message());
  }
  if (kv::Status s = kv::TextLength::Parse(text_len_text, &spec.text); !s.ok()) {
    return UsageError(s.message());
  }
  const uint16_t given_port = static_cast<uint16_t>(port);
  const uint16_t connect_port = real_port ? given_port : kv::KitPortTwin(given_port);
  kv::Endpoint endpoint;
  if (kv::Status s = kv::Endpoint::Make(ip, connect_port, &endpoint); !s.ok()) {
    return UsageError("ip: " + s.message());
  }
  const bool keepalive = connection == "keepalive";
  if (connections > 0) {
    if (!keepalive) return UsageError("--connections needs --connection keepalive");
    for (uint32_t t : thread_list) {
      if (connections < t) {
        return UsageError("--connections " + std::to_string(connections) +
                          " is fewer than --threads " + std::to_string(t));
      }
    }
  }
  if (check && (threads_opt->count() > 0 || duration_opt->count() > 0 ||
                rate > 0 || timeline)) {
    return UsageError("--check takes only --connection, --check-requests, "
                      "--seed, --format, --real-port and --timeout-ms");
  }
  if (!check && requests_opt->count() == 0 && duration_opt->count() > 0) {
    requests = 0;  // time-bounded run
  } else if (requests_opt->count() == 0) {
    requests = 1000;  // the kit's COM_NUM_REQUEST
  }

  // No probe connection: the workload's own first connections show whether
  // anyone listens (a kit-style server crashes on an empty connection).
  std::string hint;
  if (!real_port) {
    hint = " (port " + std::to_string(given_port) +
           " byte-swapped, as the kit client does; add --real-port to connect to " +
           std::to_string(given_port) + " itself)";
  }

  if (check) {
    kv::CheckConfig cfg;
    cfg.n = n;
    cfg.endpoint = endpoint;
    cfg.keepalive = keepalive;
    cfg.timeout_ms = timeout_ms;
    cfg.seed = seed == 0 ? 1 : seed;
    cfg.attack_requests = check_requests;
    kv::CheckResult result;
    kv::RunCheck(cfg, &result);
    if (result.replies_checked == 0 && result.io_errors > 0) {
      std::fprintf(stderr, "client: cannot reach the server: %s%s\n",
                   result.first_io_error.c_str(), hint.c_str());
      return 1;
    }
    if (format == "json") {
      std::cout << CheckJson(cfg, given_port, result).dump(2) << "\n";
    } else {
      std::printf("check: n=%llu -> %s, %s connections\n",
                  static_cast<unsigned long long>(n), endpoint.ToString().c_str(),
                  keepalive ? "keep-alive" : "per-request");
      for (const auto& line : result.phase_lines) std::printf("  %s\n", line.c_str());
      for (const auto& v : result.violations) {
        std::printf("VIOLATION [%s] pos %llu: read '%s'\n  allowed: %s\n",
                    v.phase.c_str(), static_cast<unsigned long long>(v.pos),
                    v.read.c_str(), v.allowed.c_str());
      }
      if (result.io_errors > 0) {
        std::printf("check: INCOMPLETE: %llu request(s) failed (first: %s)\n",
                    static_cast<unsigned long long>(result.io_errors),
                    result.first_io_error.c_str());
      }
      if (result.non_initial_baselines > 0) {
        std::printf("  note: %llu position(s) did not hold their initial value "
                    "at the start (server not fresh); those values were "
                    "allowed too\n",
                    static_cast<unsigned long long>(result.non_initial_baselines));
      }
      if (result.violations_total > 0) {
        std::printf("check: INCONSISTENT: %llu violation(s) in %llu replies\n",
                    static_cast<unsigned long long>(result.violations_total),
                    static_cast<unsigned long long>(result.replies_checked));
      } else if (result.io_errors == 0) {
        std::printf("check: CONSISTENT: %llu replies verified\n",
                    static_cast<unsigned long long>(result.replies_checked));
      }
    }
    std::fflush(stdout);
    return result.consistent() ? 0 : 1;
  }

  std::string failure;  // the first reason to exit 1, printed once at the end
  if (format == "csv") std::cout << kv::CsvHeader() << "\n" << std::flush;
  nlohmann::json all = nlohmann::json::array();
  for (uint32_t t : thread_list) {
    kv::RunReport run;
    run.config.workload = spec;
    run.config.endpoint = endpoint;
    run.config.threads = t;
    run.config.keepalive = keepalive;
    run.config.connections = connections;
    run.config.requests = requests;
    run.config.duration_s = duration_s;
    run.config.warmup_s = warmup_s;
    run.config.rate = rate;
    run.config.timeout_ms = timeout_ms;
    run.config.progress = !quiet;
    run.given_port = given_port;
    run.with_timeline = timeline;
    kv::RunLoad(run.config, &run.result);
    const kv::LoadResult& r = run.result;
    if (r.unreachable()) {
      std::fprintf(stderr, "client: cannot reach the server: %s%s\n",
                   r.gone_detail.c_str(), hint.c_str());
      return 1;
    }
    if (format == "json") {
      all.push_back(kv::ToJson(run));
    } else if (format == "csv") {
      std::cout << kv::CsvRow(run) << "\n" << std::flush;
    } else {
      std::cout << kv::ToText(run) << std::flush;
    }
    if (r.server_gone) {
      failure = "the server went away during the run (" + r.gone_detail + ") after " +
                std::to_string(r.ok) + " successful request(s); stopped";
      break;
    }
    if (r.total_errors() > 0 && failure.empty()) {
      failure = std::to_string(r.total_errors()) + " of " + std::to_string(r.requests) +
                " request(s) failed with " + std::to_string(t) +
                " thread(s) (first: " + r.first_error + ")";
    }
  }
  if (format == "json") {
    if (threads_text.find(',') == std::string::npos && all.size() == 1) {
      std::cout << all[0].dump(2) << "\n";
    } else {
      std::cout << all.dump(2) << "\n";
    }
  }
  std::cout << std::flush;
  if (failure.empty()) return 0;
  std::fprintf(stderr, "client: %s\n", failure.c_str());
  return 1;
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
