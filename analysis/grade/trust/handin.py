"""A hand-in that is a zip (what students upload): its members read with caps, the way the
grader reads a folder. A member is kept only when it is a regular file or a folder at a path
inside the hand-in: no absolute path, no '..', no link, nothing encrypted, no device; the
zip's own size, its number of entries and every member's compression ratio are capped, and
what a member really unpacks to is counted as it is read (the sizes a zip declares are not
believed). One top folder holding everything (`alice/Makefile`, ...) is descended into.
Mac OS's `__MACOSX/` and `.DS_Store` are left out.

    python -m analysis.grade.trust.handin DST CAP [NAME,...]   (the zip on standard input)

unpacks into the empty folder DST as the submission's uid, inside the sandbox (the
launcher starts it; see unpack()), and prints what it did as one JSON object.
"""

import json
import os
import resource
import stat
import struct
import sys
import zipfile
import zlib
from dataclasses import dataclass, field

MAX_ZIP = 64 << 20           # bytes of the zip file itself
MAX_ENTRIES = 20_000         # members looked at (the launcher's copy has the same cap)
MAX_DEPTH = 32
MAX_RATIO = 200              # a member unpacking to more than this times its packed size
RATIO_SLACK = 1 << 20        # ... and to more than this many bytes is a bomb
MAX_NOTES = 20
LEFT_OUT = frozenset({"__MACOSX", ".DS_Store"})
MAKEFILES = ("Makefile", "makefile", "GNUmakefile")
CHUNK = 1 << 16


class NotAZipError(Exception):
    """The file is no zip this module will read: one line saying why."""


