#include "common/io_registry.h"

#include <algorithm>
#include <type_traits>

#include "common/epoll_io.h"
#include "common/pool_io.h"
#include "common/thread_per_connection.h"
#ifdef LOCKBENCH_HAVE_URING
#include "common/uring_io.h"
#endif

namespace kv {
namespace {

// A model made from what its constructor takes: the handler and limits only
// (a thread per connection), a worker count (the pool), or a Config of loops,
// workers and inline_requests (the event-loop models).
template <typename Model>
std::unique_ptr<IoModel> Create(const IoModelConfig& config, RequestHandler* handler,
                                const ConnectionLimits& limits) {
  if constexpr (std::is_constructible_v<Model, RequestHandler*, const ConnectionLimits&>) {
    return std::make_unique<Model>(handler, limits);
  } else if constexpr (std::is_constructible_v<Model, std::size_t, RequestHandler*,
                                               const ConnectionLimits&>) {
    return std::make_unique<Model>(config.workers, handler, limits);
  } else {
    typename Model::Config model_config;
    model_config.loops = config.loops;
    model_config.workers = config.workers;
    model_config.inline_requests = config.inline_requests;
    return std::make_unique<Model>(model_config, handler, limits);
  }
}

// The table: name, description, why not built (empty: built), the kernel's
// probe, runs requests inline, factory. The first row is the default.
constexpr IoModelInfo kIoModels[] = {
    {"thread", "a thread per connection, the lab's", "", nullptr, false,
     &Create<ThreadPerConnection>},
    {"pool", "fixed workers fed by the acceptor", "", nullptr, false, &Create<PoolIoModel>},
    {"epoll", "event loops that accept for themselves; lock work on workers when there is a delay",
     "", nullptr, true, &Create<EpollIoModel>},
#ifdef LOCKBENCH_HAVE_URING
    {"uring", "the same loops on io_uring", "", &UringIoModel::Probe, true, &Create<UringIoModel>},
#else
    {"uring", "the same loops on io_uring", "liburing was not found at build time", nullptr, true,
     nullptr},
#endif
};

}  // namespace

std::span<const IoModelInfo> AllIoModels() { return kIoModels; }

const IoModelInfo* FindIoModel(std::string_view name) {
  const auto it = std::find_if(std::begin(kIoModels), std::end(kIoModels),
                               [name](const IoModelInfo& m) { return m.name == name; });
  return it == std::end(kIoModels) ? nullptr : &*it;
}

const IoModelInfo& DefaultIoModel() { return kIoModels[0]; }

std::string DescribeIoModels() {
  std::string out = "I/O model: ";
  for (const IoModelInfo& m : kIoModels) {
    if (&m != &kIoModels[0]) out += ", ";
    out += m.name;
    out += " (";
    out += m.description;
    out += ")";
  }
  return out;
}

}  // namespace kv
