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
#include "common/latency_log.h"
#include "common/net.h"
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
  struct sigaction sa{};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  if (sigaction(SIGINT, &sa, nullptr) != 0 ||
      sigaction(SIGTERM, &sa, nullptr) != 0 ||
      sigaction(SIGPIPE, &ignore, nullptr) != 0) {
    *error = std::string("sigaction: ") + std::strerror(errno);
    return false;
  }
  return true;
}

std::string BaseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// At most one line per second for errors that can repeat in a tight loop;
// none at all with --quiet.
class RateLimitedLog {
 public:
  explicit RateLimitedLog(bool enabled) : enabled_(enabled) {}
  void Warn(const std::string& program, const std::string& what) {
    if (!enabled_) return;
    const int64_t now = MonotonicNanos();
    if (now - last_ns_ < 1'000'000'000) return;
    last_ns_ = now;
    std::fprintf(stderr, "%s: %s\n", program.c_str(), what.c_str());
  }

 private:
  const bool enabled_;
  int64_t last_ns_ = -2'000'000'000;
};

// Accepts until the stop pipe fires. Returns the connections accepted.
uint64_t AcceptLoop(const std::vector<int>& listeners, IoModel* io,
                    const std::string& program, bool warnings) {
  std::vector<pollfd> fds;
  for (const int fd : listeners) fds.push_back({fd, POLLIN, 0});
  fds.push_back({g_stop_pipe[0], POLLIN, 0});
  RateLimitedLog log(warnings);
  uint64_t accepted = 0;
  for (;;) {
    for (auto& p : fds) p.revents = 0;
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      log.Warn(program, std::string("poll: ") + std::strerror(errno));
      continue;
    }
    if (fds.back().revents != 0) return accepted;
    for (std::size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      // Drain the backlog of this listener (it is non-blocking).
      for (;;) {
        const int conn = AcceptConnection(fds[i].fd);
        if (conn < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          // EMFILE, ENFILE, ENOBUFS...: the connection stays queued; back off
          // instead of spinning on a listener that stays readable.
          log.Warn(program, std::string("accept: ") + std::strerror(errno) +
                                " (backing off)");
          usleep(10'000);
          break;
        }
        ++accepted;
        if (!io->Dispatch(conn)) {
          log.Warn(program, std::string("cannot start a connection thread: ") +
                                std::strerror(errno));
        }
      }
    }
  }
}

}  // namespace

int RunServer(const ServerOptions& options, const std::string& program,
              const StoreMaker& factory) {
  std::string error;
  if (!InstallSignals(&error)) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    return 1;
  }
  if (options.timer_slack_ns > 0 &&
      prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(options.timer_slack_ns),
            0, 0, 0) != 0) {
    std::fprintf(stderr, "%s: prctl(PR_SET_TIMERSLACK): %s\n", program.c_str(),
                 std::strerror(errno));
    return 1;
  }

  // Listen first: a port in use is the commonest failure, report it at once.
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
                   port != options.port
                       ? " (the byte-swapped twin of the port, where the kit "
                         "client connects; --no-twin skips it)"
                       : "");
      for (const int l : listeners) close(l);
      return 1;
    }
    listeners.push_back(fd);
    where.push_back(FormatSocketAddress(address));
  }

  LatencyLog log(options.log);
  if (!log.Open(&error)) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    return 1;
  }
  ArtificialDelay delay{std::chrono::microseconds(options.delay_us)};
  std::unique_ptr<Store> store = factory(options.n, &delay);
  RequestCounters counters;
  RequestHandler handler(store.get(), &log, &counters);
  handler.set_log_rejects(options.verbosity >= 2, program);
  ConnectionLimits limits;
  limits.idle_timeout_ns = options.idle_timeout_ms * 1'000'000;
  ThreadPerConnection io(&handler, limits);

  std::printf("%s: listening on %s", program.c_str(), where[0].c_str());
  if (where.size() > 1) {
    std::printf(" and %s (kit client port)", where[1].c_str());
  }
  std::printf(" n=%zu strategy=%.*s io=%.*s delay_us=%lld\n", options.n,
              static_cast<int>(store->name().size()), store->name().data(),
              static_cast<int>(io.name().size()), io.name().data(),
              static_cast<long long>(options.delay_us));
  std::fflush(stdout);

  const uint64_t connections = AcceptLoop(listeners, &io, program, options.verbosity >= 1);
  for (const int fd : listeners) close(fd);
  // Requests in flight finish; the whole stop must take under a second.
  const std::size_t left = io.Drain(MonotonicNanos() + 800'000'000);
  log.Flush();

  const LatencyTotals t = log.Totals();
  std::printf(
      "%s: summary requests=%llu errors=%llu mean_latency_s=%e mean_wait_s=%e "
      "mean_hold_s=%e mean_delay_slept_us=%.2f connections=%llu "
      "unfinished_connections=%zu\n",
      program.c_str(),
      static_cast<unsigned long long>(counters.frames.load()),
      static_cast<unsigned long long>(counters.rejected.load()),
      t.mean_latency_s, t.mean_wait_s, t.mean_hold_s,
      delay.MeanSleptNanos() / 1e3, static_cast<unsigned long long>(connections),
      left);
  std::fflush(stdout);
  if (left > 0) {
    // Connection threads still use the store; do not destroy it under them.
    std::fflush(nullptr);
    std::_Exit(0);
  }
  return 0;
}

int RunServerMain(int argc, char** argv, StoreFactory factory,
                  std::string_view strategy) {
  const std::string program = BaseName(argc > 0 ? argv[0] : "server");
  ServerOptions options;
  const ParseOutcome outcome = ParseServerOptions(
      argc, argv, program, std::string(strategy), &options);
  if (outcome.action == ParseOutcome::Action::kExit) return outcome.exit_code;
  return RunServer(options, program, factory);
}

}  // namespace kv