def is_zip(path) -> bool:
    """A file that starts like a zip (a local header, or the end record of an empty one)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) in (b"PK\x03\x04", b"PK\x05\x06")
    except OSError:
        return False


def entry_count(f) -> int:
    """The number of entries the zip's end record declares, read before zipfile parses
    the central directory (which it holds in memory whole). NotAZipError when there is no end
    record, or when the zip needs ZIP64 (more than 65,534 entries or 4 GiB)."""
    f.seek(0, os.SEEK_END)
    size = f.tell()
    if size > MAX_ZIP:
        raise NotAZipError(f"the zip is {size >> 20} MiB, over the {MAX_ZIP >> 20} MiB a "
                           "hand-in may be")
    f.seek(max(0, size - (0xFFFF + 22)))
    tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise NotAZipError("not a zip file (no end record)")
    entries = struct.unpack_from("<H", tail, at + 10)[0]
    if entries == 0xFFFF:
        raise NotAZipError("a ZIP64 archive (over 65,534 entries or 4 GiB): not unpacked")
    f.seek(0)
    return entries


@dataclass
class Member:
    parts: tuple
    info: zipfile.ZipInfo
    is_dir: bool

    @property
    def rel(self) -> str:
        return "/".join(self.parts)


@dataclass
class Listing:
    members: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    top: str = ""            # the one top folder descended into, or ""

    def note(self, name: str, why: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(f"{name!r}: {why}, not unpacked")
        elif len(self.notes) == MAX_NOTES:
            self.notes.append("... (more not unpacked)")


def _why_not(info: zipfile.ZipInfo, parts: list) -> str:
    """Why a member is not unpacked, or ''."""
    name = info.filename.replace("\\", "/")
    mode = info.external_attr >> 16
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "an absolute path"
    if ".." in parts:
        return "a path outside the hand-in"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "not a regular file or folder"
    if info.flag_bits & 0x1:
        return "encrypted"
    if len(parts) > MAX_DEPTH:
        return f"deeper than {MAX_DEPTH} folders"
    return ""


def listing(zf: zipfile.ZipFile) -> Listing:
    """The members to unpack, in the zip's order, each path relative to the hand-in (its one
    top folder stripped), and notes on every member left out."""
    out, seen = Listing(), set()
    for info in zf.infolist()[:MAX_ENTRIES]:
        parts = [p for p in info.filename.replace("\\", "/").split("/") if p not in ("", ".")]
        if not parts or LEFT_OUT & set(parts):
            continue
        why = _why_not(info, parts)
        if why:
            out.note(info.filename, why)
        elif tuple(parts) in seen:
            out.note(info.filename, "a second member of that name")
        else:
            seen.add(tuple(parts))
            out.members.append(Member(tuple(parts), info, info.is_dir()))
    if len(zf.infolist()) > MAX_ENTRIES:
        out.note("...", f"members past the first {MAX_ENTRIES}")
    tops = {m.parts[0] for m in out.members}
    if len(tops) == 1 and all(len(m.parts) > 1 or m.is_dir for m in out.members):
        out.top = tops.pop()
        out.members = [Member(m.parts[1:], m.info, m.is_dir) for m in out.members
                       if len(m.parts) > 1]
    return out


def read_member(zf: zipfile.ZipFile, m: Member, budget: int):
    """The member's bytes, chunk by chunk, never more than `budget` in all nor more than
    MAX_RATIO times its packed size (ValueError saying which)."""
    limit = min(budget, MAX_RATIO * max(m.info.compress_size, 1) + RATIO_SLACK)
    got = 0
    with zf.open(m.info) as f:
        while chunk := f.read(CHUNK):
            got += len(chunk)
            if got > limit:
                raise ValueError("unpacks to more than its compression ratio allows (a zip bomb)"
                                 if limit < budget else "beyond the bytes a hand-in may hold")
            yield chunk


READ_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError,
               EOFError, zlib.error, ValueError, OSError)


def _write(zf, m: Member, dst: str, budget: int) -> int:
    """One member under dst; the bytes written (the partial file removed on a failure)."""
    target = os.path.join(dst, *m.parts)
    if m.is_dir:
        os.makedirs(target, 0o755, exist_ok=True)
        return 0
    os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
    executable = (m.info.external_attr >> 16) & 0o111
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                 0o755 if executable else 0o644)
    written = 0
    try:
        with os.fdopen(fd, "wb") as g:
            for chunk in read_member(zf, m, budget):
                g.write(chunk)
                written += len(chunk)
    except BaseException:
        os.unlink(target)
        raise
    return written


def unpack_into(f, dst: str, cap: int, set_aside: frozenset = frozenset()) -> dict:
    """Unpacks the zip open in `f` into the empty folder `dst` (this process's own). With a
    Makefile at the top, the members named in `set_aside` are not written (make must build
    them); their first bytes are returned so the page can say what they were."""
    entry_count(f)
    result = {"notes": [], "bytes": 0, "files": 0, "top": "", "makefile": False,
              "set_aside": {}}
    with zipfile.ZipFile(f) as zf:
        todo = listing(zf)
        result["top"] = todo.top
        tops = {m.parts[0] for m in todo.members if len(m.parts) == 1 and not m.is_dir}
        result["makefile"] = any(name in tops for name in MAKEFILES)
        for m in todo.members:
            if result["makefile"] and len(m.parts) == 1 and m.rel in set_aside and not m.is_dir:
                with zf.open(m.info) as g:
                    result["set_aside"][m.rel] = g.read(64).hex()
                continue
            try:
                n = _write(zf, m, dst, cap - result["bytes"])
            except READ_ERRORS as e:
                todo.note(m.rel, str(e) or type(e).__name__)
                continue
            result["bytes"] += n
            result["files"] += 0 if m.is_dir else 1
        result["notes"] = todo.notes
    return result


# ---- the unpacking process ---------------------------------------------------------------

ADDRESS_SPACE = 1 << 30      # what the unpacking process may map
CPU_S = 60


def main(argv: list) -> int:
    for what, limit in ((resource.RLIMIT_AS, ADDRESS_SPACE), (resource.RLIMIT_CPU, CPU_S)):
        resource.setrlimit(what, (limit, limit))
    dst, cap = argv[0], int(argv[1])
    aside = frozenset(n for n in (argv[2] if len(argv) > 2 else "").split(",") if n)
    with os.fdopen(0, "rb") as f:
        try:
            result = unpack_into(f, dst, cap, aside)
        except NotAZipError as e:
            result = {"error": str(e)}
        except READ_ERRORS + (MemoryError,) as e:
            result = {"error": f"the zip could not be read: {str(e) or type(e).__name__}"}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
