#include "common/server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/artificial_delay.h"
#include "common/clock.h"
#include "common/event_io.h"
#include "common/latency_log.h"
#include "common/net.h"
#include "common/rate_limited_log.h"
#include "common/request_handler.h"
#include "common/thread_per_connection.h"

namespace kv {
namespace {

// Shutdown: the signal handler writes a byte to this pipe, which the accept
// loop polls alongside the listeners (wrk's "stop" flag, made wakeable).
int g_stop_pipe[2] = {-1, -1};

extern "C" void OnStopSignal(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] const ssize_t r = write(g_stop_pipe[1], &byte, 1);
  errno = saved;
}

bool InstallSignals(std::string* error) {
  if (pipe2(g_stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    *error = std::string("pipe2: ") + std::strerror(errno);
    return false;
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
    *error = std::string("sigaction: ") + std::strerror(errno);
    return false;
  }
  return true;
}

std::string BaseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// One descriptor held in reserve (nginx's and libev's trick): when accept()
// fails with EMFILE/ENFILE the listener stays readable, and a loop that just
// retries spins. Releasing the spare lets us accept the connection at the head
// of the queue and refuse it properly, then take the spare back.
class SpareFd {
 public:
  SpareFd() { Acquire(); }
  ~SpareFd() { Release(); }
  SpareFd(const SpareFd&) = delete;
  SpareFd& operator=(const SpareFd&) = delete;

  bool held() const { return fd_ >= 0; }
  bool Acquire() {
    if (fd_ < 0) fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd_ >= 0;
  }
  void Release() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct AcceptStats {
  uint64_t accepted = 0;       // connections handed to the I/O model
  uint64_t refused = 0;        // accepted, answered "server busy", closed
  uint64_t accept_errors = 0;  // accept() failures (EMFILE, ENFILE, ...)
};

// Worker threads of --io pool/epoll when --workers is not given: enough that
// requests sleeping in the artificial delay under per-slot locks overlap.
constexpr std::size_t kDefaultWorkers = 64;

// Connections taken from one listener per wake-up, so the other listener and
// the stop pipe are looked at regularly even under a connection flood.
constexpr int kAcceptBurst = 64;
// How long accepting pauses after an error we cannot work around (ENOBUFS,
// ENOMEM, EMFILE without a spare fd): connections wait in the kernel backlog.
constexpr int64_t kAcceptPauseNs = 100'000'000;

// Accepts until the stop pipe fires.
//
// Overload policy: REFUSE. A connection beyond `max_connections`, one for
// which no thread can be created, and one that arrives while the process is
// out of file descriptors (EMFILE/ENFILE, via the spare fd) are all accepted,
// answered "ERROR server busy ..." and closed at once, so a client fails fast
// instead of hanging in the backlog. Only when even that is impossible does
// the loop stop polling the listeners for 100 ms (the stop pipe is still
// watched). Every case is counted and logged at most once a second; nothing
// spins, nothing exits, and service resumes by itself as connections close.
void AcceptLoop(const std::vector<int>& listeners, IoModel* io, std::size_t max_connections,
                const std::string& program, bool warnings, AcceptStats* stats) {
  std::vector<pollfd> fds;
  fds.reserve(listeners.size() + 1);
  for (const int fd : listeners) fds.push_back({fd, POLLIN, 0});
  fds.push_back({g_stop_pipe[0], POLLIN, 0});
  RateLimitedLog log(program, warnings);
  SpareFd spare;
  int64_t paused_until = 0;
  const std::string busy = "server busy: " + std::to_string(max_connections) +
                           " connections open (--max-connections); try again";
  for (;;) {
    const int64_t now = MonotonicNanos();
    const bool paused = now < paused_until;
    for (std::size_t i = 0; i + 1 < fds.size(); ++i) {
      fds[i].events = paused ? 0 : POLLIN;
    }
    for (auto& p : fds) p.revents = 0;
    const int timeout_ms =
        paused ? static_cast<int>((paused_until - now + 999'999) / 1'000'000) : -1;
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      log.Warn(std::string("poll: ") + std::strerror(errno));
      paused_until = MonotonicNanos() + kAcceptPauseNs;
      continue;
    }
    if (fds.back().revents != 0) return;
    for (std::size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      for (int burst = 0; burst < kAcceptBurst; ++burst) {
        int conn = AcceptConnection(fds[i].fd);
        if (conn < 0) {
          const int err = errno;
          if (err == EAGAIN || err == EWOULDBLOCK) break;
          ++stats->accept_errors;
          if ((err == EMFILE || err == ENFILE) && spare.held()) {
            // accept() fails with EMFILE before it looks at the queue, so
            // this is also how we learn that the queue is empty.
            spare.Release();
            conn = AcceptConnection(fds[i].fd);
            const bool drained = conn < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
            if (conn >= 0) {
              RefuseConnection(conn,
                               "server busy: out of file descriptors; "
                               "try again");
              ++stats->refused;
            }
            const bool again = spare.Acquire();
            log.Warn(std::string("accept: ") + std::strerror(err) +
                     (again ? "; refusing new connections until some close"
                            : "; pausing accepts for 100 ms"));
            if (conn >= 0 && again) continue;  // the next queued connection
            if (drained && again) break;       // nothing more is waiting
          } else {
            log.Warn(std::string("accept: ") + std::strerror(err) + "; pausing accepts for 100 ms");
          }
          paused_until = MonotonicNanos() + kAcceptPauseNs;
          break;
        }
        if (io->open_connections() >= max_connections) {
          RefuseConnection(conn, busy);
          ++stats->refused;
          log.Warn("refusing connections: " + std::to_string(max_connections) +
                   " open (--max-connections)");
          continue;
        }
        if (!io->Dispatch(conn)) {  // Dispatch has refused it
          ++stats->refused;
          log.Warn(std::string("cannot start a connection thread: ") + std::strerror(errno) +
                   "; refusing connections");
          continue;
        }
        ++stats->accepted;
      }
    }
  }
}

}  // namespace

int RunServer(const ServerOptions& options, const std::string& program, const StoreMaker& factory) {
  std::string error;
  if (!InstallSignals(&error)) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    return 1;
  }
  if (options.timer_slack_ns > 0 &&
      prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(options.timer_slack_ns), 0, 0, 0) != 0) {
    std::fprintf(stderr, "%s: prctl(PR_SET_TIMERSLACK): %s\n", program.c_str(),
                 std::strerror(errno));
    return 1;
  }

  // The timing and trace files first: a path that cannot work (a FIFO, a
  // missing folder) is a bad argument, refused before any socket exists.
  LatencyLogOptions log_options = options.log;
  log_options.program = program;
  log_options.warnings = options.verbosity >= 1;
  LatencyLog log(log_options);
  if (!log.Open(&error)) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), error.c_str());
    return 2;
  }

  // Then listen: a port in use is the commonest failure, report it at once.
  std::vector<uint16_t> ports{options.port};
  if (options.kit_twin && KitPortTwin(options.port) != options.port) {
    ports.push_back(KitPortTwin(options.port));
  }
  std::vector<int> listeners;
  std::vector<std::string> where;
  for (const uint16_t port : ports) {
    SocketAddress address;
    ParseSocketAddress(options.ip, port, &address);  // validated by the parser
    bool in_use = false;
    const int fd = ListenTcp(address, &error, &in_use);
    if (fd < 0) {
      std::fprintf(stderr, "%s: %s%s\n", program.c_str(), error.c_str(),
                   port != options.port ? " (the byte-swapped twin of the port, where the kit "
                                          "client connects; --no-twin skips it)"
                                        : "");
      for (const int l : listeners) close(l);
      return 1;
    }
    listeners.push_back(fd);
    where.push_back(FormatSocketAddress(address));
  }

  ArtificialDelay delay{std::chrono::microseconds(options.delay_us), options.delay_mode};
  std::unique_ptr<Store> store = factory(options.n, &delay);
  RequestCounters counters;
  RequestHandler handler(store.get(), options.timing ? &log : nullptr, &counters);
  handler.set_log_rejects(options.verbosity >= 2, program);
  ConnectionLimits limits;
  limits.idle_timeout_ns = options.idle_timeout_ms * 1'000'000;
  limits.frame_timeout_ns = options.frame_timeout_ms * 1'000'000;
  limits.write_timeout_ns = options.write_timeout_ms * 1'000'000;
  std::unique_ptr<IoModel> io_model;
  if (options.io == IoKind::kThreadPerConnection) {
    io_model = std::make_unique<ThreadPerConnection>(&handler, limits);
  } else {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    io_model = std::make_unique<EventIoModel>(
        options.io == IoKind::kEpoll ? EventIoModel::Mode::kEpoll : EventIoModel::Mode::kPool,
        &handler, limits, cores > 0 ? static_cast<std::size_t>(cores) : 1,
        options.workers > 0 ? options.workers : kDefaultWorkers);
  }
  IoModel& io = *io_model;

  std::printf("%s: listening on %s", program.c_str(), where[0].c_str());
  if (where.size() > 1) {
    std::printf(" and %s (kit client port)", where[1].c_str());
  }
  std::printf(" n=%zu strategy=%.*s io=%.*s delay_us=%lld\n", options.n,
              static_cast<int>(store->name().size()), store->name().data(),
              static_cast<int>(io.name().size()), io.name().data(),
              static_cast<long long>(options.delay_us));
  std::fflush(stdout);

  AcceptStats accept_stats;
  AcceptLoop(listeners, io_model.get(), options.max_connections, program, options.verbosity >= 1,
             &accept_stats);
  for (const int fd : listeners) close(fd);
  // Requests in flight finish; the whole stop must take under a second.
  const std::size_t left = io.Drain(MonotonicNanos() + 800'000'000);
  log.Flush();

  const LatencyTotals t = log.Totals();
  std::printf(
      "%s: summary requests=%llu errors=%llu mean_latency_s=%e mean_wait_s=%e "
      "mean_hold_s=%e mean_queue_s=%e mean_delay_slept_us=%.2f "
      "mean_delay_s=%e mean_cpu_wait_s=%e cpu_wait_samples=%llu connections=%llu "
      "unfinished_connections=%zu refused=%llu accept_errors=%llu "
      "timing_lines_lost=%llu frames_cut_by_shutdown=%llu\n",
      program.c_str(),
      static_cast<unsigned long long>(options.timing ? t.requests + t.rejected
                                                     : counters.frames.load()),
      static_cast<unsigned long long>(options.timing ? t.rejected : counters.rejected.load()),
      t.mean_latency_s, t.mean_wait_s, t.mean_hold_s, t.mean_queue_s, delay.MeanSleptNanos() / 1e3,
      t.mean_delay_s, t.mean_cpu_wait_s, static_cast<unsigned long long>(t.cpu_wait_samples),
      static_cast<unsigned long long>(accept_stats.accepted), left,
      static_cast<unsigned long long>(accept_stats.refused),
      static_cast<unsigned long long>(accept_stats.accept_errors),
      static_cast<unsigned long long>(t.lines_lost),
      static_cast<unsigned long long>(counters.cut_by_shutdown.load()));
  std::fflush(stdout);
  if (left > 0) {
    // Connection threads still use the store; do not destroy it under them.
    std::fflush(nullptr);
    std::_Exit(0);
  }
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
