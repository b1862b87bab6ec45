// ServeConnection: the blocking driver of one client connection.
//
// The policy (framing, deadlines, half-close, shutdown) is ConnectionCore's
// (connection_core.h); this loop only moves bytes: a blocking recv bounded by
// SO_RCVTIMEO (set only when the bound changes, not per request) and a
// non-blocking send, so a keep-alive request costs one recv and one send.
// Reads 100-byte request frames one after another (keep-alive) and answers
// each with a 100-byte reply, until the peer closes. A frame cut short by the
// peer's half-close is answered, then the loop ends. A peer that sends nothing
// for `idle_timeout_ns` is dropped silently; one whose frame is not complete
// within `frame_timeout_ns` of its first byte (stalled, or trickling a byte at
// a time: "slowloris") gets "ERROR incomplete frame ..." and is dropped
// (framing is lost). A reply the peer does not take within `write_timeout_ns`
// ends the loop. So a connection holds its thread at most
// idle + frame + write timeouts per frame, and only while it keeps sending
// whole frames. A reset or a vanished reader just ends the loop. The caller
// closes the fd.
//
// Thread per connection runs it; the pool and epoll models drive the same
// core with the same steps and dispatch loop (conn_io.h) from pool_io.cpp
// and epoll_io.cpp. The fd must be a blocking socket; its SO_RCVTIMEO is
// changed. While the connection is quiet the thread's timing shard is
// handed off (RequestHandler::Idle); at its end, the caller's thread does.
// Thread safety: one call per connection; calls on different fds run in
// parallel.
#ifndef KV_COMMON_CONNECTION_H_
#define KV_COMMON_CONNECTION_H_

#include <cstdint>

#include "common/conn_io.h"
#include "common/connection_core.h"
#include "common/request_handler.h"

namespace kv {

// Serves fd until the peer is done or `stop` (may be null) is requested.
// At a stop, a frame already whole is answered; one still incomplete is
// dropped: not applied, not answered, counted only as cut_by_shutdown.
// Returns the number of frames answered.
uint64_t ServeConnection(int fd, RequestHandler* handler, const ConnectionLimits& limits,
                         const StopSignal* stop = nullptr);

}  // namespace kv

#endif  // KV_COMMON_CONNECTION_H_
