#include "common/server_options.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <utility>
#include <vector>

#include "common/io_registry.h"
#include "common/net.h"
#include "common/numbers.h"
#include "common/strategy_registry.h"
#include "common/store_striped.h"

namespace kv {
namespace {

// A CLI11 transform enforcing the number rule (numbers.h): on success it
// rewrites the value to its digits without leading zeros, so CLI11's own
// conversion (which reads "010" as octal and "0x10" as hex) only ever sees
// plain decimal. CLI11 puts the option's name in front of the refusal.
CLI::Validator Decimal(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        uint64_t parsed = 0;
        if (Status s = ParseUnsigned(value, lo, hi, &parsed); !s.ok()) return s.message();
        value = std::to_string(parsed);
        return std::string();
      },
      std::to_string(lo) + ".." + std::to_string(hi), "DECIMAL");
}

// A numeric option or positional in [lo, hi]. Its default shows in --help
// when it is a value of the range, not a "not given" mark such as -1 or 0.
template <typename T>
CLI::Option* AddNumber(CLI::App* app, const std::string& name, T* value, const std::string& help,
                       uint64_t lo, uint64_t hi) {
  CLI::Option* option = app->add_option(name, *value, help);
  if (std::cmp_greater_equal(*value, lo) && std::cmp_less_equal(*value, hi)) {
    option->capture_default_str();
  }
  return option->transform(Decimal(lo, hi));
}

// Values parsed as text or flags and turned into ServerOptions fields after
// the parse.
struct RawFlags {
  int port = 0;
  std::string delay_mode = "usleep";
  std::string io;
  bool quiet = false;
  bool verbose = false;
};

// The positionals n, ip, port (required unless lockserver lists).
struct Positionals {
  CLI::Option* n = nullptr;
  CLI::Option* ip = nullptr;
  CLI::Option* port = nullptr;
};

Positionals AddPositionals(CLI::App* app, ServerOptions* o, RawFlags* raw) {
  Positionals p;
  p.n = AddNumber(app, "n", &o->n, "array size: number of strings", 1, kMaxArraySize);
  p.ip = app->add_option("ip", o->ip, "numeric IPv4 or IPv6 address to listen on")
             ->check([](const std::string& ip) {
               SocketAddress a;
               return ParseSocketAddress(ip, 0, &a)
                          ? std::string()
                          : "'" + ip + "' is not a numeric IPv4/IPv6 address";
             });
  p.port = AddNumber(app, "port", &raw->port,
                     "TCP port (decimal; 03000 is 3000); the server also listens on its "
                     "byte-swapped twin, where the kit client connects",
                     1, 65535);
  return p;
}

// lockserver's own flags.
void AddGenericFlags(CLI::App* app, GenericFlags* generic) {
  app->add_option("--strategy", generic->strategy, "locking strategy, one of: " + StrategyNames())
      ->check([](const std::string& name) {
        return FindStrategy(name) != nullptr
                   ? std::string()
                   : "'" + name + "' is not a strategy; allowed: " + StrategyNames();
      });
  AddNumber(app, "--stripes", &generic->stripes,
            "lock stripes for striped-* strategies (default " + std::to_string(kDefaultStripes) +
                ", clamped to n)",
            1, kMaxStripes);
  app->add_flag("--list-strategies", generic->list,
                "print every strategy with a one-line description and exit");
  app->add_flag("--list-locks", generic->list_locks,
                "print the locks liblockprof can swap in for a program's pthread locks "
                "(./lockbench profile --swap-lock) and exit");
}

