// EventLoop: the core the client's two closed-loop drivers share
// (loop_keepalive.cpp, loop_oneshot.cpp), as the server's models share
// common/event_io.h. One loop is one OS thread with one epoll set driving
// its share of the logical clients; a logical client is exactly what a
// blocking worker is (its own workload stream, quota, one request in flight,
// its own Worker figures), so traffic and results are the same; only the OS
// threads differ.
//
// The core opens the loop (its epoll set, then the start line every thread
// waits at), starts every client, waits (epoll_wait, bounded by the earliest
// deadline a client's request has), hands the events to the driver, ends the
// requests whose deadline passed through the driver, books each finished
// request, and ends the loop (the driver closes its connections, then the
// thread is counted done). A driver says only how a client's request is
// started, what an event on it means, what its deadline is in each phase and
// how it ends when that passes.
//
// Thread safety: a loop and its clients are used by the loop's thread alone
// (Run), after construction on the plan's thread.
#ifndef KV_CLIENT_EVENT_LOOP_H_
#define KV_CLIENT_EVENT_LOOP_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "client/load_run.h"
#include "client/workload.h"
#include "common/protocol.h"
#include "common/unique_fd.h"

namespace kv::load {

inline constexpr uint64_t kNoDeadline = std::numeric_limits<uint64_t>::max();

// What every logical client of an event loop has.
struct LoopClient {
  uint32_t slot = 0;  // index in its loop's client list (epoll data)
  Worker* w = nullptr;
  Workload workload;
  uint64_t quota = 0;  // measured requests to do (ClientPlan)
  uint64_t measured = 0;
  bool done = false;
  Frame request{};
  uint64_t sent_ns = 0;           // the request's start
  uint64_t due_ns = kNoDeadline;  // its phase's deadline (SetDue); none once booked
  LoopClient(const LoadConfig& cfg, uint32_t t, Worker* worker)
      : w(worker), workload(cfg.workload, t), quota(PlanClient(cfg, t).quota) {}
};

class EventLoop {
 public:
  virtual ~EventLoop() = default;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // The loop's thread: from the start line to the last client's end.
  void Run();

 protected:
  explicit EventLoop(Shared* shared) : shared_(shared), cfg_(*shared->config) {}

  // Adds a client (its slot is its index); before Run.
  void Adopt(LoopClient* c);

  // The driver's part. Starts client `slot`'s request (its `request`, started
  // at `sent_ns`). True: it is in flight; false: it ended at once (a connect
  // or send failed) and is booked.
  virtual bool Begin(uint32_t slot) = 0;
  // An event on the epoll data `data` with `events`.
  virtual void OnEvent(uint64_t data, uint32_t events) = 0;
  // Client `slot`'s deadline (SetDue) passed at `now`: its request ends,
  // booked (or it sets a later deadline).
  virtual void Expire(uint32_t slot, uint64_t now) = 0;
  // The run is over (or stopped): every connection ends.
  virtual void CloseAll() = 0;

  // Starts client `slot`'s next request, or ends the client once it has done
  // its quota, the run is stopped or past its deadline. A request that ends at
  // once is booked and the next one is tried, as a worker would.
  void StartNext(uint32_t slot);
  // c's request (in flight) must move on by `due_ns`, or be ended by Expire.
  void SetDue(LoopClient* c, uint64_t due_ns) {
    c->due_ns = due_ns;
    next_due_ = std::min(next_due_, due_ns);
  }
  // Books c's request (closed loop: due when sent), finished at `done_ns`; it
  // has no deadline from then on.
  void Book(LoopClient* c, ErrorKind kind, uint64_t done_ns, const std::string& detail);

  int epoll_fd() const { return ep_.get(); }

  Shared* const shared_;
  const LoadConfig& cfg_;

 private:
  // True (and the client ended) once its next request must not start.
  bool EndIfDone(LoopClient* c);
  // How long epoll_wait may sleep, ms: to the earliest deadline (rounded up),
  // and at most 50 ms so that a stop is seen.
  int WaitMs(uint64_t now) const;
  // Ends (Expire) every request whose deadline passed by `now` and starts its
  // client's next one.
  void ExpireDue(uint64_t now);

  std::vector<LoopClient*> adopted_;  // by slot
  UniqueFd ep_;                       // the epoll set
  uint32_t active_ = 0;
  uint64_t next_due_ = kNoDeadline;  // no client's deadline is earlier
};

// An event loop whose logical clients are Client (a LoopClient with the driver's own state of
// it, made from (config, t, worker)): it owns them, by slot. A driver's loop is one of these.
template <class Client>
class LoopOf : public EventLoop {
 public:
  explicit LoopOf(Shared* shared) : EventLoop(shared) {}
  // Client t, its figures in `w` (DealClients); before Run.
  void Add(uint32_t t, Worker* w) {
    clients_.push_back(std::make_unique<Client>(cfg_, t, w));
    Adopt(clients_.back().get());
  }

 protected:
  std::vector<std::unique_ptr<Client>> clients_;  // by slot
};

// Deals the run's clients to `count` loops (at least one) of type Loop
// (client t on loop t % count, its figures in workers[t]); Loop::Add(t,
// worker) makes it.
template <class Loop>
std::vector<std::unique_ptr<EventLoop>> DealClients(Shared* shared, const Workers& workers,
                                                    uint32_t count) {
  count = std::max(count, 1u);
  std::vector<std::unique_ptr<Loop>> loops;
  loops.reserve(count);
  for (uint32_t i = 0; i < count; ++i) loops.push_back(std::make_unique<Loop>(shared));
  for (uint32_t t = 0; t < workers.size(); ++t) loops[t % count]->Add(t, workers[t].get());
  return {std::make_move_iterator(loops.begin()), std::make_move_iterator(loops.end())};
}

}  // namespace kv::load

#endif  // KV_CLIENT_EVENT_LOOP_H_
