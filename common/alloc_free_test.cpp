// No allocation per request (issue 11 item 3): a keep-alive connection served
// by each --io model, with a real RequestHandler and store, must not call
// operator new once it is warm. Its own binary: the global operator new here
// counts every allocation of the process.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "common/artificial_delay.h"
#include "common/clock.h"
#include "common/event_io.h"
#include "common/latency_log.h"
#include "common/protocol.h"
#include "common/request_handler.h"
#include "common/store_mutex_per_slot.h"
#include "common/thread_per_connection.h"
#include "common/unique_fd.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

// Every form of operator new the program may use goes through these two;
// the deletes free what malloc gave (GCC cannot see that they pair up).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return operator new(size, tag);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace kv {
namespace {

enum class Model { kThread, kPool, kEpoll };

std::string ModelName(const testing::TestParamInfo<Model>& info) {
  return info.param == Model::kThread ? "thread" : info.param == Model::kPool ? "pool" : "epoll";
}

std::unique_ptr<IoModel> MakeModel(Model model, RequestHandler* handler) {
  const ConnectionLimits limits;
  switch (model) {
    case Model::kThread:
      return std::make_unique<ThreadPerConnection>(handler, limits);
    case Model::kPool:
      return std::make_unique<EventIoModel>(EventIoModel::Mode::kPool, handler, limits, 1, 2);
    case Model::kEpoll:
      return std::make_unique<EventIoModel>(EventIoModel::Mode::kEpoll, handler, limits, 2, 2);
  }
  return nullptr;
}

// Sends `count` requests one at a time (keep-alive ping-pong) and checks
// every reply; allocates nothing itself.
bool PingPong(int fd, int count) {
  Frame request;
  Frame reply;
  for (int i = 0; i < count; ++i) {
    FillRequestFrame(static_cast<uint64_t>(i % 10), (i % 4) != 0, "x", &request);
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) != kFrameSize) return false;
    std::size_t got = 0;
    while (got < kFrameSize) {
      const ssize_t r = recv(fd, reply.data() + got, kFrameSize - got, 0);
      if (r <= 0) return false;
      got += static_cast<std::size_t>(r);
    }
    if (IsErrorReply(FrameText(std::string_view(reply.data(), reply.size())))) return false;
  }
  return true;
}

class AllocFreeTest : public testing::TestWithParam<Model> {
 protected:
  static constexpr int kRequests = 3000;

  // Serves 2,500 warm-up requests (threads, connection, queues, the timing
  // log's first batch lines), then kRequests more; returns the allocations
  // made by the whole process during the latter.
  uint64_t AllocationsInWarmRequests(RequestHandler* handler) {
    std::unique_ptr<IoModel> model = MakeModel(GetParam(), handler);
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    UniqueFd client(sv[0]);
    EXPECT_TRUE(model->Dispatch(sv[1]));
    EXPECT_TRUE(PingPong(client.get(), 2500));
    const uint64_t before = g_allocations.load();
    EXPECT_TRUE(PingPong(client.get(), kRequests));
    const uint64_t during = g_allocations.load() - before;
    client.Reset();
    EXPECT_EQ(model->Drain(MonotonicNanos() + 2'000'000'000), 0u);
    return during;
  }

  ArtificialDelay delay_{std::chrono::microseconds(0)};
  MutexPerSlotStore store_{10, &delay_};
  RequestCounters counters_;
};

TEST_P(AllocFreeTest, KeepAliveRequestsAllocateNothing) {
  RequestHandler handler(&store_, nullptr, &counters_);
  const uint64_t n = AllocationsInWarmRequests(&handler);
  EXPECT_EQ(n, 0u) << n << " allocations in " << kRequests << " requests";
}

// The same with the timing log as the servers run it (per-thread shards, a
// batch line every 1000 requests: three lines written in the window).
TEST_P(AllocFreeTest, KeepAliveRequestsWithTheTimingLogAllocateNothing) {
  LatencyLogOptions options;
  options.time_file = testing::TempDir() + "alloc_free_test_timing";
  LatencyLog log(options);
  const Status opened = log.Open();
  ASSERT_TRUE(opened.ok()) << opened.ToString();
  RequestHandler handler(&store_, &log, &counters_);
  const uint64_t n = AllocationsInWarmRequests(&handler);
  EXPECT_EQ(n, 0u) << n << " allocations in " << kRequests << " requests";
  std::remove(options.time_file.c_str());
}

INSTANTIATE_TEST_SUITE_P(AllModels, AllocFreeTest,
                         testing::Values(Model::kThread, Model::kPool, Model::kEpoll), ModelName);

}  // namespace
}  // namespace kv
