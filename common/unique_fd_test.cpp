#include "common/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include <gtest/gtest.h>

namespace kv {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

TEST(UniqueFd, ClosesOnDestruction) {
  int raw = -1;
  {
    UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    raw = fd.get();
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFd, MoveTransfersOwnershipAndReleaseGivesItUp) {
  UniqueFd a(open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(b.get(), raw);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), raw);
  const int released = c.Release();
  EXPECT_FALSE(c.valid());
  EXPECT_TRUE(IsOpen(released));
  close(released);
}

TEST(UniqueFd, CloseReportsErrorsAsIOError) {
  UniqueFd empty;
  EXPECT_TRUE(empty.Close("nothing").ok());
  UniqueFd fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  EXPECT_TRUE(fd.Close("/dev/null").ok());
  EXPECT_FALSE(fd.valid());
  // A descriptor someone else closed already: close(2) says EBADF.
  UniqueFd stale(open("/dev/null", O_RDONLY | O_CLOEXEC));
  close(stale.get());
  const Status s = stale.Close("stale");
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_EQ(s.message(), "stale: Bad file descriptor");
}

}  // namespace
}  // namespace kv
