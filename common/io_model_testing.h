// Tests only: every I/O model under test, read from the I/O model table
// (io_registry.h): each model built in, and again with its loops running the
// requests themselves where it can (connection_test.cpp, alloc_free_test.cpp).
// Each test hands it connections with Dispatch().
#ifndef KV_COMMON_IO_MODEL_TESTING_H_
#define KV_COMMON_IO_MODEL_TESTING_H_

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "common/connection_core.h"
#include "common/io_model.h"
#include "common/io_registry.h"
#include "common/request_handler.h"

namespace kv {

// A row of the table, with or without inline requests (no delay).
struct Model {
  const IoModelInfo* info = nullptr;
  bool inline_requests = false;
};

// "thread", "epoll", "epoll_inline", ...
inline std::string ModelLabel(const Model& model) {
  return std::string(model.info->name) + (model.inline_requests ? "_inline" : "");
}
inline std::string ModelName(const testing::TestParamInfo<Model>& info) {
  return ModelLabel(info.param);
}
inline void PrintTo(const Model& model, std::ostream* os) { *os << ModelLabel(model); }

// The built-in model `name`, run `inline_requests` or not.
inline Model TestedModel(std::string_view name, bool inline_requests = false) {
  return Model{FindIoModel(name), inline_requests};
}

// Two loops and two workers: enough for hand-offs between loops.
inline std::unique_ptr<IoModel> MakeModel(Model model, RequestHandler* handler,
                                          const ConnectionLimits& limits) {
  IoModelConfig config;
  config.loops = 2;
  config.workers = 2;
  config.inline_requests = model.inline_requests;
  return model.info->create(config, handler, limits);
}

inline std::vector<Model> TestedModels() {
  std::vector<Model> models;
  for (const IoModelInfo& info : AllIoModels()) {
    if (!info.built()) continue;
    models.push_back({&info, false});
    if (info.runs_inline) models.push_back({&info, true});
  }
  return models;
}

inline auto AllModels() { return testing::ValuesIn(TestedModels()); }

// The --io words of the built-in models, for the tests that start servers.
inline std::vector<std::string> BuiltIoModelNames() {
  std::vector<std::string> names;
  for (const IoModelInfo& info : AllIoModels()) {
    if (info.built()) names.emplace_back(info.name);
  }
  return names;
}

}  // namespace kv

#endif  // KV_COMMON_IO_MODEL_TESTING_H_
