#include "tests/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "common/clock.h"
#include "common/net.h"
#include "tests/frame_reader.h"

extern char** environ;

namespace kv::testing_support {
namespace {

// Whether `port` is free on 127.0.0.1 and, where the machine has IPv6, on ::1
// (a test may serve either).
bool CanBind(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  if (!ok) return false;
  const int fd6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd6 < 0) return true;  // no IPv6 here
  sockaddr_in6 a6{};
  a6.sin6_family = AF_INET6;
  a6.sin6_port = htons(port);
  a6.sin6_addr = in6addr_loopback;
  const bool ok6 = bind(fd6, reinterpret_cast<sockaddr*>(&a6), sizeof a6) == 0 ||
                   errno == EADDRNOTAVAIL;  // ::1 not configured: nothing to clash with
  close(fd6);
  return ok6;
}

int ExitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

pid_t Spawn(const std::string& binary, const std::vector<std::string>& args, const std::string& cwd,
            int* out_fd, bool merge_stderr, const std::vector<std::string>& extra_env) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  std::vector<std::string> argv_s{binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
  env_s.insert(env_s.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
  if (merge_stderr) posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDERR_FILENO);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    return -1;
  }
  *out_fd = pipefd[0];
  return pid;
}

}  // namespace

std::string BinaryPath(const std::string& name) {
  return std::string(LOCKBENCH_BIN_DIR) + "/" + name;
}

uint16_t FreePortPair() {
  std::mt19937 rng(static_cast<unsigned>(::getpid()) ^ static_cast<unsigned>(MonotonicNanos()));
  for (int attempt = 0; attempt < 1000; ++attempt) {
    // Both bytes in [4, 127]: the port and its byte-swapped kit twin both lie in
    // [1028, 32639], above the privileged ports and below the ephemeral range
    // (where client TIME_WAIT sockets of an earlier run could make a bind fail).
    const auto hi = static_cast<uint16_t>(4 + rng() % 124);
    const auto lo = static_cast<uint16_t>(4 + rng() % 124);
    const auto port = static_cast<uint16_t>((hi << 8) | lo);
    const uint16_t twin = KitPortTwin(port);
    if (twin == port) continue;
    if (CanBind(port) && CanBind(twin)) return port;
  }
  return 0;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

bool ServerProcess::running() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }

void ServerProcess::ReadAvailable(int timeout_ms) {
  pollfd p{out_fd_, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return;
  char buf[4096];
  const ssize_t r = read(out_fd_, buf, sizeof buf);
  if (r > 0) out_.append(buf, static_cast<std::size_t>(r));
}

bool ServerProcess::Start(const std::string& binary, const std::vector<std::string>& args,
                          const std::string& cwd, std::string* output,
                          const std::vector<std::string>& extra_env) {
  pid_ = Spawn(binary, args, cwd, &out_fd_, /*merge_stderr=*/false, extra_env);
  if (pid_ < 0) return false;
  const int64_t deadline = MonotonicNanos() + 10'000'000'000;
  while (MonotonicNanos() < deadline) {
    if (out_.find("listening on") != std::string::npos) {
      if (output) *output = out_;
      return true;
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      ReadAvailable(100);
      pid_ = -1;
      if (output) *output = out_;
      return false;
    }
    ReadAvailable(50);
  }
  if (output) *output = out_;
  return false;
}

int ServerProcess::Wait(int timeout_ms, std::string* output) {
  const int64_t deadline = MonotonicNanos() + int64_t{timeout_ms} * 1'000'000;
  int result = -1;
  while (pid_ > 0) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      result = ExitStatus(status);
      pid_ = -1;
      break;
    }
    if (MonotonicNanos() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
      break;
    }
    ReadAvailable(20);
  }
  // Collect the rest of the output.
  for (;;) {
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) break;
    char buf[4096];
    const ssize_t r = read(out_fd_, buf, sizeof buf);
    if (r <= 0) break;
    out_.append(buf, static_cast<std::size_t>(r));
  }
  if (output) *output = out_;
  return result;
}

