#include "client/client_options.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iterator>
#include <set>
#include <span>

#include <CLI/CLI.hpp>

#include "client/report.h"
#include "common/numbers.h"

namespace kv {
namespace {

// The raw text of every option; numbers are parsed by hand, after CLI11 has
// matched the names (CLI11 itself reads "010" as octal and accepts "nan").
struct RawOptions {
  std::string n, ip, port;
  std::string threads = "100", requests, duration, warmup = "0", rate;
  std::string read_ratio = "0.7", connection = "per-request", connections;
  std::string dist = "uniform", text_len = "kit", seed = "0", format = "text";
  std::string check_requests = "125", timeout_ms = "5000", time_limit;
  std::string histogram_out, start_at;
  bool timeline = false, quiet = false, check = false, real_port = false;
  // The options the command line named (CLI11 counts): an empty value given
  // is refused like any other bad value, never taken for "not given".
  std::set<std::string, std::less<>> given;

  bool Given(std::string_view name) const { return given.contains(name); }
};

// The options that take a value, in --help order. Each is kept as text and
// parsed by hand later.
struct TextOption {
  const char* name;
  std::string RawOptions::*field;
  const char* help;
};

constexpr TextOption kLoadOptions[] = {
    {"--threads", &RawOptions::threads,
     "client threads T (1..4096), or a comma list (1,2,4,8,16,32): one run per point [100]"},
    {"--requests", &RawOptions::requests,
     "total measured requests per run (1..2^50) [1000 unless --duration is given]"},
    {"--duration", &RawOptions::duration, "run for S seconds after warm-up (0.001..86400)"},
    {"--warmup", &RawOptions::warmup, "seconds excluded from the results (0..86400) [0]"},
    {"--time-limit", &RawOptions::time_limit,
     "no run point lasts longer than S seconds (0.001..86400) [600, or warmup + duration]"},
    {"--connection", &RawOptions::connection, "per-request (kit) or keepalive [per-request]"},
    {"--connections", &RawOptions::connections,
     "keep-alive: total connections (1..65536), >= threads; each thread uses its share in turn "
     "[threads]"},
    {"--rate", &RawOptions::rate,
     "open loop: total requests/s (0.001..1e9); latency from the intended send time (wrk2)"},
    {"--read-ratio", &RawOptions::read_ratio, "fraction of reads, 0..1 [0.7]"},
    {"--dist", &RawOptions::dist,
     "positions: uniform | zipf:S | hotspot:KEYFRAC:REQFRAC [uniform]"},
    {"--text-len", &RawOptions::text_len,
     "write text: kit | fixed:L | gamma:K:THETA (capped to fit the frame) [kit]"},
    {"--seed", &RawOptions::seed,
     "workload seed (0..2^64-1); 0 = the kit's (thread t seeds rand_r with t) [0]"},
    {"--format", &RawOptions::format, "text | json | csv [text]"},
};

constexpr TextOption kRunOptions[] = {
    {"--check-requests", &RawOptions::check_requests,
     "checker: requests per attacker thread (1..10,000,000) [125, as the kit]"},
    {"--timeout-ms", &RawOptions::timeout_ms,
     "timeout of every connect, send and receive (1..600000) [5000]"},
    {"--histogram-out", &RawOptions::histogram_out,
     "write each run point's raw latency histogram (buckets) to FILE as JSON, for merging "
     "several agents' results"},
    {"--start-at", &RawOptions::start_at,
     "wait until this wall-clock time (ns since the epoch, at most one day ahead) before the "
     "first run starts; a past time starts at once"},
};

template <std::size_t N>
void DefineTextOptions(CLI::App* app, RawOptions* raw, const TextOption (&options)[N]) {
  for (const TextOption& o : options) app->add_option(o.name, raw->*(o.field), o.help);
}

void DefineOptions(CLI::App* app, RawOptions* raw) {
  app->add_option("n", raw->n, "array size (1..10,000,000)")->required();
  app->add_option("ip", raw->ip, "server IPv4 or IPv6 address (numeric)")->required();
  app->add_option("port", raw->port, "server port (1..65535), as given to the server")->required();
  DefineTextOptions(app, raw, kLoadOptions);
  app->add_flag("--timeline", raw->timeline, "per-second throughput in the output");
  app->add_flag("--quiet", raw->quiet, "no progress lines on stderr");
  app->add_flag("--check", raw->check, "run the consistency checker instead of a load run");
  app->add_flag("--real-port", raw->real_port,
                "connect to <port> itself, not its byte-swapped twin");
  DefineTextOptions(app, raw, kRunOptions);
}

void RecordGiven(const CLI::App& app, RawOptions* raw) {
  for (const auto& options :
       {std::span<const TextOption>(kLoadOptions), std::span<const TextOption>(kRunOptions)}) {
    for (const TextOption& o : options) {
      if (app.count(o.name) > 0) raw->given.insert(o.name);
    }
  }
}

// A whole-number option by the number rule (numbers.h), stored in its field
// (every range fits the field's type).
template <typename T>
Status Whole(std::string_view name, std::string_view text, uint64_t lo, uint64_t hi, T* out) {
  uint64_t v = 0;
  if (Status s = ParseUnsigned(text, lo, hi, &v); !s.ok()) return NumberError(name, s);
  *out = static_cast<T>(v);
  return Status::OK();
}

// A real-number option by the number rule.
Status Real(std::string_view name, std::string_view text, double lo, double hi, double* out) {
  if (Status s = ParseDecimalDouble(text, lo, hi, out); !s.ok()) return NumberError(name, s);
  return Status::OK();
}

// "8" or "1,2,4,8": thread counts, each in 1..kMaxClientThreads.
Status ParseThreadList(const std::string& text, std::vector<uint32_t>* out) {
  out->clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    uint32_t v = 0;
    if (Status s = Whole("--threads", item, 1, kMaxClientThreads, &v); !s.ok()) {
      return Status::InvalidArgument(s.message() + " (give T or a list like 1,2,4,8)");
    }
    out->push_back(v);
    if (comma == std::string::npos) return Status::OK();
    start = comma + 1;
  }
}

Status OneOf(std::string_view option, const std::string& value,
             std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return Status::OK();
    list += list.empty() ? a : std::string(" | ") + a;
  }
  return Status::InvalidArgument(std::string(option) + ": '" + value + "' is not one of " + list);
}

