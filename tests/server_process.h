// Test support: start a real server binary on loopback and talk to it.
//
// After memcached's t/lib/MemcachedTest.pm (free_port, new_memcached) and
// redis' tests/support/server.tcl (start_server): the server is started as a
// child process, the test waits for its ready line, and every read has a
// timeout so a hung server fails the test instead of hanging it.
#ifndef KV_TESTS_SERVER_PROCESS_H_
#define KV_TESTS_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/protocol.h"

namespace kv::testing_support {

// True when built with ASan or TSan: the binaries run several times slower,
// so deadlines that tests check get a sanitizer allowance.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// Path of a binary built next to the tests (LOCKBENCH_BIN_DIR).
std::string BinaryPath(const std::string& name);

// A loopback TCP port that is free, and whose byte-swapped kit twin is free
// too (both probed by binding).
uint16_t FreePortPair();

// A running child process with its stdout captured.
class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess();  // SIGKILLs the child if it still runs
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts `binary` with `args` in working directory `cwd` (empty: inherit)
  // and waits up to 10 s for a stdout line containing "listening on".
  // Returns false (with the output so far in *output) if the process exited
  // or never got ready.
  bool Start(const std::string& binary, const std::vector<std::string>& args,
             const std::string& cwd = "", std::string* output = nullptr,
             const std::vector<std::string>& extra_env = {});

  // Sends `signal`, waits up to `timeout_ms` for the exit, and returns the
  // exit status (the signal number + 128 if killed by one; -1 on timeout,
  // after which the child is killed). *output gets everything it printed.
  int Stop(int signal, int timeout_ms, std::string* output);

  // Waits for the process to exit by itself (no signal); as Stop().
  int Wait(int timeout_ms, std::string* output);

  pid_t pid() const { return pid_; }
  bool running() const;

 private:
  void ReadAvailable(int timeout_ms);
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string out_;
};

// Runs a command to completion (up to timeout_ms), capturing stdout+stderr.
// Returns the exit status as in Stop().
int RunCommand(const std::string& binary, const std::vector<std::string>& args, std::string* output,
               int timeout_ms = 30'000);

// A TCP client connection with timeouts, for raw protocol tests.
class TestConnection {
 public:
  explicit TestConnection(uint16_t port, const std::string& ip = "127.0.0.1");
  ~TestConnection();
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool SendBytes(const std::string& bytes);
  bool SendRequest(const std::string& text);  // padded to a 100-byte frame
  void HalfClose();
  // Reads one 100-byte reply, its first byte within timeout_ms and the rest
  // within timeout_ms of that (the server's own reader, net.h); returns its
  // text, or "<closed>" / "<timeout>" / "<short N>".
  std::string ReadReply(int timeout_ms = 5000);
  // Waits up to timeout_ms for the server to close; true if it did.
  bool WaitClosed(int timeout_ms);

 private:
  int fd_ = -1;
};

// True if `line` is one number as C's printf("%e") writes it, e.g.
// "8.531204e-03" (optional '-', d.dddddd, 'e', sign, two or three digits).
// Hand-written rather than std::regex: GCC 12 warns inside <regex> at -O2.
bool IsPrintfE(std::string_view line);

// One request on a new connection (the kit's pattern); returns the reply text.
std::string OneShot(uint16_t port, const std::string& text);

}  // namespace kv::testing_support

#endif  // KV_TESTS_SERVER_PROCESS_H_
