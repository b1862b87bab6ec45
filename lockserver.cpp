// lockserver: the generic server. Same core, protocol, options and kit
// compatibility as main1..main4, with the locking strategy chosen at run time:
//
//   lockserver --strategy NAME [--stripes K] <n> <ip> <port> [mainN options]
//   lockserver --list-strategies
//   lockserver --list-locks       what liblockprof can swap in (profile/)
//
// --strategy, --stripes and --list-strategies go through the same parser and
// the same decimal-only validators as every mainN option
// (common/server_options.h). Exit status: as mainN (0 after a stop signal or
// --help/--list-strategies/--list-locks, 1 if it cannot listen, 2 on bad arguments,
// including an unknown or missing strategy, with one line on stderr).
#include <cstdio>
#include <string>

#include "common/server.h"
#include "common/server_options.h"
#include "common/strategy_registry.h"

namespace {
constexpr char kProgram[] = "lockserver";
}  // namespace

int main(int argc, char** argv) {
  kv::ServerOptions options;
  kv::GenericFlags flags;
  const kv::ParseOutcome outcome =
      kv::ParseServerOptions(argc, argv, kProgram, "chosen with --strategy", &options, &flags);
  if (outcome.action == kv::ParseOutcome::Action::kExit) {
    return outcome.exit_code;
  }
  if (flags.list || flags.list_locks) {
    std::fputs((flags.list ? kv::DescribeStrategies() : kv::DescribeSwapLocks()).c_str(), stdout);
    return 0;
  }
  const kv::StrategyInfo* strategy = kv::FindStrategy(flags.strategy);
  if (strategy == nullptr) return 2;  // the parser has checked the name
  if (flags.stripes != 0 && !strategy->uses_stripes) {
    std::fprintf(stderr,
                 "%s: error: --stripes applies to striped-* strategies only, "
                 "not %s (see '%s --help')\n",
                 kProgram, std::string(strategy->name).c_str(), kProgram);
    return 2;
  }
  kv::StrategyConfig config;
  config.stripes = flags.stripes;
  return kv::RunServer(options, kProgram,
                       [strategy, config](std::size_t n, kv::ArtificialDelay* delay) {
                         return strategy->create(n, delay, config);
                       });
}