Status ParsePositionals(const RawOptions& raw, ClientOptions* o) {
  if (Status s = Whole("n", raw.n, 1, kMaxArraySize, &o->n); !s.ok()) return s;
  if (Status s = Whole("port", raw.port, 1, 65535, &o->given_port); !s.ok()) return s;
  o->ip = raw.ip;
  o->real_port = raw.real_port;
  const uint16_t connect_port = o->real_port ? o->given_port : KitPortTwin(o->given_port);
  if (Status s = Endpoint::Make(o->ip, connect_port, &o->endpoint); !s.ok()) {
    return Status::InvalidArgument("ip: " + s.message());
  }
  return Status::OK();
}

Status ParseWorkload(const RawOptions& raw, ClientOptions* o) {
  o->spec.n = o->n;
  if (Status s = Real("--read-ratio", raw.read_ratio, 0, 1, &o->spec.read_ratio); !s.ok()) {
    return s;
  }
  if (Status s = Whole("--seed", raw.seed, 0, UINT64_MAX, &o->spec.seed); !s.ok()) return s;
  if (Status s = Distribution::Parse(raw.dist, &o->spec.dist); !s.ok()) return s;
  return TextLength::Parse(raw.text_len, &o->spec.text);
}

Status ParseRunShape(const RawOptions& raw, ClientOptions* o) {
  if (Status s = ParseThreadList(raw.threads, &o->threads); !s.ok()) return s;
  o->thread_list = raw.threads.find(',') != std::string::npos;
  o->requests = raw.Given("--duration") ? 0 : 1000;  // 1000: the kit's COM_NUM_REQUEST
  if (raw.Given("--requests")) {
    if (Status s = Whole("--requests", raw.requests, 1, uint64_t{1} << 50, &o->requests); !s.ok()) {
      return s;
    }
  }
  if (raw.Given("--duration")) {
    if (Status s = Real("--duration", raw.duration, 1e-3, kMaxSeconds, &o->duration_s); !s.ok()) {
      return s;
    }
  }
  if (Status s = Real("--warmup", raw.warmup, 0, kMaxSeconds, &o->warmup_s); !s.ok()) return s;
  if (raw.Given("--rate")) {
    if (Status s = Real("--rate", raw.rate, 1e-3, 1e9, &o->rate); !s.ok()) return s;
  }
  if (Status s = Whole("--timeout-ms", raw.timeout_ms, 1, 600'000, &o->timeout_ms); !s.ok()) {
    return s;
  }
  return Whole("--check-requests", raw.check_requests, 1, 10'000'000, &o->check_requests);
}

Status ParseConnections(const RawOptions& raw, ClientOptions* o) {
  if (Status s = OneOf("--connection", raw.connection, {"per-request", "keepalive"}); !s.ok()) {
    return s;
  }
  o->keepalive = raw.connection == "keepalive";
  if (!raw.Given("--connections")) return Status::OK();
  if (Status s = Whole("--connections", raw.connections, 1, kMaxClientConnections, &o->connections);
      !s.ok()) {
    return s;
  }
  if (!o->keepalive) {
    return Status::InvalidArgument("--connections needs --connection keepalive");
  }
  for (uint32_t t : o->threads) {
    if (o->connections < t) {
      return Status::InvalidArgument("--connections " + std::to_string(o->connections) +
                                     " is fewer than --threads " + std::to_string(t));
    }
  }
  return Status::OK();
}

Status ParseOutput(const RawOptions& raw, ClientOptions* o) {
  if (Status s = OneOf("--format", raw.format, {"text", "json", "csv"}); !s.ok()) return s;
  o->format = raw.format == "json"  ? OutputFormat::kJson
              : raw.format == "csv" ? OutputFormat::kCsv
                                    : OutputFormat::kText;
  o->timeline = raw.timeline;
  o->quiet = raw.quiet;
  o->histogram_out = raw.histogram_out;
  if (!raw.histogram_out.empty()) {
    // Refuse a file that cannot be written before any run, not after it.
    const std::filesystem::path dir = std::filesystem::path(raw.histogram_out).parent_path().empty()
                                          ? std::filesystem::path(".")
                                          : std::filesystem::path(raw.histogram_out).parent_path();
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      return Status::InvalidArgument("--histogram-out '" + raw.histogram_out + "': folder '" +
                                     dir.string() + "' does not exist");
    }
  }
  if (raw.Given("--start-at")) {
    timespec now{};
    // Deliberately unchecked: CLOCK_REALTIME with a valid pointer cannot fail.
    static_cast<void>(::clock_gettime(CLOCK_REALTIME, &now));
    const uint64_t now_ns =
        static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(now.tv_nsec);
    const uint64_t day_ns = static_cast<uint64_t>(kMaxSeconds) * 1'000'000'000ULL;
    if (Status s = Whole("--start-at", raw.start_at, 0, now_ns + day_ns, &o->start_at_ns);
        !s.ok()) {
      return s;
    }
  }
  return Status::OK();
}

