// ServerOptions: the command line of main1..main4 (and any strategy server).
//
//   mainN <n> <ip> <port> [options]     -- the kit's three arguments, in order
//
// ParseServerOptions() never exits the process: it returns what to do, so the
// caller decides (and tests can call it).
#ifndef KV_COMMON_SERVER_OPTIONS_H_
#define KV_COMMON_SERVER_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/artificial_delay.h"
#include "common/latency_log.h"

namespace kv {

inline constexpr std::size_t kMaxArraySize = 10'000'000;

struct ServerOptions {
  std::size_t n = 0;
  std::string ip;
  uint16_t port = 0;
  bool kit_twin = true;         // also listen on the byte-swapped kit port
  int64_t delay_us = 10;        // the kit's ART_DELAY
  DelayMode delay_mode = DelayMode::kUsleep;  // --delay-mode
  bool timing = true;  // false (--no-timing): no latency bookkeeping at all
  int64_t idle_timeout_ms = 5000;
  int64_t frame_timeout_ms = 1000;  // a frame must be whole this long after
                                    // its first byte (slowloris bound)
  int64_t write_timeout_ms = 5000;  // a reply the peer does not take
  std::size_t max_connections = 4096;  // more are refused (accept, reply
                                       // "ERROR server busy", close)
  int64_t timer_slack_ns = -1;  // -1: leave the kernel default (50 us)
  int verbosity = 1;            // 0 quiet, 1 normal, 2 verbose
  LatencyLogOptions log;
};

struct ParseOutcome {
  enum class Action { kRun, kExit } action = Action::kRun;
  int exit_code = 0;  // with kExit: 0 after --help, 2 after a usage error
};

// Parses argv into *options. Prints --help to stdout, and usage errors
// ("error: ..." plus the usage) to stderr. `program` names the binary in
// messages, `strategy` is described in --help.
ParseOutcome ParseServerOptions(int argc, char** argv, const std::string& program,
                                const std::string& strategy,
                                ServerOptions* options);

}  // namespace kv

#endif  // KV_COMMON_SERVER_OPTIONS_H_
