// The I/O model registry: every --io model by name, with a one-line
// description, its factory, and what decides whether it can run here (built
// in or not; the kernel's say, probed at start). One row per model, in
// io_registry.cpp, the way strategy_registry.h lists the strategies.
//
// Everything that names the models reads this table: the server's --io option
// (its allowed words and its --help line), the refusal of a model left out of
// the build or refused by the kernel, MakeIoModel (server.cpp), and the
// tests' lists of models (common/io_model_testing.h, tests/abuse_test.cpp,
// tests/server_integration_test.cpp). A new model is its own files, one row
// and its CMake line.
//
// Thread safety: the table is immutable; every function here may be called
// from any thread.
#ifndef KV_COMMON_IO_REGISTRY_H_
#define KV_COMMON_IO_REGISTRY_H_

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/connection_core.h"
#include "common/io_model.h"
#include "common/request_handler.h"
#include "common/status.h"

namespace kv {

// What a model is built with; each model reads only what it uses.
struct IoModelConfig {
  std::size_t loops = 1;    // event loops (epoll, uring)
  std::size_t workers = 1;  // worker threads (pool, epoll, uring)
  // No access ever sleeps: a model whose loops can run requests themselves
  // does (IoModelInfo::runs_inline).
  bool inline_requests = false;
};

struct IoModelInfo {
  std::string_view name;         // the --io word, e.g. "epoll"
  std::string_view description;  // one line, for --help
  // Empty when the model is in this build; else why not (e.g. "liburing was
  // not found at build time"): --io NAME is then refused.
  std::string_view not_built;
  // Null when the model runs wherever it is built; else OK, or the reason the
  // kernel refuses it here (a whole phrase: "the kernel refuses io_uring here
  // (...)"), checked once at start.
  Status (*probe)();
  // Honours IoModelConfig::inline_requests (its loops may run requests
  // themselves), so the tests run it both ways.
  bool runs_inline;
  // Null when not built. `handler` must outlive the model.
  std::unique_ptr<IoModel> (*create)(const IoModelConfig& config, RequestHandler* handler,
                                     const ConnectionLimits& limits);

  bool built() const { return not_built.empty(); }
};

// Every model, the default (the lab's thread per connection) first, built in
// or not, in a fixed order.
std::span<const IoModelInfo> AllIoModels();

// The model called `name` (built in or not), or nullptr if there is none.
const IoModelInfo* FindIoModel(std::string_view name);

// The model the server runs without --io.
const IoModelInfo& DefaultIoModel();

// "I/O model: thread (a thread per connection, the lab's), pool (...), ...":
// every model with its description, for --help.
std::string DescribeIoModels();

}  // namespace kv

#endif  // KV_COMMON_IO_REGISTRY_H_