// The time bound of every run point (see the header).
Status ParseTimeLimit(const RawOptions& raw, ClientOptions* o) {
  if (raw.Given("--time-limit")) {
    if (Status s = Real("--time-limit", raw.time_limit, 1e-3, kMaxSeconds, &o->time_limit_s);
        !s.ok()) {
      return s;
    }
  } else if (o->duration_s > 0) {
    o->time_limit_s = o->warmup_s + o->duration_s;
  }
  if (o->warmup_s >= o->time_limit_s) {
    return Status::InvalidArgument("--warmup " + FormatDecimal(o->warmup_s) +
                                   " s leaves no time to measure within the time limit "
                                   "of " +
                                   FormatDecimal(o->time_limit_s) + " s (--time-limit)");
  }
  if (o->duration_s > 0 && o->warmup_s + o->duration_s > o->time_limit_s) {
    return Status::InvalidArgument(
        "--warmup + --duration (" + FormatDecimal(o->warmup_s + o->duration_s) +
        " s) is over --time-limit " + FormatDecimal(o->time_limit_s) + " s");
  }
  if (o->rate > 0 && o->requests > 0) {
    const double schedule_s = o->warmup_s + static_cast<double>(o->requests) / o->rate;
    if (schedule_s > o->time_limit_s) {
      return Status::InvalidArgument("--requests " + std::to_string(o->requests) + " at --rate " +
                                     FormatDecimal(o->rate) + " takes " +
                                     FormatDecimal(schedule_s) + " s, over the time limit of " +
                                     FormatDecimal(o->time_limit_s) +
                                     " s (raise --rate or --time-limit, or lower --requests)");
    }
  }
  return Status::OK();
}

Status CheckModeConflicts(const RawOptions& raw, const ClientOptions& o) {
  if (!o.check) return Status::OK();
  // The load-run options the checker has no use for.
  constexpr const char* kLoadOnly[] = {"--threads",    "--requests", "--duration",
                                       "--warmup",     "--rate",     "--connections",
                                       "--read-ratio", "--dist",     "--text-len"};
  const bool load_only = std::any_of(std::begin(kLoadOnly), std::end(kLoadOnly),
                                     [&raw](const char* name) { return raw.Given(name); });
  if (load_only || o.timeline) {
    return Status::InvalidArgument(
        "--check takes only --connection, --check-requests, --seed, --format, "
        "--real-port, --timeout-ms, --time-limit and --quiet");
  }
  return Status::OK();
}

}  // namespace

Status ParseClientOptions(int argc, const char* const* argv, ClientOptions* out) {
  CLI::App app{
      "lockbench client: the ECE 420 Lab 2 kit client (no options), a load "
      "generator, and a consistency checker (--check).\n"
      "Like the kit, it connects to the byte-swapped twin of <port> unless "
      "--real-port is given. Every run is bounded by --time-limit."};
  app.set_version_flag("--version", kToolVersion);
  RawOptions raw;
  DefineOptions(&app, &raw);
  ClientOptions o;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out->show = app.help();
    return Status::OK();
  } catch (const CLI::CallForAllHelp&) {
    out->show = app.help("", CLI::AppFormatMode::All);
    return Status::OK();
  } catch (const CLI::CallForVersion&) {
    out->show = std::string(kToolVersion) + "\n";
    return Status::OK();
  } catch (const CLI::ParseError& e) {
    std::string m = e.what();
    for (char& c : m) {
      if (c == '\n') c = ' ';
    }
    return Status::InvalidArgument(m);
  }
  RecordGiven(app, &raw);
  o.check = raw.check;
  for (auto* step : {ParsePositionals, ParseWorkload, ParseRunShape, ParseConnections, ParseOutput,
                     ParseTimeLimit}) {
    if (Status s = step(raw, &o); !s.ok()) return s;
  }
  if (Status s = CheckModeConflicts(raw, o); !s.ok()) return s;
  *out = std::move(o);
  return Status::OK();
}

}  // namespace kv
