// The socket side every I/O model shares: one recv or send between a socket
// and a ConnectionCore (ReadStep, WriteStep), the answer to a frame the core
// hands out (AnswerFrame), and the dispatch loop that asks the core what to
// do next (RunCore). What differs between the models, how they wait for a
// socket and which thread runs a request, stays in their drivers:
// connection.cpp (a blocking thread), pool_io.cpp, epoll_io.cpp and
// uring_io.cpp.
//
// Thread safety: none of its own; a core is used by one thread at a time
// (connection_core.h), StopSignal is safe from any thread.
#ifndef KV_COMMON_CONN_IO_H_
#define KV_COMMON_CONN_IO_H_

#include <atomic>
#include <cstdint>

#include "common/connection_core.h"
#include "common/request_handler.h"

namespace kv {

// Server shutdown as connections see it: an atomic flag, checked before
// every step of the dispatch loop and when a read ends. Request() is called
// once; the rest only read. It wakes no one by itself: the model that
// requests it also wakes its waiting connections (thread per connection
// shuts down their read side, which ends a blocked recv at once; ReadStep
// then takes the end of input for the stop, not for a half-close).
class StopSignal {
 public:
  void Request() { stop_.store(true, std::memory_order_release); }
  bool requested() const { return stop_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> stop_{false};
};

// What one recv or send did. The core has been told already.
enum class IoOutcome {
  kProgress,    // bytes moved, or EINTR (nothing moved): ask the core again
  kWouldBlock,  // the socket is not ready (EAGAIN; for a blocking recv, its
                // SO_RCVTIMEO ran out): the core was told nothing
  kPeerClosed,  // recv: end of input (OnEof, or OnStop once stop is requested)
  kError,       // a reset or any other failure: OnError
};

// REQUIRES: core->Next() answered kRead. One recv into core->in_space() with
// `recv_flags` (MSG_DONTWAIT, or 0 on a blocking socket), reported to the
// core with the time read after it. `stop` may be null. If `emptied` is not
// null it says whether the socket is likely empty now (recv returned fewer
// bytes than there was room for), so the caller may wait for readiness
// instead of making a recv that would only say EAGAIN.
IoOutcome ReadStep(int fd, ConnectionCore* core, int recv_flags, const StopSignal* stop,
                   bool* emptied = nullptr);

// REQUIRES: core->Next() answered kWrite. One non-blocking send of
// core->out_data(), reported to the core (a peer that left without its
// replies is kError; SIGPIPE is never raised).
IoOutcome WriteStep(int fd, ConnectionCore* core);

// What ReadStep and WriteStep tell the core about a recv or send that
// returned `r` (bytes; 0: the end of input; < 0: failed with `err`), for a
// model whose operations complete elsewhere (io_uring: `r` is the
// completion's result, `err` its negation).
IoOutcome ReportRead(ConnectionCore* core, int64_t r, int err, const StopSignal* stop);
IoOutcome ReportWrite(ConnectionCore* core, int64_t r, int err);

// REQUIRES: `action` is kHandle or kReject. Fills the core's reply slot
// through `handler` (queue_ns: how long the frame waited for this thread,
// see RequestHandler::Handle), then FrameDone().
void AnswerFrame(ConnectionCore* core, ConnectionCore::Action action, RequestHandler* handler,
                 int64_t queue_ns);

// The dispatch loop of every driver: before each step the stop (if any) is
// passed on, then the core's next action is acted on, until the driver lets
// go of the connection. A Driver has:
//   int64_t Now();                        the time given to Next()
//   bool Frame(Action action, int64_t now);  kHandle/kReject: AnswerFrame
//                                         and true, or hand it on and false
//   bool Write(); bool Read();            one WriteStep / ReadStep and, if the
//                                         socket is not ready, the wait for
//                                         it; false: the driver let go
//   void Close();                         kClose
template <class Driver>
void RunCore(ConnectionCore* core, const StopSignal* stop, Driver* driver) {
  using Action = ConnectionCore::Action;
  bool go_on = true;
  while (go_on) {
    const int64_t now = driver->Now();
    if (stop != nullptr && !core->stopping() && stop->requested()) core->OnStop(now);
    switch (const Action action = core->Next(now)) {
      case Action::kHandle:
      case Action::kReject:
        go_on = driver->Frame(action, now);
        break;
      case Action::kWrite:
        go_on = driver->Write();
        break;
      case Action::kRead:
        go_on = driver->Read();
        break;
      case Action::kClose:
        driver->Close();
        go_on = false;
        break;
    }
  }
}

}  // namespace kv

#endif  // KV_COMMON_CONN_IO_H_
