// The bounds of the command lines, in one place: the servers' options
// (server_options.cpp), the client's (client/client_options.cpp), and the
// analysis package's checks of the values it passes on (analysis/__main__.py's
// MAX_* names, tied to this file by analysis/tests/test_limits.py, which reads
// it: keep each bound a plain decimal literal, digit separators allowed).
#ifndef KV_COMMON_LIMITS_H_
#define KV_COMMON_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace kv {

// n, the strings in the array: the servers' and the client's positional.
inline constexpr std::size_t kMaxArraySize = 10'000'000;
// The artificial delay, microseconds (servers' --delay-us).
inline constexpr int64_t kMaxDelayUs = 1'000'000;
// Lock stripes (lockserver --stripes), 2^20; more than n are clamped to n.
inline constexpr std::size_t kMaxStripes = 1'048'576;

// Threads. The client's threads T (--threads, each point of a list).
inline constexpr uint32_t kMaxClientThreads = 4'096;
// The servers' worker threads (--workers) and event loops (--loops).
inline constexpr std::size_t kMaxWorkers = 4'096;
inline constexpr std::size_t kMaxLoops = 256;

// Connections: served at once by a server (--max-connections), and the
// client's keep-alive connections in all (--connections).
inline constexpr std::size_t kMaxConnections = 1'000'000;
inline constexpr uint32_t kMaxClientConnections = 65'536;

// Any duration on the client's command line, seconds: one day.
inline constexpr double kMaxSeconds = 86'400;

}  // namespace kv

#endif  // KV_COMMON_LIMITS_H_
