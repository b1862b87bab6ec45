#include "common/server_options.h"

#include <CLI/CLI.hpp>

#include <charconv>
#include <iostream>

#include "common/net.h"
#include "common/strategy_registry.h"
#include "common/store_striped.h"

namespace kv {
namespace {

// A CLI11 transform enforcing ParseDecimal(): on success it rewrites the value
// to its digits without leading zeros, so CLI11's own conversion (which reads
// "010" as octal and "0x10" as hex) only ever sees plain decimal.
CLI::Validator Decimal(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& value) -> std::string {
        uint64_t parsed = 0;
        const std::string why = ParseDecimal(value, min, max, &parsed);
        if (!why.empty()) return "'" + value + "' " + why;
        value = std::to_string(parsed);
        return std::string();
      },
      std::to_string(min) + ".." + std::to_string(max), "DECIMAL");
}

const char* IoName(IoKind io) {
  switch (io) {
    case IoKind::kThreadPerConnection:
      return "thread";
    case IoKind::kPool:
      return "pool";
    case IoKind::kEpoll:
      return "epoll";
  }
  return "?";
}

}  // namespace

std::string ParseDecimal(const std::string& text, uint64_t min, uint64_t max, uint64_t* out) {
  const std::string allowed = "allowed " + std::to_string(min) + ".." + std::to_string(max);
  if (text.empty()) return "is empty; " + allowed;
  for (const char c : text) {
    if (c < '0' || c > '9') {
      return "is not a decimal integer (digits only); " + allowed;
    }
  }
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return "is out of range; " + allowed;
  }
  *out = value;
  return "";
}

