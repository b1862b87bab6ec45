// The blocking driver (open loop): a thread per logical client, one request
// in flight at a time on LabConnection's blocking exchange; a connection per
// request, or the client's keep-alive connections used in turn.
#include <sys/prctl.h>
#include <time.h>

#include <cerrno>
#include <string>
#include <vector>

#include "client/drivers.h"
#include "common/protocol.h"
#include "common/status.h"

namespace kv::load {
namespace {

// Sleeps until t, in slices of at most 5 ms so that a stop (the server went
// away, the time limit) is seen at once. Returns false if stopped first.
bool SleepUntilNs(uint64_t t, const std::atomic<bool>& stop) {
  constexpr uint64_t kSliceNs = 5'000'000;
  for (uint64_t now = NowNs(); now < t; now = NowNs()) {
    if (stop.load(std::memory_order_relaxed)) return false;
    const uint64_t until = t - now > kSliceNs ? now + kSliceNs : t;
    timespec ts;
    ts.tv_sec = static_cast<time_t>(until / 1'000'000'000ULL);
    ts.tv_nsec = static_cast<long>(until % 1'000'000'000ULL);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }
  return !stop.load(std::memory_order_relaxed);
}

// One blocking request on `conn` sent at `sent`, connecting first if it is
// closed; a per-request connection is closed after its reply, once the
// server's end of stream shows that nothing more came. *done gets the time
// the reply was in (the close is not timed); *detail the connect error, or a
// description of any other failure.
ErrorKind BlockingRequest(const LoadConfig& cfg, LabConnection* conn, const Frame& request,
                          uint64_t sent, std::string* detail, Worker* w, uint64_t* done) {
  uint64_t start = sent;
  if (!conn->is_open()) {
    Status why;
    const ErrorKind kind = conn->Connect(cfg.endpoint, cfg.timeout_ms, &why,
                                         /*nodelay=*/cfg.keepalive);
    *done = NowNs();
    if (kind != ErrorKind::kNone) {
      *detail = why.message();
      return kind;
    }
    ++w->connected;
    start = *done;  // the exchange's deadline runs from here
  }
  ErrorKind kind = conn->RoundTrip(request, ExchangeDeadline(cfg, start));
  *done = NowNs();
  if (!cfg.keepalive) {
    conn->CloseAfterReply(EndGraceMs(cfg));
    kind = conn->last().outcome();  // bytes after the reply made it long
  }
  if (kind != ErrorKind::kNone) *detail = conn->last().Describe();
  return kind;
}

// Open loop: thread t's request k is due at start + (k + t/T) * T/rate.
uint64_t DueTime(const Shared& shared, uint32_t t, uint64_t k) {
  const LoadConfig& cfg = *shared.config;
  const double interval_ns = 1e9 * cfg.threads / cfg.rate;
  return shared.start_ns +
         static_cast<uint64_t>((static_cast<double>(k) + static_cast<double>(t) / cfg.threads) *
                               interval_ns);
}

}  // namespace

void RunBlockingClient(Shared* shared, uint32_t t, Worker* w) {
  const LoadConfig& cfg = *shared->config;
  Workload workload(cfg.workload, t);
  const bool open_loop = cfg.rate > 0;
  // The default 50 us timer slack would make every scheduled send late.
  // Best effort, deliberately unchecked: without it sends are only later.
  if (open_loop) (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  const ClientPlan plan = PlanClient(cfg, t);
  std::vector<LabConnection> conns(plan.conns);
  uint32_t next_conn = 0;
  Frame request{};
  shared->ready.count_down();
  shared->go.wait();

  uint64_t measured = 0;
  for (uint64_t k = 0; measured < plan.quota; ++k) {
    if (shared->stop.load(std::memory_order_relaxed)) break;
    uint64_t due = open_loop ? DueTime(*shared, t, k) : NowNs();
    if (PastDeadline(shared, due)) break;
    if (open_loop && NowNs() < due && !SleepUntilNs(due, shared->stop)) break;
    workload.FillRequest(workload.Next(), &request);
    const uint64_t sent = NowNs();
    if (!open_loop) due = sent;
    LabConnection& conn = conns[next_conn];
    if (++next_conn == plan.conns) next_conn = 0;
    std::string detail;
    uint64_t done = 0;
    const ErrorKind kind = BlockingRequest(cfg, &conn, request, sent, &detail, w, &done);
    BookRequest(shared, open_loop, {due, sent, done}, kind, detail, w, &measured);
    if (kind == ErrorKind::kConnect) break;
  }
  std::vector<KeptConnection> kept;
  kept.reserve(conns.size());
  for (LabConnection& conn : conns) kept.push_back({&conn, w});
  CloseKeptConnections(cfg, kept);
  FinishWorker(shared);
}

}  // namespace kv::load
