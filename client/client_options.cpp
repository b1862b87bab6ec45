#include "client/client_options.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include <CLI/CLI.hpp>

#include "client/report.h"

namespace kv {
namespace {

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

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
  // Which options were given (CLI11 counts).
  bool threads_given = false, requests_given = false, duration_given = false;
  bool warmup_given = false, rate_given = false, connections_given = false;
  bool read_ratio_given = false, dist_given = false, text_len_given = false;
};

// The options that take a value, in --help order. Each is kept as text and
// parsed by hand later; `given` records whether the command line named it
// (null: nobody asks).
struct TextOption {
  const char* name;
  std::string RawOptions::*field;
  bool RawOptions::*given;
  const char* help;
};

constexpr TextOption kLoadOptions[] = {
    {"--threads", &RawOptions::threads, &RawOptions::threads_given,
     "client threads T (1..4096), or a comma list (1,2,4,8,16,32): one run per point [100]"},
    {"--requests", &RawOptions::requests, &RawOptions::requests_given,
     "total measured requests per run (1..2^50) [1000 unless --duration is given]"},
    {"--duration", &RawOptions::duration, &RawOptions::duration_given,
     "run for S seconds after warm-up (0.001..86400)"},
    {"--warmup", &RawOptions::warmup, &RawOptions::warmup_given,
     "seconds excluded from the results (0..86400) [0]"},
    {"--time-limit", &RawOptions::time_limit, nullptr,
     "no run point lasts longer than S seconds (0.001..86400) [600, or warmup + duration]"},
    {"--connection", &RawOptions::connection, nullptr,
     "per-request (kit) or keepalive [per-request]"},
    {"--connections", &RawOptions::connections, &RawOptions::connections_given,
     "keep-alive: total connections (1..65536), >= threads; each thread uses its share in turn "
     "[threads]"},
    {"--rate", &RawOptions::rate, &RawOptions::rate_given,
     "open loop: total requests/s (0.001..1e9); latency from the intended send time (wrk2)"},
    {"--read-ratio", &RawOptions::read_ratio, &RawOptions::read_ratio_given,
     "fraction of reads, 0..1 [0.7]"},
    {"--dist", &RawOptions::dist, &RawOptions::dist_given,
     "positions: uniform | zipf:S | hotspot:KEYFRAC:REQFRAC [uniform]"},
    {"--text-len", &RawOptions::text_len, &RawOptions::text_len_given,
     "write text: kit | fixed:L | gamma:K:THETA (capped to fit the frame) [kit]"},
    {"--seed", &RawOptions::seed, nullptr,
     "workload seed (0..2^64-1); 0 = the kit's (thread t seeds rand_r with t) [0]"},
    {"--format", &RawOptions::format, nullptr, "text | json | csv [text]"},
};

constexpr TextOption kRunOptions[] = {
    {"--check-requests", &RawOptions::check_requests, nullptr,
     "checker: requests per attacker thread (1..10,000,000) [125, as the kit]"},
    {"--timeout-ms", &RawOptions::timeout_ms, nullptr,
     "timeout of every connect, send and receive (1..600000) [5000]"},
    {"--histogram-out", &RawOptions::histogram_out, nullptr,
     "write each run point's raw latency histogram (buckets) to FILE as JSON, for merging "
     "several agents' results"},
    {"--start-at", &RawOptions::start_at, nullptr,
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
  for (const TextOption& o : kLoadOptions) {
    if (o.given != nullptr) raw->*(o.given) = app.count(o.name) > 0;
  }
}

// "8" or "1,2,4,8": thread counts, each in 1..kMaxClientThreads.
Status ParseThreadList(const std::string& text, std::vector<uint32_t>* out) {
  out->clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    uint64_t v = 0;
    if (!ParseWhole("--threads", item, 1, kMaxClientThreads, &v).ok()) {
      return Status::InvalidArgument("--threads: '" + item + "' is not a whole number in 1.." +
                                     std::to_string(kMaxClientThreads) +
                                     " (give T or a list like 1,2,4,8)");
    }
    out->push_back(static_cast<uint32_t>(v));
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
  uint64_t v = 0;
  if (Status s = ParseWhole("n", raw.n, 1, 10'000'000, &o->n); !s.ok()) return s;
  if (Status s = ParseWhole("port", raw.port, 1, 65535, &v); !s.ok()) return s;
  o->given_port = static_cast<uint16_t>(v);
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
  if (Status s = ParseReal("--read-ratio", raw.read_ratio, 0, 1, &o->spec.read_ratio); !s.ok()) {
    return s;
  }
  if (Status s = ParseWhole("--seed", raw.seed, 0, UINT64_MAX, &o->spec.seed); !s.ok()) {
    return s;
  }
  if (Status s = Distribution::Parse(raw.dist, &o->spec.dist); !s.ok()) return s;
  return TextLength::Parse(raw.text_len, &o->spec.text);
}

Status ParseRunShape(const RawOptions& raw, ClientOptions* o) {
  if (Status s = ParseThreadList(raw.threads, &o->threads); !s.ok()) return s;
  o->thread_list = raw.threads.find(',') != std::string::npos;
  if (raw.requests_given) {
    if (Status s = ParseWhole("--requests", raw.requests, 1, uint64_t{1} << 50, &o->requests);
        !s.ok()) {
      return s;
    }
  } else {
    o->requests = raw.duration_given ? 0 : 1000;  // 1000: the kit's COM_NUM_REQUEST
  }
  if (raw.duration_given) {
    if (Status s = ParseReal("--duration", raw.duration, 1e-3, kMaxSeconds, &o->duration_s);
        !s.ok()) {
      return s;
    }
  }
  if (Status s = ParseReal("--warmup", raw.warmup, 0, kMaxSeconds, &o->warmup_s); !s.ok()) {
    return s;
  }
  if (raw.rate_given) {
    if (Status s = ParseReal("--rate", raw.rate, 1e-3, 1e9, &o->rate); !s.ok()) return s;
  }
  uint64_t v = 0;
  if (Status s = ParseWhole("--timeout-ms", raw.timeout_ms, 1, 600'000, &v); !s.ok()) {
    return s;
  }
  o->timeout_ms = static_cast<int>(v);
  if (Status s = ParseWhole("--check-requests", raw.check_requests, 1, 10'000'000, &v); !s.ok()) {
    return s;
  }
  o->check_requests = static_cast<uint32_t>(v);
  return Status::OK();
}

Status ParseConnections(const RawOptions& raw, ClientOptions* o) {
  if (Status s = OneOf("--connection", raw.connection, {"per-request", "keepalive"}); !s.ok()) {
    return s;
  }
  o->keepalive = raw.connection == "keepalive";
  if (!raw.connections_given) return Status::OK();
  uint64_t v = 0;
  if (Status s = ParseWhole("--connections", raw.connections, 1, 65536, &v); !s.ok()) {
    return s;
  }
  o->connections = static_cast<uint32_t>(v);
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
  if (!raw.start_at.empty()) {
    timespec now{};
    // Deliberately unchecked: CLOCK_REALTIME with a valid pointer cannot fail.
    static_cast<void>(::clock_gettime(CLOCK_REALTIME, &now));
    const uint64_t now_ns =
        static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(now.tv_nsec);
    const uint64_t day_ns = static_cast<uint64_t>(kMaxSeconds) * 1'000'000'000ULL;
    if (Status s = ParseWhole("--start-at", raw.start_at, 0, now_ns + day_ns, &o->start_at_ns);
        !s.ok()) {
      return s;
    }
  }
  return Status::OK();
}

// The time bound of every run point (see the header).
Status ParseTimeLimit(const RawOptions& raw, ClientOptions* o) {
  if (!raw.time_limit.empty()) {
    if (Status s = ParseReal("--time-limit", raw.time_limit, 1e-3, kMaxSeconds, &o->time_limit_s);
        !s.ok()) {
      return s;
    }
  } else if (o->duration_s > 0) {
    o->time_limit_s = o->warmup_s + o->duration_s;
  }
  if (o->warmup_s >= o->time_limit_s) {
    return Status::InvalidArgument("--warmup " + FormatNumber(o->warmup_s) +
                                   " s leaves no time to measure within the time limit "
                                   "of " +
                                   FormatNumber(o->time_limit_s) + " s (--time-limit)");
  }
  if (o->duration_s > 0 && o->warmup_s + o->duration_s > o->time_limit_s) {
    return Status::InvalidArgument(
        "--warmup + --duration (" + FormatNumber(o->warmup_s + o->duration_s) +
        " s) is over --time-limit " + FormatNumber(o->time_limit_s) + " s");
  }
  if (o->rate > 0 && o->requests > 0) {
    const double schedule_s = o->warmup_s + static_cast<double>(o->requests) / o->rate;
    if (schedule_s > o->time_limit_s) {
      return Status::InvalidArgument("--requests " + std::to_string(o->requests) + " at --rate " +
                                     FormatNumber(o->rate) + " takes " + FormatNumber(schedule_s) +
                                     " s, over the time limit of " + FormatNumber(o->time_limit_s) +
                                     " s (raise --rate or --time-limit, or lower --requests)");
    }
  }
  return Status::OK();
}

Status CheckModeConflicts(const RawOptions& raw, const ClientOptions& o) {
  if (!o.check) return Status::OK();
  if (raw.threads_given || raw.requests_given || raw.duration_given || raw.warmup_given ||
      raw.rate_given || raw.connections_given || raw.read_ratio_given || raw.dist_given ||
      raw.text_len_given || o.timeline) {
    return Status::InvalidArgument(
        "--check takes only --connection, --check-requests, --seed, --format, "
        "--real-port, --timeout-ms, --time-limit and --quiet");
  }
  return Status::OK();
}

}  // namespace

Status ParseWhole(std::string_view option, std::string_view text, uint64_t min, uint64_t max,
                  uint64_t* out) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  uint64_t v = 0;
  // cppcheck 2.10 takes `text` for a view of a caller's loop-local string that is out of
  // scope here (invalidLifetime); it is alive for the whole call.
  // cppcheck-suppress invalidLifetime
  const char* end = digits.data() + digits.size();
  const bool all_digits =
      !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  // all_digits: from_chars consumes every byte unless the value overflows (ec says so).
  const std::errc ec = std::from_chars(digits.data(), end, v).ec;
  if (!all_digits || ec != std::errc() || v < min || v > max) {
    return Status::InvalidArgument(std::string(option) + ": '" + std::string(text) +
                                   "' is not a whole number in " + std::to_string(min) + ".." +
                                   std::to_string(max));
  }
  *out = v;
  return Status::OK();
}

Status ParseReal(std::string_view option, std::string_view text, double min, double max,
                 double* out) {
  double v = 0;
  const char* end = text.data() + text.size();
  // Decimal only: digits, '.', an exponent; from_chars would also take
  // "inf" and "nan", which the character check and isfinite refuse.
  const bool decimal = !text.empty() &&
                       text.find_first_not_of("0123456789.eE+-") == std::string_view::npos &&
                       text.front() != '+';
  auto [p, ec] = std::from_chars(text.data(), end, v, std::chars_format::general);
  if (!decimal || ec != std::errc() || p != end || !std::isfinite(v) || v < min || v > max) {
    return Status::InvalidArgument(std::string(option) + ": '" + std::string(text) +
                                   "' is not a number in " + FormatNumber(min) + ".." +
                                   FormatNumber(max));
  }
  *out = v;
  return Status::OK();
}

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