ParseOutcome ParseServerOptions(int argc, char** argv, const std::string& program,
                                const std::string& strategy, ServerOptions* o,
                                GenericFlags* generic) {
  CLI::App app{program + ": the ECE 420 Lab 2 shared-array server, strategy " + strategy +
                   ".\nServes 100-byte requests 'pos-is_read-text' "
                   "from the course kit's client and attacker (and ours).",
               program};
  app.get_formatter()->column_width(34);
  int port = 0;
  CLI::Option* n_opt = app.add_option("n", o->n, "array size: number of strings")
                           ->transform(Decimal(1, kMaxArraySize));
  CLI::Option* ip_opt = app.add_option("ip", o->ip, "numeric IPv4 or IPv6 address to listen on")
                            ->check([](const std::string& ip) {
                              SocketAddress a;
                              return ParseSocketAddress(ip, 0, &a)
                                         ? std::string()
                                         : "'" + ip + "' is not a numeric IPv4/IPv6 address";
                            });
  CLI::Option* port_opt = app.add_option("port", port,
                                         "TCP port (decimal; 03000 is 3000); the server also "
                                         "listens on its byte-swapped twin, where the kit client "
                                         "connects")
                              ->transform(Decimal(1, 65535));
  if (generic == nullptr) {
    n_opt->required();
    ip_opt->required();
    port_opt->required();
  } else {
    app.add_option("--strategy", generic->strategy, "locking strategy, one of: " + StrategyNames())
        ->check([](const std::string& name) {
          return FindStrategy(name) != nullptr
                     ? std::string()
                     : "'" + name + "' is not a strategy; allowed: " + StrategyNames();
        });
    app.add_option("--stripes", generic->stripes,
                   "lock stripes for striped-* strategies (default " +
                       std::to_string(kDefaultStripes) + ", clamped to n)")
        ->transform(Decimal(1, kMaxStripes));
    app.add_flag("--list-strategies", generic->list,
                 "print every strategy with a one-line description and exit");
  }
  app.add_option("--delay-us", o->delay_us,
                 "artificial delay before each array get/set, microseconds "
                 "(the kit's usleep(10); 0 disables)")
      ->capture_default_str()
      ->transform(Decimal(0, 1'000'000));
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
  app.add_option("--batch", o->log.batch_size, "requests per line of the timing file")
      ->capture_default_str()
      ->transform(Decimal(1, 1'000'000'000));
  app.add_option("--time-file", o->log.time_file,
                 "regular file the batch means (seconds, %e) are appended to")
      ->capture_default_str();
  app.add_option("--trace", o->log.trace_file,
                 "write a CSV row per request: pos,is_read,latency_ns,wait_ns,"
                 "hold_ns,queue_ns,delay_ns,cpu_wait_ns");
  app.add_option("--trace-limit", o->log.trace_limit,
                 "stop tracing after this many rows (0: no limit)")
      ->capture_default_str()
      ->transform(Decimal(0, 1'000'000'000'000));
  app.add_flag("!--no-twin", o->kit_twin, "do not listen on the byte-swapped kit port");
  app.add_option("--idle-timeout-ms", o->idle_timeout_ms,
                 "drop a connection that sends nothing for this long")
      ->capture_default_str()
      ->transform(Decimal(1, 3'600'000));
  app.add_option("--frame-timeout-ms", o->frame_timeout_ms,
                 "drop a connection whose 100-byte frame is not complete this "
                 "long after its first byte (slow or trickling clients)")
      ->capture_default_str()
      ->transform(Decimal(1, 3'600'000));
  app.add_option("--write-timeout-ms", o->write_timeout_ms,
                 "drop a connection that does not take its reply for this long")
      ->capture_default_str()
      ->transform(Decimal(1, 3'600'000));
  app.add_option("--max-connections", o->max_connections,
                 "connections served at once; beyond it a new connection gets "
                 "'ERROR server busy' and is closed")
      ->capture_default_str()
      ->transform(Decimal(1, 1'000'000));
  app.add_option("--timer-slack-ns", o->timer_slack_ns,
                 "set the threads' timer slack (Linux default 50000 makes "
                 "usleep(10) last ~60 us); default: leave it")
      ->transform(Decimal(1, 1'000'000'000));
  std::string io = IoName(o->io);
  app.add_option("--io", io,
                 "I/O model: thread (a thread per connection, the lab's), "
                 "pool (fixed workers fed by the acceptor), epoll (one event "
                 "loop per core, lock work on workers)")
      ->capture_default_str()
      ->check(CLI::IsMember({"thread", "pool", "epoll"}));
  app.add_option("--workers", o->workers, "worker threads for --io pool/epoll (0: default, 64)")
      ->capture_default_str()
      ->transform(Decimal(0, 4096));
  bool quiet = false;
  bool verbose = false;
  app.add_flag("-q,--quiet", quiet,
               "no warnings (the ready line, fatal errors and the summary stay)");
  app.add_flag("-v,--verbose", verbose, "log every rejected request to stderr");
  app.footer(
      "Numbers are decimal integers only (as the kit's atoi reads them: 03000 "
      "is 3000); anything else, or a value out of range, is refused.\n"
      "Timing: after every --batch valid requests the mean 'memory access "
      "latency' (end of receive to start of send, seconds, printf %e) is "
      "appended to the timing file, as the course kit does.\nSignals: SIGINT, "
      "SIGTERM and SIGHUP stop the server gracefully (summary line, exit 0); "
      "SIGPIPE is ignored.\nExit status: 0 after a stop signal, 1 if the "
      "address cannot be bound or a later failure, 2 on bad arguments "
      "(including a timing/trace path that cannot work).");
  auto usage_error = [&](const std::string& what) {
    std::cerr << program << ": error: " << what << " (see '" << program << " --help')\n";
    return ParseOutcome{ParseOutcome::Action::kExit, 2};
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return {ParseOutcome::Action::kExit, 0};
  } catch (const CLI::ParseError& e) {
    // One line: the reason names the option, the value and what is allowed.
    std::string what = e.what();
    for (char& c : what) {
      if (c == '\n') c = ' ';
    }
    return usage_error(what);
  }
  if (generic != nullptr && !generic->list) {
    if (generic->strategy.empty()) return usage_error("--strategy is required");
    for (const CLI::Option* opt : {n_opt, ip_opt, port_opt}) {
      if (opt->count() == 0) {
        return usage_error(opt->get_name() + " is required (usage: " + program +
                           " --strategy NAME [OPTIONS] n ip port)");
      }
    }
  }
  o->io = io == "pool"    ? IoKind::kPool
          : io == "epoll" ? IoKind::kEpoll
                          : IoKind::kThreadPerConnection;
  o->port = static_cast<uint16_t>(port);
  o->delay_mode = delay_mode == "precise" ? DelayMode::kPrecise : DelayMode::kUsleep;
  o->verbosity = quiet ? 0 : (verbose ? 2 : 1);
  return {};
}

}  // namespace kv
