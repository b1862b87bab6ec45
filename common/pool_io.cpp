#include "common/pool_io.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>

#include "common/conn_io.h"

namespace kv {

// A pool worker's RunCore driver: it also does the socket I/O, without
// waiting; a socket that is not ready sends the connection back to the
// poller.
struct PoolIoModel::WorkerDriver : HandlingDriver {
  const StopSignal* stop;
  // Hides HandlingDriver's on purpose: RunCore calls the driver it is given.
  // cppcheck-suppress duplInheritedMember
  bool Write() { return WriteStep(conn->fd.get(), &conn->core()) != IoOutcome::kWouldBlock; }
  // cppcheck-suppress duplInheritedMember
  bool Read() {
    if (conn->drained) return false;  // no whole frame left: back to the poller
    return ReadStep(conn->fd.get(), &conn->core(), MSG_DONTWAIT, stop, &conn->drained) !=
           IoOutcome::kWouldBlock;
  }
};

PoolIoModel::PoolIoModel(std::size_t workers, RequestHandler* handler,
                         const ConnectionLimits& limits)
    : EventIoModel(1, /*inline_requests=*/false, handler, limits) {
  Start(std::max<std::size_t>(workers, 1));
}

PoolIoModel::~PoolIoModel() { JoinAll(); }

void PoolIoModel::WaitOnLoop(Loop* loop, Conn* conn, uint32_t events) {
  conn->wait_deadline = conn->core().deadline();
  loop->next_scan = std::min(loop->next_scan, conn->wait_deadline);
  // One-shot: armed for each wait.
  if (!EpollCtl(loop->epfd.get(), EPOLL_CTL_MOD, conn->fd.get(), static_cast<Target*>(conn),
                events | EPOLLONESHOT)) {
    conn->core().OnError();  // cannot wait for it: drop it
    CloseConn(loop, conn);
  }
}

void PoolIoModel::OnReady(Loop* loop, Target* target, uint32_t /*events*/, int64_t now) {
  auto* conn = static_cast<Conn*>(target);  // the poller watches connections only
  if (conn->busy) return;
  conn->drained = false;  // readable (or writable, or hung up): look
  if (!stop_.requested()) {
    ToWorkers(conn);  // a worker reads, handles and writes
  } else {
    DriveOnLoop(loop, conn, now);
  }
}

void PoolIoModel::Adopt(Loop* loop, Conn* conn, int64_t now, bool handed) {
  // Registered disarmed; the first wait arms it.
  if (!EpollCtl(loop->epfd.get(), EPOLL_CTL_ADD, conn->fd.get(), static_cast<Target*>(conn),
                EPOLLONESHOT)) {
    conn->core().OnError();
    CloseConn(loop, conn);
    if (handed) Seen();
    return;
  }
  conn->registered = true;
  if (!stop_.requested()) {
    conn->unseen = handed;  // seen when the worker gives it back
    ToWorkers(conn);        // the request has usually arrived with the accept
    return;
  }
  DriveOnLoop(loop, conn, now);
  if (handed) Seen();
}

void PoolIoModel::DriveOnWorker(Conn* conn) {
  WorkerDriver driver{{handler_, conn}, &stop_};
  RunCore(&conn->core(), &stop_, &driver);
}

}  // namespace kv
