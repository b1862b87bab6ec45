// Tests only: every I/O model under test, by name (connection_test.cpp,
// alloc_free_test.cpp). Each test hands it connections with Dispatch().
#ifndef KV_COMMON_IO_MODEL_TESTING_H_
#define KV_COMMON_IO_MODEL_TESTING_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/connection_core.h"
#include "common/epoll_io.h"
#include "common/io_model.h"
#include "common/pool_io.h"
#include "common/request_handler.h"
#include "common/thread_per_connection.h"
#ifdef LOCKBENCH_HAVE_URING
#include "common/uring_io.h"
#endif

namespace kv {

// kEpollInline, kUringInline: loops that run the requests themselves (no
// delay). The uring models are there when liburing was found.
enum class Model { kThread, kPool, kEpoll, kEpollInline, kUring, kUringInline };

inline std::string ModelName(const testing::TestParamInfo<Model>& info) {
  constexpr const char* kNames[] = {"thread",       "pool",  "epoll",
                                    "epoll_inline", "uring", "uring_inline"};
  return kNames[static_cast<int>(info.param)];
}

inline std::unique_ptr<IoModel> MakeModel(Model model, RequestHandler* handler,
                                          const ConnectionLimits& limits) {
  if (model == Model::kThread) return std::make_unique<ThreadPerConnection>(handler, limits);
  if (model == Model::kPool) return std::make_unique<PoolIoModel>(2, handler, limits);
#ifdef LOCKBENCH_HAVE_URING
  if (model == Model::kUring || model == Model::kUringInline) {
    UringIoModel::Config config;
    config.loops = 2;
    config.workers = 2;
    config.inline_requests = model == Model::kUringInline;
    return std::make_unique<UringIoModel>(config, handler, limits);
  }
#endif
  EpollIoModel::Config config;
  config.loops = 2;
  config.workers = 2;
  config.inline_requests = model == Model::kEpollInline;
  return std::make_unique<EpollIoModel>(config, handler, limits);
}

inline auto AllModels() {
#ifdef LOCKBENCH_HAVE_URING
  return testing::Values(Model::kThread, Model::kPool, Model::kEpoll, Model::kEpollInline,
                         Model::kUring, Model::kUringInline);
#else
  return testing::Values(Model::kThread, Model::kPool, Model::kEpoll, Model::kEpollInline);
#endif
}

}  // namespace kv

#endif  // KV_COMMON_IO_MODEL_TESTING_H_
