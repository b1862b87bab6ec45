"""The memory check (--memory): the submission rebuilt with -fsanitize=address,undefined,
each server under the kit workload (three runs, so a batch counter that runs past its
array is reached) and the robustness probes' malformed frames, and each server's first
error reported with its kind and source line: a finding, scored only when the course's
weights give it points."""

import re
import time

from analysis.grade.checks.races import sanitized
from analysis.grade.checks.robustness import MALFORMED, _send_probe
from analysis.grade.measure import kitload as K
from analysis.grade.measure.sandboxed import start

FLAGS = "-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined"
# halt at the first error (ASan does by itself; UBSan must be told), no leak report at exit
# (a kit server never frees its array: that is not a memory error of the lab's)
ENV = (("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0:halt_on_error=1"),
       ("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1"))
RUNS = 3
_ERROR = re.compile(r"(?:ERROR: AddressSanitizer: ([\w-]+)|runtime error: (.{0,120}))")
_FRAME = re.compile(r"#\d+ 0x[0-9a-f]+ in (\S+) (\S+:\d+)")


def first_error(log: str) -> str:
    """'heap-buffer-overflow in handle server.c:123' from a sanitizer's report, or ''."""
    m = _ERROR.search(log)
    if not m:
        return ""
    kind = m.group(1) or f"undefined behaviour: {m.group(2).strip()}"
    where = ""
    for fn, loc in _FRAME.findall(log[m.start():]):
        if "/sub/" in loc or not loc.startswith("/usr"):   # the submission's own code
            where = f" in {fn} {loc.rsplit('/', 1)[-1]}"
            break
    if m.group(2):   # UBSan names its line before the message: 'file.c:12:5: runtime error'
        head = log[max(0, m.start() - 200):m.start()].rsplit("\n", 1)[-1]
        loc = re.search(r"([\w./-]+:\d+):\d+: $", head)
        where = where or (f" at {loc.group(1).rsplit('/', 1)[-1]}" if loc else "")
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
    err = first_error(s.output.text())
    if err:
        return True, f"{name}: {err} (after {served} requests answered)"
    if why:
        return None, f"{name}: not checked ({why})"
    return False, (f"{name}: no memory error reported under {RUNS} kit runs (n=10, {served} "
                   f"requests answered) and {len(MALFORMED)} malformed requests")


def memory_check(ctx, _bin_dir, servers) -> dict:
    """Rebuilt with AddressSanitizer and UBSan, each server under the kit workload and the
    malformed frames (races.sanitized)."""
    return sanitized(ctx, "memory", FLAGS, "-fsanitize=address,undefined", _memory_one,
                     servers)
