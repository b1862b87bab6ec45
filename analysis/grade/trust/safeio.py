"""Reading what a submission produced without trusting it.

A submission controls every file in its working folders: a timing file may be a symbolic
link to a secret, a FIFO that never ends, a device, or gigabytes long. Everything it wrote
is therefore opened with O_NOFOLLOW | O_NONBLOCK, used only when it is a regular file, and
read up to a byte cap; output streams keep their head and tail and say what was cut.
"""

import os
import stat
import threading

READ_CAP = 1 << 20       # bytes of a produced file that are ever read
KEEP = 32 << 10          # head and tail kept of a captured stream


class Unsafe(Exception):  # noqa: N818 - reads as "safeio.Unsafe"
    """The path is not a regular file we may read; the message says what it is instead."""


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return word
    return "not a regular file"


def read_bytes(path, cap: int = READ_CAP) -> tuple:
    """(data, total size) of a regular file, at most `cap` bytes of it. Raises
    FileNotFoundError when absent, Unsafe (never following it) when it is anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        if e.errno == 2:
            raise FileNotFoundError(path) from None
        try:
            st = os.lstat(path)
        except OSError:
            raise Unsafe(f"unreadable ({e.strerror})") from None
        raise Unsafe(_kind(st.st_mode) if not stat.S_ISREG(st.st_mode)
                     else f"unreadable ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unsafe(_kind(st.st_mode))
        return read_fd(fd, cap), st.st_size
    finally:
        os.close(fd)


def read_fd(fd: int, cap: int) -> bytes:
    """At most `cap` bytes from an open descriptor, in 64 KiB reads."""
    chunks, got = [], 0
    while got < cap:
        b = os.read(fd, min(65536, cap - got))
        if not b:
            break
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def read_text(path, cap: int = READ_CAP) -> tuple:
    """(text, cut) where cut says how many bytes past the cap were not read."""
    data, size = read_bytes(path, cap)
    return data.decode("utf-8", "replace"), max(0, size - len(data))


class Capture:
    """Drains a pipe in a thread, keeping the first and last `keep` bytes, so a build that
    prints hundreds of megabytes costs the grader 2 x `keep` of memory."""

    def __init__(self, fd: int, keep: int = KEEP):
        self.keep, self.head, self.tail, self.total = keep, bytearray(), bytearray(), 0
        self._fd = fd
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()

    def _drain(self) -> None:
        try:
            while True:
                b = os.read(self._fd, 65536)
                if not b:
                    break
                self.total += len(b)
                room = self.keep - len(self.head)
                if room > 0:
                    self.head += b[:room]
                    b = b[room:]
                if b:
                    self.tail += b
                    if len(self.tail) > self.keep:
                        del self.tail[:len(self.tail) - self.keep]
        except OSError:
            pass
        finally:
            os.close(self._fd)

    def join(self, timeout: float = 10.0) -> None:
        self._t.join(timeout)

    def text(self) -> str:
        """The kept output; a line in the middle states how much was cut."""
        cut = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", "replace")
        if cut <= 0:
            return head + self.tail.decode("utf-8", "replace")
        return (head + f"\n[... {cut} bytes of output cut: only the first and last "
                f"{self.keep} bytes are kept ...]\n" + self.tail.decode("utf-8", "replace"))
