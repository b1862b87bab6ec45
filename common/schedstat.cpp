#include "common/schedstat.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>

#include "common/unique_fd.h"

namespace kv {
namespace {

constexpr const char* kPath = "/proc/thread-self/schedstat";

// Reads the next decimal number after optional spaces; advances *p.
bool NextNumber(const char** p, const char* end, uint64_t* v) {
  while (*p < end && **p == ' ') ++*p;
  const auto [ptr, ec] = std::from_chars(*p, end, *v);
  if (ec != std::errc() || ptr == *p) return false;
  *p = ptr;
  return true;
}

bool ReadAt(int fd, SchedStat* out) {
  char buf[128];
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  return n > 0 && ParseSchedStat(std::string_view(buf, static_cast<std::size_t>(n)), out);
}

// The thread's descriptor: opened on first use, closed at thread exit.
struct ThreadFile {
  UniqueFd fd;
  bool failed = false;
};
thread_local ThreadFile t_file;

}  // namespace

bool ParseSchedStat(std::string_view text, SchedStat* out) {
  const char* p = text.data();
  const char* end = p + text.size();
  uint64_t cpu = 0, delay = 0, slices = 0;
  if (!NextNumber(&p, end, &cpu) || !NextNumber(&p, end, &delay) || !NextNumber(&p, end, &slices)) {
    return false;
  }
  while (p < end && (*p == ' ' || *p == '\n')) ++p;
  if (p != end) return false;
  out->cpu_ns = static_cast<int64_t>(cpu);
  out->run_delay_ns = static_cast<int64_t>(delay);
  out->timeslices = slices;
  return true;
}

bool ReadThreadSchedStat(SchedStat* out) {
  if (!t_file.fd) {
    if (t_file.failed) return false;
    t_file.fd.Reset(open(kPath, O_RDONLY | O_CLOEXEC));
    if (!t_file.fd) {
      t_file.failed = true;
      return false;
    }
  }
  return ReadAt(t_file.fd.get(), out);
}

bool ReadThreadSchedStatFresh(SchedStat* out) {
  const UniqueFd fd(open(kPath, O_RDONLY | O_CLOEXEC));
  return fd && ReadAt(fd.get(), out);
}

}  // namespace kv
