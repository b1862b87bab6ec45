"""The C sources of a submission, as the similarity check reads them: from a folder or a zip
handed in, C/C++ files only, build and tool folders left out, with notes on what was not read.

A submission is hostile: its files are read without following links, only regular files,
up to byte caps (per file, per submission, files, entries, nesting), so that no folder a
student built can lead outside it, hang the grader or make it read without end. The notes
name what was left out; any path in them is shown through names.visible()."""

import os
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from analysis.grade.trust import handin, safeio
from analysis.grade.trust import names as N

EXTENSIONS = frozenset({".c", ".h", ".cc", ".cpp", ".hpp"})
# Build outputs and tool folders: their sources are generated, or copies of the student's.
SKIP_DIRS = frozenset({".git", ".svn", ".hg", "build", "builds", "cmake-build-debug",
                       "cmake-build-release", "CMakeFiles", "_deps", "obj", "bin", "out",
                       "dist", "__MACOSX", "node_modules", ".vscode", ".idea"})
FILE_CAP = 1 << 20        # bytes read of one file
SUBMISSION_CAP = 2 << 20  # bytes read of one submission (tokenising 1 MiB costs up to ~10 s)
MAX_FILES = 300           # source files read of one submission
MAX_ENTRIES = 20000       # directory entries looked at in one submission
MAX_DEPTH = 12            # folder nesting looked into

_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_OPEN_DIR = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


@dataclass
class Source:
    """One file read from a submission: its path inside it (as the student named it) and text."""
    path: str
    text: str


@dataclass
class _Reading:
    """What one submission's walk has read and what it left out, and the budgets left."""
    sources: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)  # reason -> count
    cut: list = field(default_factory=list)      # (path, bytes read, size) of files cut
    budget: int = 0
    entries: int = 0

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + count


def _open_at(dir_fd: int, name: str, flags: int, r: _Reading, skipped: str) -> int | None:
    """A descriptor for `name` in the open folder, or None (counted under `skipped`)."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        r.skip(skipped)
        return None


def _read_file(dir_fd: int, name: str, rel: str, r: _Reading) -> None:
    """Reads one source through its folder's descriptor: O_NOFOLLOW refuses a link,
    O_NONBLOCK keeps a FIFO from hanging, fstat refuses anything not a regular file."""
    fd = _open_at(dir_fd, name, _OPEN_FILE, r, "links or unreadable files not read")
    if fd is None:
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            r.skip("special files (FIFOs, devices, sockets) not read")
            return
        data, size = safeio.read_fd(fd, min(FILE_CAP, r.budget)), st.st_size
    finally:
        os.close(fd)
    r.budget -= len(data)
    if size > len(data):
        r.cut.append((rel, len(data), size))
    r.sources.append(Source(rel, data.decode("utf-8", errors="replace")))


def _entries(dir_fd: int, r: _Reading) -> list:
    """The folder's entries sorted by name (the same order every run), within MAX_ENTRIES."""
    with os.scandir(dir_fd) as it:
        got = []
        for e in it:
            if r.entries >= MAX_ENTRIES:
                r.skip(f"entries past the first {MAX_ENTRIES} not looked at")
                break
            r.entries += 1
            got.append(e)
    return sorted(got, key=lambda e: e.name)


def _walk(dir_fd: int, prefix: str, depth: int, r: _Reading) -> None:
    """Reads the C sources under an open folder; subfolders are opened relative to it with
    O_NOFOLLOW, so neither a link nor a folder swapped for one leads outside the submission."""
    for e in _entries(dir_fd, r):
        rel = prefix + e.name
        if e.is_symlink():
            r.skip("symbolic links not followed")
        elif e.is_dir(follow_symlinks=False):
            _walk_into(dir_fd, e.name, rel, depth, r)
        elif os.path.splitext(e.name)[1].lower() in EXTENSIONS:
            if len(r.sources) >= MAX_FILES or r.budget <= 0:
                r.skip("sources past the caps not read")
            else:
                _read_file(dir_fd, e.name, rel, r)


def _walk_into(dir_fd: int, name: str, rel: str, depth: int, r: _Reading) -> None:
    if name in SKIP_DIRS or name.startswith("cmake-build"):
        return
    if depth >= MAX_DEPTH:
        r.skip(f"folders nested deeper than {MAX_DEPTH} not looked into")
        return
    sub = _open_at(dir_fd, name, _OPEN_DIR, r, "links or unreadable folders not followed")
    if sub is None:
        return
    try:
        _walk(sub, rel + "/", depth + 1, r)
    finally:
        os.close(sub)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def _read_zip(path: Path, r: _Reading) -> None:
    """The sources of a zip handed in, its members as the grader unpacks them (handin)."""
    with open(path, "rb") as f:
        handin.entry_count(f)
        with zipfile.ZipFile(f) as zf:
            for m in handin.listing(zf).members:
                if (m.is_dir or SKIP_DIRS & set(m.parts[:-1])
                        or os.path.splitext(m.parts[-1])[1].lower() not in EXTENSIONS):
                    continue
                if len(r.sources) >= MAX_FILES or r.budget <= 0:
                    r.skip("sources past the caps not read")
                    continue
                with zf.open(m.info) as g:
                    data = g.read(min(FILE_CAP, r.budget))
                r.budget -= len(data)
                if m.info.file_size > len(data):
                    r.cut.append((m.rel, len(data), m.info.file_size))
                r.sources.append(Source(m.rel, data.decode("utf-8", errors="replace")))


def read_sources(root: Path) -> tuple[list[Source], list[str]]:
    """The C/C++ sources of a submission folder (or of a zip handed in) and notes on what
    was left out. The folder itself is the TA's path and may be a link; nothing inside it
    is followed."""
    r = _Reading(budget=SUBMISSION_CAP)
    if root.is_file():
        try:
            _read_zip(root, r)
        except (handin.NotAZipError, *handin.READ_ERRORS) as e:
            return r.sources, [f"not a readable zip ({str(e) or type(e).__name__})"]
        return r.sources, _notes(r)
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        return [], [f"not a readable folder ({e.strerror})"]
    try:
        _walk(fd, "", 0, r)
    finally:
        os.close(fd)
    return r.sources, _notes(r)


def _notes(r: _Reading) -> list:
    notes = [f"{why}: {n}" for why, n in sorted(r.skipped.items())]
    notes += [f"{N.visible(p)} cut: only the first {got} of its {size} bytes read"
              for p, got, size in r.cut]
    if r.budget <= 0:
        notes.append(f"reading stopped at {_size(SUBMISSION_CAP)} of sources")
    return notes