int ServerProcess::Stop(int signal, int timeout_ms, std::string* output) {
  if (pid_ > 0) kill(pid_, signal);
  return Wait(timeout_ms, output);
}

int RunCommand(const std::string& binary, const std::vector<std::string>& args, std::string* output,
               int timeout_ms) {
  int fd = -1;
  const pid_t pid = Spawn(binary, args, "", &fd, /*merge_stderr=*/true, {});
  if (pid < 0) return -1;
  std::string out;
  const int64_t deadline = MonotonicNanos() + int64_t{timeout_ms} * 1'000'000;
  int result = -1;
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, 20) > 0) {
      char buf[4096];
      const ssize_t r = read(fd, buf, sizeof buf);
      if (r > 0) out.append(buf, static_cast<std::size_t>(r));
    }
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      result = ExitStatus(status);
      break;
    }
    if (MonotonicNanos() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      break;
    }
  }
  for (;;) {
    char buf[4096];
    const ssize_t r = read(fd, buf, sizeof buf);
    if (r <= 0) break;
    out.append(buf, static_cast<std::size_t>(r));
  }
  close(fd);
  if (output) *output = out;
  return result;
}

TestConnection::TestConnection(uint16_t port, const std::string& ip) {
  SocketAddress a;
  if (!ParseSocketAddress(ip, port, &a)) return;
  fd_ = socket(a.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  if (connect(fd_, reinterpret_cast<const sockaddr*>(&a.storage), a.length) != 0) {
    close(fd_);
    fd_ = -1;
  }
}

TestConnection::~TestConnection() {
  if (fd_ >= 0) close(fd_);
}

bool TestConnection::SendBytes(const std::string& bytes) {
  return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

bool TestConnection::SendRequest(const std::string& text) {
  Frame f;
  FillFrame(text, &f);
  return SendBytes(std::string(f.data(), f.size()));
}

void TestConnection::HalfClose() { shutdown(fd_, SHUT_WR); }

std::string TestConnection::ReadReply(int timeout_ms) {
  char buf[kFrameSize];
  std::size_t got = 0;
  const int64_t timeout_ns = int64_t{timeout_ms} * 1'000'000;
  const FrameRead r = ReadFrameBounded(fd_, buf, &got, MonotonicNanos() + timeout_ns, timeout_ns);
  switch (r) {
    case FrameRead::kFrame:
      return std::string(FrameText(std::string_view(buf, got)));
    case FrameRead::kClosed:
    case FrameRead::kError:
    case FrameRead::kStopped:
      return "<closed>";
    case FrameRead::kTimeout:
      return got == 0 ? "<timeout>" : "<short " + std::to_string(got) + ">";
    case FrameRead::kShortFrame:
      return "<short " + std::to_string(got) + ">";
  }
  return "<?>";
}

bool TestConnection::WaitClosed(int timeout_ms) { return ReadReply(timeout_ms) == "<closed>"; }

bool IsPrintfE(std::string_view line) {
  auto digits = [&line](std::size_t from, std::size_t count) {
    if (from + count > line.size()) return false;
    for (std::size_t i = from; i < from + count; ++i) {
      if (line[i] < '0' || line[i] > '9') return false;
    }
    return true;
  };
  if (!line.empty() && line[0] == '-') line.remove_prefix(1);
  // d . dddddd e sign dd[d]
  if (line.size() != 12 && line.size() != 13) return false;
  return digits(0, 1) && line[1] == '.' && digits(2, 6) && line[8] == 'e' &&
         (line[9] == '-' || line[9] == '+') && digits(10, line.size() - 10);
}

std::string OneShot(uint16_t port, const std::string& text) {
  TestConnection c(port);
  if (!c.ok()) return "<connect failed>";
  if (!c.SendRequest(text)) return "<send failed>";
  return c.ReadReply();
}

}  // namespace kv::testing_support
