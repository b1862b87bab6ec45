// No allocation per request: a keep-alive connection served
// by each --io model, with a real RequestHandler and store, must not call
// operator new once it is warm; and the thread model reads the clock no more
// than its request needs. Its own binary: the global operator new and
// clock_gettime here count every allocation and clock read of the process.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "common/acceptor.h"
#include "common/artificial_delay.h"
#include "common/clock.h"
#include "common/io_model_testing.h"
#include "common/latency_log.h"
#include "common/protocol.h"
#include "common/request_handler.h"
#include "common/store_mutex_per_slot.h"
#include "common/thread_per_connection.h"
#include "common/unique_fd.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
std::atomic<uint64_t> g_clock_reads{0};
using ClockGettime = int (*)(clockid_t, timespec*);
}  // namespace

// Every clock read of the program (MonotonicNanos, std::chrono's clocks)
// comes here before libc's, which is found at the first read (dlsym may
// allocate: that is in the warm-up, never in a counted window).
extern "C" int clock_gettime(clockid_t clock, timespec* ts) noexcept {
  static const auto real = reinterpret_cast<ClockGettime>(dlsym(RTLD_NEXT, "clock_gettime"));
  g_clock_reads.fetch_add(1, std::memory_order_relaxed);
  return real(clock, ts);
}

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
    std::unique_ptr<IoModel> model = MakeModel(GetParam(), handler, ConnectionLimits());
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

INSTANTIATE_TEST_SUITE_P(AllModels, AllocFreeTest, AllModels(), ModelName);

// A warm keep-alive request under thread per connection (the lab's model),
// timing log on, reads the clock for what it needs: the bytes' arrival, the
// lock's wait and hold (the store, three), the reply's time (the handler),
// the step after the handler, the reply sent: 7. A driver that read it once
// more per step of the connection's loop made 10; on a machine whose clock
// is a system call, each one is. The test client reads no clock.
TEST(ClockReadsTest, AWarmKeepAliveRequestReadsTheClockSevenTimes) {
  ArtificialDelay delay{std::chrono::microseconds(0)};
  MutexPerSlotStore store{10, &delay};
  RequestCounters counters;
  LatencyLogOptions options;
  options.time_file = testing::TempDir() + "alloc_free_test_clock_timing";
  LatencyLog log(options);
  ASSERT_TRUE(log.Open().ok());
  RequestHandler handler(&store, &log, &counters);
  std::unique_ptr<IoModel> model = MakeModel(TestedModel("thread"), &handler, ConnectionLimits());
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd client(sv[0]);
  ASSERT_TRUE(model->Dispatch(sv[1]));
  ASSERT_TRUE(PingPong(client.get(), 2500));
  constexpr int kRequests = 3000;
  const uint64_t before = g_clock_reads.load();
  ASSERT_TRUE(PingPong(client.get(), kRequests));
  const uint64_t during = g_clock_reads.load() - before;
  client.Reset();
  EXPECT_EQ(model->Drain(MonotonicNanos() + 2'000'000'000), 0u);
  std::remove(options.time_file.c_str());
  // Up to one more a request: the timing log's batch lines, the
  // schedstat sample and the server thread's last step in the window. One
  // fewer at most: the last request's read after its send may come after
  // the client has its reply and the window is closed.
  EXPECT_GE(during, 7u * kRequests - 1);
  EXPECT_LE(during, 7u * kRequests + kRequests / 100)
      << static_cast<double>(during) / kRequests << " clock reads a request";
}

// One connection per request (the kit's way) through epoll loops that accept
// for themselves: once the loops have made enough connection records, a new
// connection allocates nothing either. The listener is an abstract Unix
// socket, so no TCP port is involved.
int ListenUnix(sockaddr_un* address, socklen_t* length) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  *address = sockaddr_un{};
  address->sun_family = AF_UNIX;
  const std::string name = "lockbench-alloc-free-" + std::to_string(getpid());
  std::memcpy(address->sun_path + 1, name.data(), name.size());  // [0] = '\0': abstract
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(address), *length) != 0 ||
      listen(fd, 128) != 0) {
    return -1;
  }
  return fd;
}

// Connects, sends one request, reads the reply, closes; allocates nothing.
bool OneShot(const sockaddr_un& address, socklen_t length) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd || connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    return false;
  }
  return PingPong(fd.get(), 1);
}

TEST(AcceptingAllocFreeTest, ConnectionPerRequestAllocatesNothingOnceWarm) {
  ArtificialDelay delay{std::chrono::microseconds(0)};
  MutexPerSlotStore store{10, &delay};
  RequestCounters counters;
  RequestHandler handler(&store, nullptr, &counters);
  std::unique_ptr<IoModel> model =
      MakeModel(TestedModel("epoll", true), &handler, ConnectionLimits());
  sockaddr_un address;
  socklen_t length;
  UniqueFd listener(ListenUnix(&address, &length));
  ASSERT_TRUE(listener.valid()) << std::strerror(errno);
  AcceptPolicy policy(100, "alloc_free_test", false);
  ASSERT_TRUE(model->TakeListeners({listener.get()}, &policy));
  // Warm: some connections open at once (each loop makes a few records and
  // its hand-off lists grow), then one after another.
  for (int round = 0; round < 3; ++round) {
    std::vector<UniqueFd> open_at_once;
    for (int i = 0; i < 16; ++i) {
      open_at_once.emplace_back(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      ASSERT_EQ(
          connect(open_at_once.back().get(), reinterpret_cast<const sockaddr*>(&address), length),
          0);
    }
    for (const UniqueFd& fd : open_at_once) ASSERT_TRUE(PingPong(fd.get(), 1));
  }
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(OneShot(address, length));
  const uint64_t before = g_allocations.load();
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(OneShot(address, length));
  const uint64_t during = g_allocations.load() - before;
  const AcceptStats stats = model->StopAccepting();
  EXPECT_EQ(model->Drain(MonotonicNanos() + 2'000'000'000), 0u);
  EXPECT_EQ(during, 0u) << during << " allocations in 500 connections";
  EXPECT_EQ(stats.accepted, 748u);
  EXPECT_EQ(stats.refused, 0u);
}

}  // namespace
}  // namespace kv
