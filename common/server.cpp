#include "common/server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/acceptor.h"
#include "common/artificial_delay.h"
#include "common/clock.h"
#include "common/io_registry.h"
#include "common/latency_log.h"
#include "common/net.h"
#include "common/rate_limited_log.h"
#include "common/request_handler.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace kv {
namespace {

// Shutdown: the signal handler writes a byte to this pipe, which the accept
// loop polls alongside the listeners (wrk's "stop" flag, made wakeable).
// Plain ints, not UniqueFds: the handler reads them, and the pipe lives as
// long as the process (RunServer() runs once per process).
int g_stop_pipe[2] = {-1, -1};

// The signal mask the accept loop waits with (ppoll): the process's mask
// without the stop signals. Everywhere else the stop signals are blocked, in
// the main thread and in every thread it creates (they inherit the mask), so
// a stop signal is delivered only while the accept loop waits. Delivered to
// whichever thread happened to take it, the handler could be held back: under
// TSan a signal to a thread inside an uninstrumented wait is deferred until
// that wait ends, which left idle servers deaf to SIGTERM for seconds.
sigset_t g_wait_mask;

extern "C" void OnStopSignal(int) {
  const int saved = errno;
  const char byte = 1;
  // Deliberately unchecked: a full pipe already holds a stop byte, and a
  // signal handler has nowhere to report to.
  [[maybe_unused]] const ssize_t r = write(g_stop_pipe[1], &byte, 1);
  errno = saved;
}

Status InstallSignals() {
  if (g_stop_pipe[0] < 0 && pipe2(g_stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::IOError("pipe2", errno);
  }
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  if (sigaction(SIGINT, &sa, nullptr) != 0 || sigaction(SIGTERM, &sa, nullptr) != 0 ||
      sigaction(SIGHUP, &sa, nullptr) != 0 || sigaction(SIGPIPE, &ignore, nullptr) != 0) {
    return Status::IOError("sigaction", errno);
  }
  sigset_t stop;
  sigemptyset(&stop);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  if (const int err = pthread_sigmask(SIG_BLOCK, &stop, &g_wait_mask); err != 0) {
    return Status::IOError("pthread_sigmask", err);
  }
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigdelset(&g_wait_mask, sig);
  return Status::OK();
}

std::string BaseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// Worker threads of --io pool/epoll when --workers is not given: enough that
// requests sleeping in the artificial delay under per-slot locks overlap.
constexpr std::size_t kDefaultWorkers = 64;

// Accepts until the stop pipe fires, under `policy` (acceptor.h). With no
// listeners (the I/O model accepts by itself) it only waits for the stop.
class AcceptLoop {
 public:
  AcceptLoop(const std::vector<int>& listeners, IoModel* io, AcceptPolicy* policy,
             const std::string& program, bool warnings)
      : io_(io), policy_(policy), log_(program, warnings) {
    fds_.reserve(listeners.size() + 1);
    for (const int fd : listeners) fds_.push_back({fd, POLLIN, 0});
    fds_.push_back({g_stop_pipe[0], POLLIN, 0});
  }

  // Returns when the stop pipe becomes readable.
  AcceptStats Run() {
    bool behind = false;  // the model has not looked at what it holds yet
    while (WaitForListeners(behind)) {
      // After waiting for the model, every listener is tried: their
      // readiness was not asked for.
      const bool retry = std::exchange(behind, false);
      for (std::size_t i = 0; i + 1 < fds_.size(); ++i) {
        if ((fds_[i].revents == 0 && !retry) || MonotonicNanos() < paused_until_) continue;
        const BurstEnd end = AcceptBurst(
            policy_, fds_[i].fd, &stats_, [this] { return Load(); },
            [this](UniqueFd conn) { return io_->Dispatch(conn.Release()); });
        if (end == BurstEnd::kPause) paused_until_ = MonotonicNanos() + kAcceptPauseNs;
        if (end == BurstEnd::kBehind) behind = true;
      }
    }
    return stats_;
  }

 private:
  IoLoad Load() const {
    IoLoad load;
    load.unseen = io_->unseen_connections();  // first: see io_model.h
    load.open = io_->open_connections();
    return load;
  }

  // Polls the listeners (unless paused or `behind`: then only for a moment,
  // kBehindWaitNs) and the stop pipe. Returns false when the stop pipe fired.
  bool WaitForListeners(bool behind) {
    for (;;) {
      const int64_t now = MonotonicNanos();
      const bool paused = now < paused_until_;
      for (std::size_t i = 0; i + 1 < fds_.size(); ++i) {
        fds_[i].events = paused || behind ? 0 : POLLIN;
      }
      for (auto& p : fds_) p.revents = 0;
      int64_t wait_ns = paused ? paused_until_ - now : -1;  // -1: until something happens
      if (behind) wait_ns = wait_ns < 0 ? kBehindWaitNs : std::min(wait_ns, kBehindWaitNs);
      timespec wait_left{};
      wait_left.tv_sec = static_cast<time_t>(std::max<int64_t>(wait_ns, 0) / 1'000'000'000);
      wait_left.tv_nsec = static_cast<long>(std::max<int64_t>(wait_ns, 0) % 1'000'000'000);
      // The stop signals are unblocked only inside this wait (g_wait_mask).
      if (ppoll(fds_.data(), fds_.size(), wait_ns >= 0 ? &wait_left : nullptr, &g_wait_mask) >= 0) {
        return fds_.back().revents == 0;
      }
      if (errno == EINTR) continue;
      log_.Warn(std::string("poll: ") + std::strerror(errno));
      paused_until_ = MonotonicNanos() + kAcceptPauseNs;
    }
  }

  IoModel* const io_;
  AcceptPolicy* const policy_;
  RateLimitedLog log_;
  std::vector<pollfd> fds_;  // the listeners, then the stop pipe
  int64_t paused_until_ = 0;
  AcceptStats stats_;
};

// Signals, then the timer slack: what the process needs before anything else.
Status SetUpProcess(const ServerOptions& options) {
  if (Status s = InstallSignals(); !s.ok()) return s;
  if (options.timer_slack_ns > 0 &&
      prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(options.timer_slack_ns), 0, 0, 0) != 0) {
    return Status::IOError("prctl(PR_SET_TIMERSLACK)", errno);
  }
  return Status::OK();
}

struct Listeners {
  std::vector<UniqueFd> fds;
  std::vector<std::string> where;  // "127.0.0.1:3000", one per fd
};

// Listens on the port and (unless --no-twin) its kit-client twin, in that
// order: on failure out->fds says how far it got.
Status Listen(const ServerOptions& options, Listeners* out) {
  std::vector<uint16_t> ports{options.port};
  if (options.kit_twin && KitPortTwin(options.port) != options.port) {
    ports.push_back(KitPortTwin(options.port));
  }
  for (const uint16_t port : ports) {
    SocketAddress address;
    if (!ParseSocketAddress(options.ip, port, &address)) {  // the parser has checked it
      return Status::InvalidArgument("--ip '" + options.ip + "': not a numeric address");
    }
    UniqueFd fd;
    if (Status s = ListenTcp(address, &fd); !s.ok()) return s;
    out->fds.push_back(std::move(fd));
    out->where.push_back(FormatSocketAddress(address));
  }
  return Status::OK();
}

ConnectionLimits LimitsOf(const ServerOptions& options) {
  ConnectionLimits limits;
  limits.idle_timeout_ns = options.idle_timeout_ms * 1'000'000;
  limits.frame_timeout_ns = options.frame_timeout_ms * 1'000'000;
  limits.write_timeout_ns = options.write_timeout_ms * 1'000'000;
  limits.close_after_reply = options.close_after_reply;
  return limits;
}

// `inline_requests`: no access ever sleeps, so event loops may run them.
std::unique_ptr<IoModel> MakeIoModel(const ServerOptions& options, bool inline_requests,
                                     RequestHandler* handler) {
  IoModelConfig config;
  config.workers = options.workers > 0 ? options.workers : kDefaultWorkers;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);  // -1 on error: then one core
  config.loops = options.loops > 0 ? options.loops
                 : cores > 0       ? static_cast<std::size_t>(cores)
                                   : 1;
  config.inline_requests = inline_requests;
  return options.io->create(config, handler, LimitsOf(options));
}

// A model the kernel refuses here (io_uring under a seccomp filter or
// kernel.io_uring_disabled): said at once, never served another way.
Status CheckIoModel(const ServerOptions& options) {
  if (options.io->probe == nullptr) return Status::OK();
  if (Status s = options.io->probe(); !s.ok()) {
    return Status::InvalidArgument("--io " + std::string(options.io->name) + ": " + s.message());
  }
  return Status::OK();
}

void PrintReady(const std::string& program, const Listeners& listeners,
                const ServerOptions& options, const Store& store, const IoModel& io,
                const ArtificialDelay& delay) {
  std::printf("%s: listening on %s", program.c_str(), listeners.where[0].c_str());
  if (listeners.where.size() > 1) {
    std::printf(" and %s (kit client port)", listeners.where[1].c_str());
  }
  std::printf(" n=%zu strategy=%.*s io=%.*s delay_us=%lld", options.n,
              static_cast<int>(store.name().size()), store.name().data(),
              static_cast<int>(io.name().size()), io.name().data(),
              static_cast<long long>(options.delay_us));
  if (delay.mode() == DelayMode::kPrecise && options.delay_us > 0) {
    std::printf(" delay_mode=precise spin_ns=%lld", static_cast<long long>(delay.spin_ns()));
  }
  std::printf("\n");
  std::fflush(stdout);
}

// What the summary line reports, gathered after the drain.
struct RunResult {
  LatencyTotals totals;
  AcceptStats accepts;
  std::size_t unfinished = 0;
  double mean_delay_slept_us = 0;
  uint64_t frames = 0;           // frames read (requests), when not --timing
  uint64_t rejected = 0;         // of which rejected, when not --timing
  uint64_t cut_by_shutdown = 0;  // frames cut short by the stop
};

void PrintSummary(const std::string& program, bool timing, const RunResult& r) {
  const LatencyTotals& t = r.totals;
  std::printf(
      "%s: summary requests=%llu errors=%llu mean_latency_s=%e mean_wait_s=%e "
      "mean_hold_s=%e mean_queue_s=%e mean_delay_slept_us=%.2f "
      "mean_delay_s=%e mean_cpu_wait_s=%e cpu_wait_samples=%llu connections=%llu "
      "unfinished_connections=%zu refused=%llu accept_errors=%llu "
      "timing_lines_lost=%llu frames_cut_by_shutdown=%llu\n",
      program.c_str(), static_cast<unsigned long long>(timing ? t.requests + t.rejected : r.frames),
      static_cast<unsigned long long>(timing ? t.rejected : r.rejected), t.mean_latency_s,
      t.mean_wait_s, t.mean_hold_s, t.mean_queue_s, r.mean_delay_slept_us, t.mean_delay_s,
      t.mean_cpu_wait_s, static_cast<unsigned long long>(t.cpu_wait_samples),
      static_cast<unsigned long long>(r.accepts.accepted), r.unfinished,
      static_cast<unsigned long long>(r.accepts.refused),
      static_cast<unsigned long long>(r.accepts.accept_errors),
      static_cast<unsigned long long>(t.lines_lost),
      static_cast<unsigned long long>(r.cut_by_shutdown));
  std::fflush(stdout);
}

// Serves on `listeners` until a stop signal, then drains and summarises.
void Serve(const ServerOptions& options, const std::string& program, const StoreMaker& factory,
           Listeners listeners, LatencyLog* log) {
  const bool precise = options.delay_mode == DelayMode::kPrecise && options.delay_us > 0;
  const int64_t spin_ns = !precise               ? kPreciseSpinNs
                          : options.spin_ns >= 0 ? options.spin_ns
                                                 : ArtificialDelay::MeasureWakeUpLatencyNs();
  ArtificialDelay delay{std::chrono::microseconds(options.delay_us), options.delay_mode, spin_ns};
  std::unique_ptr<Store> store = factory(options.n, &delay);
  RequestCounters counters;
  RequestHandler handler(store.get(), options.timing ? log : nullptr, &counters);
  handler.set_log_rejects(options.verbosity >= 2, program);
  std::unique_ptr<IoModel> io = MakeIoModel(options, !delay.sleeps(), &handler);
  PrintReady(program, listeners, options, *store, *io, delay);

  RunResult r;
  AcceptPolicy policy(options.max_connections, program, options.verbosity >= 1);
  std::vector<int> fds;
  fds.reserve(listeners.fds.size());
  for (const UniqueFd& fd : listeners.fds) fds.push_back(fd.get());
  if (io->TakeListeners(fds, &policy)) fds.clear();  // the model accepts by itself
  r.accepts = AcceptLoop(fds, io.get(), &policy, program, options.verbosity >= 1).Run();
  r.accepts += io->StopAccepting();
  listeners.fds.clear();  // closes them: new connections are refused by the kernel
  // Requests in flight finish; the whole stop must take under a second.
  r.unfinished = io->Drain(MonotonicNanos() + 800'000'000);
  log->Flush();
  r.totals = log->Totals();
  r.mean_delay_slept_us = delay.MeanSleptNanos() / 1e3;
  r.frames = counters.frames.load();
  r.rejected = counters.rejected.load();
  r.cut_by_shutdown = counters.cut_by_shutdown.load();
  PrintSummary(program, options.timing, r);
  if (r.unfinished > 0) {
    // Connection threads still use the store; do not destroy it under them.
    std::fflush(nullptr);
    std::_Exit(0);
  }
}

}  // namespace

int RunServer(const ServerOptions& options, const std::string& program, const StoreMaker& factory) {
  if (Status s = SetUpProcess(options); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), s.message().c_str());
    return 1;
  }
  if (Status s = CheckIoModel(options); !s.ok()) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), s.message().c_str());
    return 2;
  }
  // The timing and trace files first: a path that cannot work (a FIFO, a
  // missing folder) is a bad argument, refused before any socket exists.
  LatencyLogOptions log_options = options.log;
  log_options.program = program;
  log_options.warnings = options.verbosity >= 1;
  LatencyLog log(log_options);
  if (Status s = log.Open(); !s.ok()) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), s.message().c_str());
    return 2;
  }
  // Then listen: a port in use is the commonest failure, report it at once.
  Listeners listeners;
  if (Status s = Listen(options, &listeners); !s.ok()) {
    const bool twin = !listeners.fds.empty();  // the port itself worked
    std::fprintf(stderr, "%s: %s%s\n", program.c_str(), s.message().c_str(),
                 twin ? " (the byte-swapped twin of the port, where the kit client connects; "
                        "--no-twin skips it)"
                      : "");
    return 1;
  }
  Serve(options, program, factory, std::move(listeners), &log);
  return 0;
}

int RunServerMain(int argc, char** argv, StoreFactory factory, std::string_view strategy) {
  const std::string program = BaseName(argc > 0 ? argv[0] : "server");
  ServerOptions options;
  const ParseOutcome outcome =
      ParseServerOptions(argc, argv, program, std::string(strategy), &options);
  if (outcome.action == ParseOutcome::Action::kExit) return outcome.exit_code;
  return RunServer(options, program, factory);
}

}  // namespace kv
