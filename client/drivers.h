// The load client's drivers, a file each, under one load run (load_run.h):
// what moves a logical client's requests, and on which threads. The plan
// (load_generator.cpp) picks one per run and merges what they booked.
//
//   driver_blocking.cpp  open loop: a blocking thread per client
//   loop_keepalive.cpp   closed loop, keep-alive: event loops over persistent connections
//   loop_oneshot.cpp     closed loop, a connection per request: event loops too
//
// The two event loops share their core (event_loop.h: the epoll set, the
// start, the wait, booking and the end), as the server's models share
// common/event_io.h; each drives exchanges (client/exchange.h) only.
#ifndef KV_CLIENT_DRIVERS_H_
#define KV_CLIENT_DRIVERS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "client/event_loop.h"
#include "client/load_run.h"

namespace kv::load {

// Client t's requests on the calling thread, blocking, one in flight at a
// time; open loop sends each at its scheduled time.
void RunBlockingClient(Shared* shared, uint32_t t, Worker* w);

// `count` event loops for the run's clients (client t on loop t % count,
// its figures in workers[t]); each loop's Run() goes on a thread of its own.
std::vector<std::unique_ptr<EventLoop>> MakeKeepAliveLoops(Shared* shared, const Workers& workers,
                                                           uint32_t count);
std::vector<std::unique_ptr<EventLoop>> MakeOneShotLoops(Shared* shared, const Workers& workers,
                                                         uint32_t count);

}  // namespace kv::load

#endif  // KV_CLIENT_DRIVERS_H_
