"""The race detector (--race): the submission rebuilt with -fsanitize=thread, each server
under one kit run; and what every sanitized check shares (sanitized): the options a
program cannot override, the reports read from the grader's own log files as well as the
output, and the binary's symbols checked for hooks that silence or redirect reports."""

import os
import subprocess
import time

from analysis.grade import records as C
from analysis.grade.checks.build import build, built
from analysis.grade.context import check
from analysis.grade.measure import kitload as K
from analysis.grade.measure import symbols
from analysis.grade.measure.sandboxed import spawn, start

# The runtimes read a binary's compiled-in defaults first and the environment after: every
# option the verdict relies on is set here, so no default of the program's survives. Reports
# go to files of the grader's (log_path: <prefix>.<pid> in the server's working folder),
# read beside the output, with no suppressions and no path stripped from the frames.
LOG = "sanitizer-report"
COMMON = (f"suppressions=:color=never:strip_path_prefix=:log_exe_name=0:"
          f"log_path=/sub/run/{LOG}")
ENV = (("TSAN_OPTIONS", "report_bugs=1:report_atomic_races=1:ignore_noninstrumented_modules=0:"
                        "ignore_interceptors_accesses=0:enable_annotations=0:halt_on_error=0:"
                        + COMMON),)
LOG_FILES = 4            # report files read at most (one per process of the server)
LOG_CAP = 64 << 10       # bytes of each read
READ_S = 20              # seconds the reader may take
TAMPERING = ("a submission may not set its sanitizer's options or suppressions, handle or "
             "redirect its reports, or annotate its accesses")


def reports(ctx, s) -> str:
    """The server's output, then the grader's report files in its working folder. The
    runtime makes them readable by the submission's uid alone, so they are printed by a
    reader in an inner sandbox of that uid (where a link reaches nothing of the grader's),
    regular files only, each up to LOG_CAP, the whole kept as any output is."""
    script = (f'n=0; for f in {LOG}.*; do [ -f "$f" ] || continue; n=$((n + 1)); '
              f'[ $n -gt {LOG_FILES} ] && break; head -c {LOG_CAP} -- "$f"; done')
    proc, out = spawn(ctx, ["/bin/sh", "-c", script], {}, {s.run_dir: "/sub/run"},
                      "/sub/run", ctx.limits, LOG_FILES * LOG_CAP)
    try:
        proc.wait(READ_S)
    except subprocess.TimeoutExpired:
        proc.kill()
    out.join()
    return s.output.text() + "\n" + out.text()


def ended(s) -> str:
    """'' when the grader stopped the server, else how it ended on its own."""
    return "" if s.stopped_by_us else s.death()


def no_error(s, name: str, why: str, runs: str, clean: str) -> tuple:
    """A run_one's verdict (see sanitized) when the reports held no error: not checked when
    the server did not start (`why`) or ended on its own during `runs`, where a report may
    have been lost with it; else clean, `clean` its evidence line."""
    if why:
        return None, f"{name}: not checked ({why})"
    if ended(s):
        return None, f"{name}: not checked: it ended during {runs} ({ended(s)}), no report"
    return False, clean


def _race_one(ctx, bdir, name) -> tuple:
    """(True racy | False clean | None not checked, evidence line)."""
    s, why = start(ctx, bdir, name, 10, f"{name}_tsan", env=ENV,
                   wrap=["setarch", os.uname().machine, "-R"])
    if not why:
        K.drive(s.port, K.kit_plan(10), ctx.cfg["request_timeout_s"])
        time.sleep(0.2)
    s.stop()
    log = reports(ctx, s)
    races = log.count("WARNING: ThreadSanitizer: data race")
    if races:
        first = [ln.strip() for ln in log.splitlines() if ln.strip().startswith("#")][:4]
        return True, (f"{name}: {races} data race report(s); first stack: "
                      + " | ".join(first))
    fatal = next((ln for ln in log.splitlines() if "FATAL" in ln), "")
    if fatal:
        return None, f"{name}: not checked: ThreadSanitizer could not run: {fatal[:200]}"
    return no_error(s, name, why, "the run",
                    f"{name}: no data race reported under one kit run (n=10)")


def _judge(ctx, bdir, name, runtime, run_one) -> tuple:
    """One server: its symbols, then its run (run even when tampered with: the page shows
    what the grader's options found). A hook only another sanitizer's runtime reads is
    named, and the run judges. (True | False | None, evidence lines)."""
    hooks, why, unread = symbols.inspect(bdir / name, runtime)
    found, line = run_one(ctx, bdir, name)
    if hooks:
        return True, [f"{name}: tampering: {'; '.join(hooks)}", line]
    lines = [line]
    if unread:
        lines.append(f"{name}: not held against it, as no runtime of this build reads it: "
                     f"{'; '.join(unread)}")
    if why and found is not True:
        return None, [f"{name}: not checked: {why}", *lines]
    return found, lines


def sanitized(ctx, cid: str, flags: str, what: str, run_one, servers, runtime: str) -> dict:
    """The submission rebuilt with `flags` in CFLAGS and LDFLAGS (build_<cid>), each server
    run by run_one(ctx, folder, name) -> (True an error | False clean | None not checked,
    line) after its symbols were read (_judge: `runtime` is tsan or asan). FAIL on an error
    or tampering; PASS only when every server was checked and none erred; a server not
    checked makes it SKIP, never PASS. The sanitizers reserve terabytes of address space:
    no address-space limit."""
    lim = {**ctx.limits, "no_as": True}
    _, ev, bdir, _ = build(ctx, f"build_{cid}", ["CC=gcc", f"CFLAGS={flags}",
                                                 f"LDFLAGS={flags}"], lim)
    have = built(bdir, ctx.lab.servers)
    if not have:
        return check(cid, C.title(cid), "skip",
                     [f"not checked: could not rebuild with {what}", *ev[-3:]], judged=0)
    saved, ctx.limits = ctx.limits, lim
    try:
        res = [_judge(ctx, bdir, name, runtime, run_one) if name in have else
               (None, [f"{name}: not checked: not built with {what}"]) for name in servers]
    finally:
        ctx.limits = saved
    erred = [r for r, _ in res]
    status = "fail" if True in erred else "skip" if None in erred or not res else "pass"
    lines = [ln for _, lines in res for ln in lines]
    if any(": tampering: " in ln for ln in lines):
        lines.insert(0, f"FAIL for tampering: {TAMPERING}")
    return check(cid, C.title(cid), status, lines,
                 judged=sum(r is not None for r in erred))


def race_check(ctx, _bin_dir, servers) -> dict:
    """Rebuilt with -fsanitize=thread, each server under one kit run (sanitized)."""
    return sanitized(ctx, "races", "-O1 -g -fsanitize=thread", "-fsanitize=thread", _race_one,
                     servers, "tsan")
