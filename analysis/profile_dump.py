"""One lockprof dump (liblockprof.so, profile/lockprof_dump.cpp, writes
lockprof.<pid>.json), read as untrusted input: the profiled program knows the dump folder
(it is in its $LOCKPROF_FILE) and can write its own file there, or replace the
interposer's. So the file is opened without following a link, its size is capped before it
is parsed, nesting too deep for the parser is refused, and every field the report reads is
checked for its type and range. A dump that fails any of that is one reason in words
(BadDumpError), never a traceback."""

import json
import os
import stat
from pathlib import Path

MAX_BYTES = 32 << 20     # lockprof's table holds at most a few thousand records of < 2 KiB
MAX_TEXT = 4096          # a site, a program path or an implementation name
KINDS = {"mutex": ("mutex",), "rwlock": ("read", "write"),
         "cond": ("wait", "signal", "broadcast")}


class BadDumpError(ValueError):
    """Why a dump cannot be used, in words."""


def read(path: Path) -> dict:
    """The checked dump at `path` (a regular file, not a link); BadDumpError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise BadDumpError(f"cannot be opened ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BadDumpError("is not a regular file")
        if st.st_size > MAX_BYTES:
            raise BadDumpError(f"is {st.st_size} bytes, over the {MAX_BYTES >> 20} MiB a dump "
                               "can be")
        data = f.read(MAX_BYTES + 1)
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadDumpError("is not UTF-8 text") from None
    except RecursionError:
        raise BadDumpError("is nested too deeply to be a dump") from None
    except ValueError as e:
        raise BadDumpError(f"is not JSON ({e})") from None
    check(doc)
    return doc


def _count(v, what: str) -> int:
    if type(v) is not int or v < 0:
        raise BadDumpError(f"{what} is not a count")
    return v


def _text(v, what: str) -> str:
    if not isinstance(v, str) or len(v) > MAX_TEXT:
        raise BadDumpError(f"{what} is not a text of at most {MAX_TEXT} characters")
    return v


def _fields(v, what: str, keys) -> dict:
    if not isinstance(v, dict):
        raise BadDumpError(f"{what} is not an object")
    missing = [k for k in keys if k not in v]
    if missing:
        raise BadDumpError(f"{what} has no {', '.join(missing)}")
    return v


def check_lock(r, i: int) -> None:
    """One record of "locks"; BadDumpError naming the record and the field otherwise."""
    what = f"lock record {i}"
    _fields(r, what, ("addr", "kind", "impl", "acquisitions", "contended", "wait_ns", "site"))
    _text(r["addr"], f"{what}: addr")
    if r["kind"] not in KINDS:
        raise BadDumpError(f"{what}: kind is not one of {', '.join(KINDS)}")
    _text(r["impl"], f"{what}: impl")
    modes = _fields(r["acquisitions"], f"{what}: acquisitions", KINDS[r["kind"]])
    if set(modes) != set(KINDS[r["kind"]]):
        raise BadDumpError(f"{what}: acquisitions are not those of a {r['kind']}")
    for mode, n in modes.items():
        _count(n, f"{what}: acquisitions {mode}")
    _count(r["contended"], f"{what}: contended")
    for hist in ("wait_ns", "hold_ns") if r["kind"] != "cond" else ("wait_ns",):
        h = _fields(r.get(hist), f"{what}: {hist}", ("p50", "p99"))
        _count(h["p50"], f"{what}: {hist} p50")
        _count(h["p99"], f"{what}: {hist} p99")
    _text(r["site"], f"{what}: site")
    if "site_object" in r:
        _text(r["site_object"], f"{what}: site_object")
    if "site_vaddr" in r:
        try:
            ok = 0 <= int(_text(r["site_vaddr"], f"{what}: site_vaddr"), 16) < 1 << 64
        except ValueError:
            ok = False
        if not ok:
            raise BadDumpError(f"{what}: site_vaddr is not a hexadecimal address")
    if "fast_reads" in r:
        _count(r["fast_reads"], f"{what}: fast_reads")


def check(doc) -> None:
    """The fields the report reads, each of its type; BadDumpError otherwise."""
    _fields(doc, "the dump", ("pid", "swap", "locks"))
    _count(doc["pid"], "pid")
    swap = _fields(doc["swap"], "swap", ("mutex", "rwlock"))
    _text(swap["mutex"], "swap mutex")
    _text(swap["rwlock"], "swap rwlock")
    for key in ("untracked_ops", "holds_lost"):
        if key in doc:
            _count(doc[key], key)
    for key in ("clock", "program", "reason"):
        if key in doc:
            _text(doc[key], key)
    if not isinstance(doc["locks"], list):
        raise BadDumpError("locks is not a list")
    for i, r in enumerate(doc["locks"]):
        check_lock(r, i)
