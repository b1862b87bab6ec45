// lockserver: the generic server. Same core, protocol, options and kit
// compatibility as main1..main4, with the locking strategy chosen at run time:
//
//   lockserver --strategy NAME [--stripes K] <n> <ip> <port> [mainN options]
//   lockserver --list-strategies
//
// --strategy and --stripes are taken out of the command line here; the rest
// goes to the parser main1..main4 use (common/server_options.h), so every
// mainN option works unchanged. Exit status: as mainN (0 after SIGINT/SIGTERM
// or --help/--list-strategies, 1 if it cannot listen, 2 on bad arguments,
// including an unknown or missing strategy).
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "common/server.h"
#include "common/server_options.h"
#include "common/store_striped.h"
#include "common/strategy_registry.h"

namespace {

constexpr char kProgram[] = "lockserver";

void PrintUsage(std::FILE* to) {
  std::fprintf(to,
               "Usage: %s --strategy NAME [--stripes K] <n> <ip> <port> "
               "[options]\n"
               "       %s --list-strategies\n"
               "  --strategy NAME   locking strategy, one of:\n%s"
               "  --stripes K       lock stripes for striped-* strategies "
               "(1..%zu, default %zu, clamped to n)\n"
               "Other options are those of main1..main4 (see --help).\n",
               kProgram, kProgram, kv::DescribeStrategies().c_str(),
               kv::kMaxStripes, kv::kDefaultStripes);
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\n\n", kProgram, message.c_str());
  PrintUsage(stderr);
  return 2;
}

// The generic server's own flags, removed from argv before the common parse.
struct GenericFlags {
  std::string strategy;
  std::string stripes;  // as given; parsed later
  bool list = false;
  bool help = false;
};

// Splits argv into lockserver's flags and the rest (args[0] = program).
// Returns an error message, or "" on success.
std::string TakeGenericFlags(int argc, char** argv, GenericFlags* flags,
                             std::vector<char*>* rest) {
  rest->push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value_of = [&](std::string_view flag, std::string* out) -> int {
      // 1: matched "--flag VALUE" or "--flag=VALUE"; 0: not this flag;
      // -1: flag without its value.
      if (arg == flag) {
        if (i + 1 >= argc) return -1;
        *out = argv[++i];
        return 1;
      }
      if (arg.size() > flag.size() && arg.substr(0, flag.size()) == flag &&
          arg[flag.size()] == '=') {
        *out = std::string(arg.substr(flag.size() + 1));
        return 1;
      }
      return 0;
    };
    int r = value_of("--strategy", &flags->strategy);
    if (r == 0) r = value_of("--stripes", &flags->stripes);
    if (r < 0) return std::string(arg) + " needs a value";
    if (r > 0) continue;
    if (arg == "--list-strategies") {
      flags->list = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") flags->help = true;
    rest->push_back(argv[i]);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  GenericFlags flags;
  std::vector<char*> rest;
  if (const std::string error = TakeGenericFlags(argc, argv, &flags, &rest);
      !error.empty()) {
    return UsageError(error);
  }
  if (flags.list) {
    std::fputs(kv::DescribeStrategies().c_str(), stdout);
    return 0;
  }
  if (flags.help) PrintUsage(stdout);  // then the common options below

  const kv::StrategyInfo* strategy = nullptr;
  if (!flags.help) {
    if (flags.strategy.empty()) return UsageError("--strategy is required");
    strategy = kv::FindStrategy(flags.strategy);
    if (strategy == nullptr) {
      return UsageError("unknown strategy '" + flags.strategy +
                        "' (known: " + kv::StrategyNames() + ")");
    }
  }
  kv::StrategyConfig config;
  if (!flags.stripes.empty()) {
    const char* first = flags.stripes.data();
    const char* last = first + flags.stripes.size();
    const auto [end, ec] = std::from_chars(first, last, config.stripes);
    if (ec != std::errc() || end != last || config.stripes < 1 ||
        config.stripes > kv::kMaxStripes) {
      return UsageError("--stripes '" + flags.stripes + "' must be 1.." +
                        std::to_string(kv::kMaxStripes));
    }
    if (strategy != nullptr && !strategy->uses_stripes) {
      return UsageError("--stripes applies to striped-* strategies only, not " +
                        std::string(strategy->name));
    }
  }

  kv::ServerOptions options;
  const kv::ParseOutcome outcome = kv::ParseServerOptions(
      static_cast<int>(rest.size()), rest.data(), kProgram,
      strategy != nullptr ? std::string(strategy->name)
                          : "chosen with --strategy",
      &options);
  if (outcome.action == kv::ParseOutcome::Action::kExit) {
    return outcome.exit_code;
  }
  return kv::RunServer(
      options, kProgram,
      [strategy, config](std::size_t n, kv::ArtificialDelay* delay) {
        return strategy->create(n, delay, config);
      });
}