// The artificial delay and the timing file.
void AddDelayAndTimingOptions(CLI::App* app, ServerOptions* o, RawFlags* raw) {
  AddNumber(app, "--delay-us", &o->delay_us,
            "artificial delay before each array get/set, microseconds "
            "(the kit's usleep(10); 0 disables)",
            0, kMaxDelayUs);
  app->add_option("--delay-mode", raw->delay_mode,
                  "usleep: the kit's relative sleep (lasts the timer slack longer); precise: "
                  "absolute-deadline sleep with 1 ns timer slack until --spin-ns before the "
                  "deadline, then a spin to it (docs/performance.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"usleep", "precise"}));
  AddNumber(app, "--spin-ns", &o->spin_ns,
            "--delay-mode precise: spin this long before the deadline (default: the timer "
            "wake-up latency measured at start; at or above the delay, a pause never sleeps)",
            0, 1'000'000'000);
  app->add_flag("!--no-timing", o->timing,
                "measurement switch: record nothing (no timing file lines, no trace, no latency "
                "split in the summary), to measure what timing costs");
  AddNumber(app, "--batch", &o->log.batch_size, "requests per line of the timing file", 1,
            1'000'000'000);
  app->add_option("--time-file", o->log.time_file,
                  "regular file the batch means (seconds, %e) are appended to")
      ->capture_default_str();
  app->add_option("--trace", o->log.trace_file,
                  "write a CSV row per request: pos,is_read,latency_ns,wait_ns,hold_ns,queue_ns,"
                  "delay_ns,cpu_wait_ns");
  AddNumber(app, "--trace-limit", &o->log.trace_limit,
            "stop tracing after this many rows (0: no limit)", 0, 1'000'000'000'000);
}

// Connections, threads and logging.
void AddConnectionOptions(CLI::App* app, ServerOptions* o, RawFlags* raw) {
  app->add_flag("!--no-twin", o->kit_twin, "do not listen on the byte-swapped kit port");
  struct Timeout {
    const char* name;
    int64_t* value;
    const char* help;
  };
  for (const Timeout& t : {
           Timeout{"--idle-timeout-ms", &o->idle_timeout_ms,
                   "drop a connection that sends nothing for this long"},
           Timeout{"--frame-timeout-ms", &o->frame_timeout_ms,
                   "drop a connection whose 100-byte frame is not complete this long after its "
                   "first byte (slow or trickling clients)"},
           Timeout{"--write-timeout-ms", &o->write_timeout_ms,
                   "drop a connection that does not take its reply for this long"},
       }) {
    AddNumber(app, t.name, t.value, t.help, 1, 3'600'000);
  }
  app->add_flag("--close-after-reply", o->close_after_reply,
                "one request per connection, closed by the server after its reply (the kit's "
                "own servers' way; the TIME_WAIT then stays on the server's side)");
  AddNumber(app, "--max-connections", &o->max_connections,
            "connections served at once; beyond it a new connection gets 'ERROR server busy' "
            "and is closed",
            1, kMaxConnections);
  AddNumber(app, "--timer-slack-ns", &o->timer_slack_ns,
            "set the threads' timer slack (Linux default 50000 makes usleep(10) last ~60 us); "
            "default: leave it",
            1, 1'000'000'000);
  raw->io = o->io->name;
  std::vector<std::string> io_names;
  for (const IoModelInfo& m : AllIoModels()) io_names.emplace_back(m.name);
  app->add_option("--io", raw->io, DescribeIoModels())
      ->capture_default_str()
      ->check(CLI::IsMember(io_names));
  AddNumber(app, "--workers", &o->workers,
            "worker threads for --io pool/epoll/uring (0: default, 64)", 0, kMaxWorkers);
  AddNumber(app, "--loops", &o->loops, "event loops for --io epoll/uring (0: one per core)", 0,
            kMaxLoops);
  app->add_flag("-q,--quiet", raw->quiet,
                "no warnings (the ready line, fatal errors and the summary stay)");
  app->add_flag("-v,--verbose", raw->verbose, "log every rejected request to stderr");
}

constexpr const char* kFooter =
    "Numbers are decimal digits only, read as the kit's atoi reads them (03000 is 3000); a sign, "
    "0x, a fraction or exponent, a space, or a value out of range is refused.\n"
    "Timing: after every --batch valid requests the mean 'memory access latency' (end of "
    "receive to start of send, seconds, printf %e) is appended to the timing file, as the "
    "course kit does.\nSignals: SIGINT, SIGTERM and SIGHUP stop the server gracefully "
    "(summary line, exit 0); SIGPIPE is ignored.\nExit status: 0 after a stop signal, 1 if the "
    "address cannot be bound or a later failure, 2 on bad arguments (including a timing/trace "
    "path that cannot work).";

ParseOutcome UsageError(const std::string& program, const std::string& what) {
  std::cerr << program << ": error: " << what << " (see '" << program << " --help')\n";
  return ParseOutcome{ParseOutcome::Action::kExit, 2};
}

// Runs the parser. Returns kRun, or kExit after --help or a usage error.
ParseOutcome RunParser(CLI::App* app, int argc, char** argv, const std::string& program) {
  try {
    app->parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app->help();
    return {ParseOutcome::Action::kExit, 0};
  } catch (const CLI::ParseError& e) {
    // One line: the reason names the option, the value and what is allowed.
    std::string what = e.what();
    for (char& c : what) {
      if (c == '\n') c = ' ';
    }
    return UsageError(program, what);
  }
  return {};
}

// lockserver: --strategy and the positionals are required unless it lists.
ParseOutcome CheckGenericRequired(const GenericFlags& generic, const Positionals& p,
                                  const std::string& program) {
  if (generic.list || generic.list_locks) return {};
  if (generic.strategy.empty()) return UsageError(program, "--strategy is required");
  for (const CLI::Option* opt : {p.n, p.ip, p.port}) {
    if (opt->count() == 0) {
      return UsageError(program, opt->get_name() + " is required (usage: " + program +
                                     " --strategy NAME [OPTIONS] n ip port)");
    }
  }
  return {};
}

void ApplyRawFlags(const RawFlags& raw, ServerOptions* o) {
  if (const IoModelInfo* io = FindIoModel(raw.io); io != nullptr) o->io = io;  // checked
  o->port = static_cast<uint16_t>(raw.port);
  o->delay_mode = raw.delay_mode == "precise" ? DelayMode::kPrecise : DelayMode::kUsleep;
  o->verbosity = raw.quiet ? 0 : (raw.verbose ? 2 : 1);
}

}  // namespace

ParseOutcome ParseServerOptions(int argc, char** argv, const std::string& program,
                                const std::string& strategy, ServerOptions* o,
                                GenericFlags* generic) {
  CLI::App app{program + ": the ECE 420 Lab 2 shared-array server, strategy " + strategy +
                   ".\nServes 100-byte requests 'pos-is_read-text' "
                   "from the course kit's client and attacker (and ours).",
               program};
  app.get_formatter()->column_width(34);
  RawFlags raw;
  const Positionals positionals = AddPositionals(&app, o, &raw);
  if (generic == nullptr) {
    for (CLI::Option* opt : {positionals.n, positionals.ip, positionals.port}) opt->required();
  } else {
    AddGenericFlags(&app, generic);
  }
  AddDelayAndTimingOptions(&app, o, &raw);
  AddConnectionOptions(&app, o, &raw);
  app.footer(kFooter);
  if (ParseOutcome r = RunParser(&app, argc, argv, program);
      r.action == ParseOutcome::Action::kExit) {
    return r;
  }
  if (generic != nullptr) {
    const ParseOutcome r = CheckGenericRequired(*generic, positionals, program);
    if (r.action == ParseOutcome::Action::kExit) return r;
  }
  ApplyRawFlags(raw, o);
  if (!o->io->built()) {
    return UsageError(program, "--io " + std::string(o->io->name) + ": not built in (" +
                                   std::string(o->io->not_built) + ")");
  }
  return {};
}

}  // namespace kv
