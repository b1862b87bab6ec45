// ServerOptions: the command line of main1..main4 (and any strategy server).
//
//   mainN <n> <ip> <port> [options]     -- the kit's three arguments, in order
//   lockserver --strategy NAME [--stripes K] <n> <ip> <port> [options]
//
// Every number, the positionals n and port included, follows the one rule of
// common/numbers.h: decimal digits only, read as the kit's atoi() reads them
// ("03000" is 3000, never octal); a sign, "0x10", "1e3", "1.5", "nan", " 5"
// or an empty value is refused, as is anything outside the option's range. A
// refused value gets ONE line on stderr naming the option, the value and the
// range, e.g.
//   main1: error: --delay-us: '1.5' is not a decimal integer (digits only); allowed 0..1000000 (see
//   'main1 --help')
// and exit status 2, before anything starts (no socket, no file).
//
// ParseServerOptions() never exits the process: it returns what to do, so the
// caller decides (and tests can call it).
#ifndef KV_COMMON_SERVER_OPTIONS_H_
#define KV_COMMON_SERVER_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/artificial_delay.h"
#include "common/io_registry.h"
#include "common/latency_log.h"
#include "common/limits.h"
#include "common/status.h"

namespace kv {

struct ServerOptions {
  std::size_t n = 0;
  std::string ip;
  uint16_t port = 0;
  bool kit_twin = true;                       // also listen on the byte-swapped kit port
  int64_t delay_us = 10;                      // the kit's ART_DELAY
  DelayMode delay_mode = DelayMode::kUsleep;  // --delay-mode
  int64_t spin_ns = -1;                       // --spin-ns; -1: measure the wake-up latency
  bool timing = true;                         // false (--no-timing): no latency bookkeeping at all
  int64_t idle_timeout_ms = 5000;
  int64_t frame_timeout_ms = 1000;     // a frame must be whole this long after
                                       // its first byte (slowloris bound)
  int64_t write_timeout_ms = 5000;     // a reply the peer does not take
  std::size_t max_connections = 4096;  // more are refused (accept, reply
                                       // "ERROR server busy", close)
  int64_t timer_slack_ns = -1;         // -1: leave the kernel default (50 us)
  int verbosity = 1;                   // 0 quiet, 1 normal, 2 verbose
  // How accepted connections are served (--io): a built-in row of the I/O
  // model table (io_registry.h).
  const IoModelInfo* io = &DefaultIoModel();
  std::size_t workers = 0;         // pool/epoll worker threads; 0: default
  std::size_t loops = 0;           // epoll event loops; 0: one per core
  bool close_after_reply = false;  // one request per connection
  LatencyLogOptions log;
};

// lockserver's own flags, parsed by the same parser (pass a non-null
// GenericFlags to ParseServerOptions to enable them).
struct GenericFlags {
  std::string strategy;     // --strategy NAME, checked against the registry
  std::size_t stripes = 0;  // --stripes K (decimal, 1..kMaxStripes); 0: not given
  bool list = false;        // --list-strategies (n, ip, port not needed)
  bool list_locks = false;  // --list-locks (n, ip, port not needed)
};

struct ParseOutcome {
  enum class Action { kRun, kExit } action = Action::kRun;
  int exit_code = 0;  // with kExit: 0 after --help, 2 after a usage error
};

// Parses argv into *options. Prints --help to stdout, and a usage error as
// one line ("<program>: error: ...") to stderr. `program` names the binary in
// messages, `strategy` is described in --help. With `generic` non-null the
// lockserver flags are accepted too (--strategy is then required unless
// --list-strategies or --list-locks is given; then the caller prints the
// list and n, ip, port may be omitted).
ParseOutcome ParseServerOptions(int argc, char** argv, const std::string& program,
                                const std::string& strategy, ServerOptions* options,
                                GenericFlags* generic = nullptr);

}  // namespace kv

#endif  // KV_COMMON_SERVER_OPTIONS_H_
