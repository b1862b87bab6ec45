#include "common/acceptor.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "common/net.h"

namespace kv {

AcceptPolicy::AcceptPolicy(std::size_t max_connections, const std::string& program, bool warnings)
    : max_connections_(max_connections),
      busy_("server busy: " + std::to_string(max_connections) +
            " connections open (--max-connections); try again"),
      log_(program, warnings) {
  MutexLock guard(&spare_mu_);
  spare_.Reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
}

AcceptPolicy::Outcome AcceptPolicy::TakeOne(int listener, IoLoad load, AcceptStats* stats,
                                            UniqueFd* conn) {
  if (load.unseen >= kMaxUnseen || (load.unseen > 0 && load.open >= max_connections_)) {
    return Outcome::kBehind;
  }
  const int fd = AcceptConnection(listener);
  return Admit(listener, fd, fd < 0 ? errno : 0, load, stats, conn);
}

AcceptPolicy::Outcome AcceptPolicy::Admit(int listener, int fd, int err, IoLoad load,
                                          AcceptStats* stats, UniqueFd* conn) {
  conn->Reset(fd);
  if (!*conn) {
    if (err == EAGAIN || err == EWOULDBLOCK) return Outcome::kDrained;
    // Gone before it was taken (AcceptConnection retries these itself).
    if (err == EINTR || err == ECONNABORTED) return Outcome::kHandled;
    ++stats->accept_errors;
    return RecoverFromAcceptError(listener, err, stats);
  }
  if (load.open >= max_connections_) {
    RefuseConnection(conn->Release(), busy_);
    ++stats->refused;
    log_.Warn("refusing connections: " + std::to_string(max_connections_) +
              " open (--max-connections)");
    return Outcome::kHandled;
  }
  return Outcome::kConnection;
}

void AcceptPolicy::NoteDispatchFailed(int err, AcceptStats* stats) {
  ++stats->refused;
  log_.Warn(std::string("cannot start a connection thread: ") + std::strerror(err) +
            "; refusing connections");
}

// With EMFILE/ENFILE, refuses the connection at the head of the queue by way
// of the spare fd; anything else pauses accepting.
AcceptPolicy::Outcome AcceptPolicy::RecoverFromAcceptError(int listener, int err,
                                                           AcceptStats* stats) {
  MutexLock guard(&spare_mu_);
  if ((err != EMFILE && err != ENFILE) || !spare_) {
    log_.Warn(std::string("accept: ") + std::strerror(err) + "; pausing accepts for 100 ms");
    return Outcome::kPause;
  }
  // accept() fails with EMFILE before it looks at the queue, so this is
  // also how we learn that the queue is empty.
  spare_.Reset();
  const int conn = AcceptConnection(listener);
  const bool drained = conn < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  if (conn >= 0) {
    RefuseConnection(conn, "server busy: out of file descriptors; try again");
    ++stats->refused;
  }
  spare_.Reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const bool again = spare_.valid();
  log_.Warn(
      std::string("accept: ") + std::strerror(err) +
      (again ? "; refusing new connections until some close" : "; pausing accepts for 100 ms"));
  if (conn >= 0 && again) return Outcome::kHandled;  // the next queued connection
  if (drained && again) return Outcome::kDrained;    // nothing more is waiting
  return Outcome::kPause;
}

}  // namespace kv
