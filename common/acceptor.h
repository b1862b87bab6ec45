// Accepting connections: the overload policy every accepting thread shares.
//
// The accept loop (server.cpp) accepts for thread per connection and the
// worker pool; epoll loops accept for themselves (epoll_io.h), each from its
// own epoll set. Both take connections through one AcceptPolicy, so the
// overload policy is written once:
//
// REFUSE. A connection beyond `max_connections`, one the I/O model cannot
// take (no thread), and one that arrives while the process is out of file
// descriptors (EMFILE/ENFILE, by way of a spare fd: nginx's and libev's
// trick) are all accepted, answered "ERROR server busy ..." and closed at
// once, so a client fails fast instead of hanging in the backlog. Only when
// even that is impossible does accepting pause for kAcceptPauseNs: the
// connections wait in the kernel backlog. Every case is counted and logged at
// most once a second; nothing spins, nothing exits, and service resumes by
// itself as connections close.
//
// WAIT. A model fed by another thread (the pool) has connections it has not
// looked at yet, whose peers may have closed them already: a burst of
// connects that close at once would otherwise pile up as "open" faster than
// the model gets to them, until new clients were refused as busy with a
// handful really open. So accepting waits (the connections stay in the
// kernel backlog) while kMaxUnseen are unseen, and at the limit while any
// is: the limit refuses only once the model has looked at what it holds.
//
// Thread safety: TakeOne() and NoteDispatchFailed() may be called from any
// number of threads at once (the spare fd is guarded by a mutex, the log has
// its own); each caller keeps its own AcceptStats.
#ifndef KV_COMMON_ACCEPTOR_H_
#define KV_COMMON_ACCEPTOR_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/mutex.h"
#include "common/rate_limited_log.h"
#include "common/thread_annotations.h"
#include "common/unique_fd.h"

namespace kv {

struct AcceptStats {
  uint64_t accepted = 0;       // connections handed to the I/O model
  uint64_t refused = 0;        // accepted, answered "server busy", closed
  uint64_t accept_errors = 0;  // accept() failures (EMFILE, ENFILE, ...)

  AcceptStats& operator+=(const AcceptStats& other) {
    accepted += other.accepted;
    refused += other.refused;
    accept_errors += other.accept_errors;
    return *this;
  }
};

// What an I/O model holds when a connection is to be accepted.
struct IoLoad {
  std::size_t open = 0;    // handed to the model and not closed yet
  std::size_t unseen = 0;  // of those, not looked at yet (see WAIT above)
};

// Unseen connections a model may hold before accepting waits for it: above
// the kit's 100 connections at once, far below a 1024-descriptor limit.
constexpr std::size_t kMaxUnseen = 256;
// How long the accept loop waits before it looks again while the model is
// behind.
constexpr int64_t kBehindWaitNs = 1'000'000;

// Connections taken from one listener per wake-up, so other listeners, the
// stop pipe and (in a loop) the connections are looked at under a flood.
constexpr int kAcceptBurst = 64;
// How long accepting pauses after an error we cannot work around (ENOBUFS,
// ENOMEM, EMFILE without a spare fd).
constexpr int64_t kAcceptPauseNs = 100'000'000;

class AcceptPolicy {
 public:
  AcceptPolicy(std::size_t max_connections, const std::string& program, bool warnings);

  enum class Outcome {
    kConnection,  // *conn is a connection to serve
    kHandled,     // one connection refused, or an error recovered: go on
    kDrained,     // nothing waiting on the listener
    kPause,       // stop accepting for kAcceptPauseNs
    kBehind,      // nothing accepted: wait for the model (see WAIT above)
  };

  // Accepts one connection from the non-blocking `listener` while the model
  // holds `load`. Refuses it if the limit is reached.
  Outcome TakeOne(int listener, IoLoad load, AcceptStats* stats, UniqueFd* conn)
      EXCLUDES(spare_mu_);

  // The same rules for an accept made elsewhere (an io_uring completion):
  // `fd` from `listener`, or -1 and the accept's `err`.
  Outcome Admit(int listener, int fd, int err, IoLoad load, AcceptStats* stats, UniqueFd* conn)
      EXCLUDES(spare_mu_);

  // The I/O model could not take a connection (it has refused it itself).
  void NoteDispatchFailed(int err, AcceptStats* stats);

 private:
  Outcome RecoverFromAcceptError(int listener, int err, AcceptStats* stats) EXCLUDES(spare_mu_);

  const std::size_t max_connections_;
  const std::string busy_;
  RateLimitedLog log_;
  Mutex spare_mu_;
  UniqueFd spare_ GUARDED_BY(spare_mu_);  // see the header comment
};

// How a burst of accepts ended.
enum class BurstEnd {
  kGoOn,    // the listener is drained, or the burst is done
  kPause,   // accepting should pause for kAcceptPauseNs
  kBehind,  // wait kBehindWaitNs for the model, then try again
};

// Takes up to kAcceptBurst connections from `listener` and gives each to
// `serve(UniqueFd)`, which returns false if it could not take it (it has
// refused it). `load()` says what the model holds (an IoLoad).
template <typename Load, typename Serve>
BurstEnd AcceptBurst(AcceptPolicy* policy, int listener, AcceptStats* stats, Load load,
                     Serve serve) {
  for (int burst = 0; burst < kAcceptBurst; ++burst) {
    UniqueFd conn;
    switch (policy->TakeOne(listener, load(), stats, &conn)) {
      case AcceptPolicy::Outcome::kConnection:
        if (serve(std::move(conn))) {
          ++stats->accepted;
        } else {
          policy->NoteDispatchFailed(errno, stats);
        }
        break;
      case AcceptPolicy::Outcome::kHandled:
        break;
      case AcceptPolicy::Outcome::kDrained:
        return BurstEnd::kGoOn;
      case AcceptPolicy::Outcome::kPause:
        return BurstEnd::kPause;
      case AcceptPolicy::Outcome::kBehind:
        return BurstEnd::kBehind;
    }
  }
  return BurstEnd::kGoOn;
}

}  // namespace kv

#endif  // KV_COMMON_ACCEPTOR_H_
