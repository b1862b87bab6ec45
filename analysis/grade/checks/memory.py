"""The memory check (--memory): the submission rebuilt with -fsanitize=address,undefined,
each server under the kit workload (three runs, so a batch counter that runs past its
array is reached) and the robustness probes' malformed frames, and each server's first
error reported with its kind and source line: a finding, scored only when the course's
weights give it points."""

import os
import re
import time

from analysis.grade.checks.races import COMMON, no_error, reports, sanitized
from analysis.grade.checks.robustness import MALFORMED, _send_probe
from analysis.grade.measure import kitload as K
from analysis.grade.measure.sandboxed import start

FLAGS = "-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined"
# halt at the first error (ASan does by itself; UBSan must be told), no leak report at exit
# (a kit server never frees its array: that is not a memory error of the lab's); the heap
# poisoned and the program's own poisoning calls ignored, whatever its defaults say; the
# rest as races.COMMON (UBSan's options too: in one binary with ASan, a log_path compiled
# into __ubsan_default_options would otherwise win over ASAN_OPTIONS's)
ENV = (("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0:halt_on_error=1:poison_heap=1:"
                        "allow_user_poisoning=0:replace_str=1:replace_intrin=1:" + COMMON),
       ("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1:" + COMMON))
RUNS = 3
BUILT_AT = "/sub/src/"   # where the rebuild ran: the frames' paths of the submission's code
SOURCE_KINDS = (".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp")
_ERROR = re.compile(r"(?:ERROR: AddressSanitizer: ([\w-]+)|runtime error: (.{0,120}))")
_FRAME = re.compile(r"#\d+ 0x[0-9a-f]+ in (\S+) (\S+):(\d+)")


def own_sources(folder, limit: int = 5000) -> set:
    """The source files of the submission's copy, as paths relative to it (never through a
    link, at most `limit` entries looked at)."""
    found, seen, todo = set(), 0, [("", str(folder))]
    while todo and seen < limit:
        rel, path = todo.pop()
        try:
            with os.scandir(path) as it:
                for e in it:
                    seen += 1
                    r = f"{rel}{e.name}"
                    if e.is_dir(follow_symlinks=False) and r.count("/") < 8:
                        todo.append((r + "/", e.path))
                    elif e.name.endswith(SOURCE_KINDS) and e.is_file(follow_symlinks=False):
                        found.add(r)
        except OSError:
            continue
    return found


def _own(path: str, sources: set) -> str:
    """The path relative to the submission when it is one of its sources, else ''."""
    rel = os.path.normpath(path[len(BUILT_AT):] if path.startswith(BUILT_AT) else path)
    return rel if rel in sources else ""


def first_error(log: str, sources: set) -> str:
    """'heap-buffer-overflow in handle server.c:123' from a sanitizer's report, or '': the
    place is the first frame in one of the submission's own `sources` (relative paths), so
    an error inside the C library is placed at the student's call."""
    m = _ERROR.search(log)
    if not m:
        return ""
    kind = m.group(1) or f"undefined behaviour: {m.group(2).strip()}"
    where = ""
    for fn, path, line in _FRAME.findall(log[m.start():]):
        if own := _own(path, sources):
            where = f" in {fn} {own}:{line}"
            break
    if m.group(2) and not where:   # UBSan names its line first: 'file.c:12:5: runtime error'
        head = log[max(0, m.start() - 200):m.start()].rsplit("\n", 1)[-1]
        loc = re.search(r"([\w./-]+):(\d+):\d+: $", head)
        own = _own(loc.group(1), sources) if loc else ""
        where = f" at {own}:{loc.group(2)}" if own else ""
    return kind + where


def _memory_one(ctx, bdir, name) -> tuple:
    """(True an error | False clean | None not checked, evidence line)."""
    s, why = start(ctx, bdir, name, 10, f"{name}_asan", env=ENV)
    served = 0
    if not why:
        for _ in range(RUNS):
            done, _ = K.drive(s.port, K.kit_plan(10), ctx.cfg["request_timeout_s"])
            served += sum(q.ok for q in done)
            if not s.alive():
                break
        for _what, payload in MALFORMED:
            if s.alive():
                _send_probe(s.port, payload)
        time.sleep(0.3)
    s.stop()
    err = first_error(reports(ctx, s), own_sources(bdir))
    if err:
        return True, f"{name}: {err} (after {served} requests answered)"
    return no_error(s, name, why, "the runs",
                    f"{name}: no memory error reported under {RUNS} kit runs (n=10, {served} "
                    f"requests answered) and {len(MALFORMED)} malformed requests")


def memory_check(ctx, _bin_dir, servers) -> dict:
    """Rebuilt with AddressSanitizer and UBSan, each server under the kit workload and the
    malformed frames (races.sanitized)."""
    return sanitized(ctx, "memory", FLAGS, "-fsanitize=address,undefined", _memory_one,
                     servers, "asan")
