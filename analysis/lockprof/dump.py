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

# lockprof's table holds at most a few thousand records of < 2 KiB; the timeline at most
# 262144 intervals of < 80 bytes; the stack table 4096 stacks of at most 64 frames
MAX_BYTES = 64 << 20
MAX_TEXT = 4096          # a site, a program path or an implementation name
MAX_FRAMES = 64          # the most return addresses a stack keeps (kStackMax)
CALLS = {f"pthread_{f}" for f in ("mutex_lock", "mutex_timedlock", "mutex_clocklock",
                                  "rwlock_rdlock", "rwlock_timedrdlock", "rwlock_clockrdlock",
                                  "rwlock_wrlock", "rwlock_timedwrlock", "rwlock_clockwrlock")}
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
    for key in ("untracked_ops", "holds_lost", "hold_sample"):
        if key in doc:
            _count(doc[key], key)
    for key in ("clock", "program", "reason"):
        if key in doc:
            _text(doc[key], key)
    if not isinstance(doc["locks"], list):
        raise BadDumpError("locks is not a list")
    for i, r in enumerate(doc["locks"]):
        check_lock(r, i)
    if "stacks" in doc:
        check_stacks(doc["stacks"], doc.get("objects"))
    if "timeline" in doc:
        check_timeline(doc["timeline"])


def _hex(v, what: str) -> int:
    try:
        n = int(_text(v, what), 16) if isinstance(v, str) and v.isalnum() else -1
    except ValueError:
        n = -1
    if not 0 <= n < 1 << 64:
        raise BadDumpError(f"{what} is not a hexadecimal address")
    return n


def _list(v, what: str) -> list:
    if not isinstance(v, list):
        raise BadDumpError(f"{what} is not a list")
    return v


def check_stacks(stacks, objects) -> None:
    """The contended stacks (--stacks) and the loaded objects their frames are named by."""
    _fields(stacks, "stacks", ("depth", "lost", "lost_wait_ns", "list"))
    for key in ("depth", "lost", "lost_wait_ns"):
        _count(stacks[key], f"stacks {key}")
    for i, s in enumerate(_list(stacks["list"], "stacks list")):
        what = f"stack {i}"
        _fields(s, what, ("call", "count", "wait_ns", "frames"))
        if s["call"] not in CALLS:
            raise BadDumpError(f"{what}: call is not a pthread function that waits")
        _count(s["count"], f"{what}: count")
        _count(s["wait_ns"], f"{what}: wait_ns")
        if len(_list(s["frames"], f"{what}: frames")) > MAX_FRAMES:
            raise BadDumpError(f"{what}: frames are more than {MAX_FRAMES}")
        for frame in s["frames"]:
            _hex(frame, f"{what}: a frame")
    for i, o in enumerate(_list(objects, "objects")):
        _fields(o, f"object {i}", ("path", "base", "text"))
        _text(o["path"], f"object {i}: path")
        _hex(o["base"], f"object {i}: base")
        for seg in _list(o["text"], f"object {i}: text"):
            if not isinstance(seg, list) or len(seg) != 2:
                raise BadDumpError(f"object {i}: text is not a list of [start, end] pairs")
            _hex(seg[0], f"object {i}: text start"), _hex(seg[1], f"object {i}: text end")


def check_timeline(timeline) -> None:
    """The timeline (--timeline): [what, mode, lock, tid, start ns, duration ns] each."""
    _fields(timeline, "timeline", ("lost", "events"))
    _count(timeline["lost"], "timeline lost")
    for i, e in enumerate(_list(timeline["events"], "timeline events")):
        if (not isinstance(e, list) or len(e) != 6 or e[0] not in ("h", "w")
                or e[1] not in ("m", "r", "w")):
            raise BadDumpError(f"timeline event {i} is not [h|w, m|r|w, lock, tid, start, "
                               "duration]")
        _hex(e[2], f"timeline event {i}: lock")
        for v, name in zip(e[3:], ("tid", "start", "duration")):
            _count(v, f"timeline event {i}: {name}")
