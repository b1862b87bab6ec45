// UniqueFd: sole owner of a file descriptor, closed when the owner goes away.
//
// Like std::unique_ptr for descriptors: movable, not copyable; Release() hands
// the descriptor back without closing it. Close() reports close(2)'s error for
// the few places where it matters (a file written to: close can report a
// deferred write error); the destructor ignores it.
//
// Thread safety: a UniqueFd is a value; distinct objects may be used from
// distinct threads without synchronisation.
#ifndef KV_COMMON_UNIQUE_FD_H_
#define KV_COMMON_UNIQUE_FD_H_

#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/status.h"

namespace kv {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }

  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  // Gives up ownership: the caller closes the returned descriptor.
  int Release() { return std::exchange(fd_, -1); }

  // Closes the descriptor held (if any) and takes `fd`.
  void Reset(int fd = -1) {
    const int old = std::exchange(fd_, fd);
    if (old >= 0) ::close(old);  // close(2)'s error is moot here: the fd is gone either way
  }

  // Closes now and says whether close(2) reported an error (`what` names the
  // file in the message). Closing an empty UniqueFd is OK.
  Status Close(std::string_view what) {
    const int old = Release();
    if (old < 0 || ::close(old) == 0) return Status::OK();
    return Status::IOError(what, errno);
  }

 private:
  int fd_ = -1;
};

}  // namespace kv

#endif  // KV_COMMON_UNIQUE_FD_H_
