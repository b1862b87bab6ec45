// The shared server: main1..main4 are each one call to ServerMain().
//
//   int main(int argc, char** argv) {
//     return kv::ServerMain<kv::OneMutexStore>(argc, argv);
//   }
//
// ServerMain parses the kit's command line (server_options.h), builds the
// Store, listens on <ip>:<port> and on the port's byte-swapped twin (the kit
// client's port quirk, see net.h), and runs the accept loop, handing each
// connection to the I/O model (thread per connection, as the lab asks). It
// prints one ready line on stdout:
//   main1: listening on 127.0.0.1:3000 and 127.0.0.1:47115 (kit client port) ...
// On SIGINT/SIGTERM it stops accepting, lets requests in flight finish, prints
//   main1: summary requests=... errors=... mean_latency_s=... ...
// and returns 0 within a second. Returns 1 if it cannot listen (one line on
// stderr), 2 on bad arguments.
#ifndef KV_COMMON_SERVER_H_
#define KV_COMMON_SERVER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/server_options.h"
#include "common/store.h"

namespace kv {

// Runs a server whose Store comes from `factory`. `argv[0]`'s base name is
// the program name used in messages.
int RunServerMain(int argc, char** argv, StoreFactory factory, std::string_view strategy);

// Builds the Store for RunServer(); unlike StoreFactory it may carry
// run-time parameters (lockserver's --stripes), e.g. as a capturing lambda.
using StoreMaker = std::function<std::unique_ptr<Store>(std::size_t n, ArtificialDelay* delay)>;

// Runs a server with already-parsed options (for tests and other front ends).
// A StoreFactory converts to a StoreMaker.
int RunServer(const ServerOptions& options, const std::string& program, const StoreMaker& factory);

template <typename StoreT>
int ServerMain(int argc, char** argv) {
  return RunServerMain(argc, argv, &StoreT::Create, StoreT::kStrategyName);
}

}  // namespace kv

#endif  // KV_COMMON_SERVER_H_
