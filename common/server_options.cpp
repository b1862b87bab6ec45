#include "common/server_options.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "common/net.h"

namespace kv {

ParseOutcome ParseServerOptions(int argc, char** argv, const std::string& program,
                                const std::string& strategy,
                                ServerOptions* o) {
  CLI::App app{program + ": the ECE 420 Lab 2 shared-array server, strategy " +
                   strategy + ".\nServes 100-byte requests 'pos-is_read-text' "
                   "from the course kit's client and attacker (and ours).",
               program};
  app.get_formatter()->column_width(34);
  int port = 0;
  app.add_option("n", o->n, "array size: number of strings")
      ->required()
      ->check(CLI::Range(std::size_t{1}, kMaxArraySize));
  app.add_option("ip", o->ip, "numeric IPv4 or IPv6 address to listen on")
      ->required()
      ->check([](const std::string& ip) {
        SocketAddress a;
        return ParseSocketAddress(ip, 0, &a)
                   ? std::string()
                   : "'" + ip + "' is not a numeric IPv4/IPv6 address";
      });
  app.add_option("port", port,
                 "TCP port; the server also listens on its byte-swapped twin, "
                 "where the kit client connects")
      ->required()
      ->check(CLI::Range(1, 65535));
  app.add_option("--delay-us", o->delay_us,
                 "artificial delay before each array get/set, microseconds "
                 "(the kit's usleep(10); 0 disables)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000}));
  std::string delay_mode = "usleep";
  app.add_option("--delay-mode", delay_mode,
                 "usleep: the kit's relative sleep (lasts the timer slack "
                 "longer); precise: absolute-deadline sleep with 1 ns timer "
                 "slack, then a spin of at most 4 us to the deadline "
                 "(docs/performance.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"usleep", "precise"}));
  app.add_flag("!--no-timing", o->timing,
               "measurement switch: record nothing (no timing file lines, no "
               "trace, no latency split in the summary), to measure what "
               "timing costs");
  app.add_option("--batch", o->log.batch_size,
                 "requests per line of the timing file")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1'000'000'000}));
  app.add_option("--time-file", o->log.time_file,
                 "file the batch means (seconds, %e) are appended to")
      ->capture_default_str();
  app.add_option("--trace", o->log.trace_file,
                 "write a CSV row per request: pos,is_read,latency_ns,wait_ns,"
                 "hold_ns");
  app.add_option("--trace-limit", o->log.trace_limit,
                 "stop tracing after this many rows (0: no limit)")
      ->capture_default_str();
  app.add_flag("!--no-twin", o->kit_twin,
               "do not listen on the byte-swapped kit port");
  app.add_option("--idle-timeout-ms", o->idle_timeout_ms,
                 "drop a connection that sends nothing for this long")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}));
  app.add_option("--frame-timeout-ms", o->frame_timeout_ms,
                 "drop a connection whose 100-byte frame is not complete this "
                 "long after its first byte (slow or trickling clients)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}));
  app.add_option("--write-timeout-ms", o->write_timeout_ms,
                 "drop a connection that does not take its reply for this long")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}));
  app.add_option("--max-connections", o->max_connections,
                 "connections served at once; beyond it a new connection gets "
                 "'ERROR server busy' and is closed")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1'000'000}));
  app.add_option("--timer-slack-ns", o->timer_slack_ns,
                 "set the threads' timer slack (Linux default 50000 makes "
                 "usleep(10) last ~60 us); default: leave it")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000}));
  bool quiet = false;
  bool verbose = false;
  app.add_flag("-q,--quiet", quiet,
               "no warnings (the ready line, fatal errors and the summary stay)");
  app.add_flag("-v,--verbose", verbose, "log every rejected request to stderr");
  app.footer(
      "Timing: after every --batch valid requests the mean 'memory access "
      "latency' (end of receive to start of send, seconds, printf %e) is "
      "appended to the timing file, as the course kit does.\nExit status: 0 "
      "after SIGINT/SIGTERM, 1 if the address cannot be bound, 2 on bad "
      "arguments.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return {ParseOutcome::Action::kExit, 0};
  } catch (const CLI::ParseError& e) {
    // A usage error gets the reason and the one-line usage, not the manual.
    std::cerr << program << ": error: " << e.what() << "\nUsage: " << program
              << " [OPTIONS] n ip port\nRun '" << program
              << " --help' for every option.\n";
    return {ParseOutcome::Action::kExit, 2};
  }
  o->port = static_cast<uint16_t>(port);
  o->delay_mode =
      delay_mode == "precise" ? DelayMode::kPrecise : DelayMode::kUsleep;
  o->verbosity = quiet ? 0 : (verbose ? 2 : 1);
  return {};
}

}  // namespace kv
