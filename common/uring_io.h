// UringIoModel (--io uring): the epoll model's design (one loop per core,
// each accepting for itself and keeping what it accepted unless another
// loop has at least two fewer open; requests run on the loop without an
// artificial delay, on workers that only handle with one) on completions
// instead of readiness. Each loop owns an io_uring: a multishot accept per
// listener (re-armed when the kernel ends it, single-shot where multishot
// is refused), one recv or send in flight per waiting connection, a close
// per closed one, and a poll on the loop's eventfd for hand-offs. All that a
// pass of the loop queued goes to the kernel in the one io_uring_enter that
// also waits, bounded by the next deadline (io_uring_submit_and_wait_timeout),
// so there is no timer operation.
//
// A connection's core is told nothing while its operation is in flight (the
// kernel owns the buffer): a deadline or the stop cancels the operation, and
// the core decides once the cancelled (or completed) result is back.
//
// The loop, queue and hand-off machinery is EventIoModel's (event_io.h).
// Thread safety: as io_model.h; each ring is used by its loop thread alone
// (and by the destructor after the threads are joined); the accept thread
// talks to a loop's accepting through its mutex.
#ifndef KV_COMMON_URING_IO_H_
#define KV_COMMON_URING_IO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "common/acceptor.h"
#include "common/connection_core.h"
#include "common/event_io.h"
#include "common/request_handler.h"
#include "common/status.h"

namespace kv {

class UringIoModel final : public EventIoModel {
 public:
  struct Config {
    std::size_t loops = 1;    // event loops, one ring each
    std::size_t workers = 1;  // worker threads (none with inline_requests)
    bool inline_requests = false;
  };

  // OK if this process may make a ring; else why not, as the refusal at
  // start words it ("the kernel refuses io_uring here (...)": ENOSYS or EPERM
  // under a seccomp filter or kernel.io_uring_disabled). The registry's probe
  // (io_registry.h).
  static Status Probe();

  // Returns with every thread started (none if a ring could not be made:
  // init_status() says why). `handler` must outlive the model.
  UringIoModel(const Config& config, RequestHandler* handler, const ConnectionLimits& limits);
  ~UringIoModel() override;

  // "uring-single" when it starts accepting one connection per operation.
  std::string_view name() const override;
  bool TakeListeners(const std::vector<int>& listeners, AcceptPolicy* policy) override;
  AcceptStats StopAccepting() override;

 private:
  struct Ring;
  struct AcceptSlot;
  struct UringDriver;  // DriveOnLoop's RunCore driver
  Ring& RingOf(const Loop* loop) const { return *rings_[loop->index]; }

  int64_t WaitAndHandle(Loop* loop, int64_t until, int64_t before) override;
  void Adopt(Loop* loop, Conn* conn, int64_t now, bool handed) override;
  // Queues the recv (EPOLLIN) or send (EPOLLOUT) the core asks for.
  void WaitOnLoop(Loop* loop, Conn* conn, uint32_t events) override;
  void DriveOnWorker(Conn* conn) override;
  // In flight: cancels the operation (the core decides when it is back).
  void DriveOnLoop(Loop* loop, Conn* conn, int64_t now) override;
  void OnScan(Loop* loop, int64_t now) override;  // resumes accepting after a pause

  // Queues a close of the connection's fd and recycles its record.
  void CloseOnRing(Loop* loop, Conn* conn);
  // `data`: user_data as the pointer it was set from (a Target*, unless a tag).
  void OnCompletion(Loop* loop, uint64_t user_data, void* data, int res, uint32_t flags,
                    int64_t now);
  void OnConnDone(Loop* loop, Conn* conn, int res, int64_t now);
  void OnAccepted(Loop* loop, AcceptSlot* slot, int res, uint32_t flags, int64_t now);
  // Arms what should be armed (the eventfd poll, the accepts) and cancels
  // the accepts once StopAccepting (or a pause) wants them gone.
  void SyncRing(Loop* loop);

  std::vector<std::unique_ptr<Ring>> rings_;  // one per loop, by Loop::index
  const bool multishot_;                      // at the start; a ring that is refused it goes single
};

}  // namespace kv

#endif  // KV_COMMON_URING_IO_H_
