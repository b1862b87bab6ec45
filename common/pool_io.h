// PoolIoModel (--io pool): a fixed pool of worker threads fed by one poller.
//
// The accept thread hands each connection over (Dispatch); the poller
// registers it one-shot and gives it to a worker, which reads, handles and
// writes until the connection has no whole frame left (recv would block),
// then returns it to the poller, which arms it again. So idle keep-alive
// connections hold no worker and cannot starve the others (a thread pool
// that pins one worker per connection would). Connections handed over and
// not looked at yet count as unseen (io_model.h), so accepting waits for
// the workers rather than counting them open (acceptor.h, WAIT).
//
// The loop, queue and hand-off machinery is EventIoModel's (event_io.h).
// Thread safety: as io_model.h.
#ifndef KV_COMMON_POOL_IO_H_
#define KV_COMMON_POOL_IO_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/connection_core.h"
#include "common/event_io.h"
#include "common/request_handler.h"

namespace kv {

class PoolIoModel final : public EventIoModel {
 public:
  // Returns with every thread started (one poller, `workers` workers, at
  // least one). `handler` must outlive the model.
  PoolIoModel(std::size_t workers, RequestHandler* handler, const ConnectionLimits& limits);
  ~PoolIoModel() override;

  std::string_view name() const override { return "pool"; }

 private:
  struct WorkerDriver;  // DriveOnWorker's RunCore driver
  void OnReady(Loop* loop, Target* target, uint32_t events, int64_t now) override;
  void Adopt(Loop* loop, Conn* conn, int64_t now, bool handed) override;
  void WaitOnLoop(Loop* loop, Conn* conn, uint32_t events) override;
  void DriveOnWorker(Conn* conn) override;
};

}  // namespace kv

#endif  // KV_COMMON_POOL_IO_H_
