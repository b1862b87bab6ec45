"""The design check: the lock design each server really uses, its lock calls traced by an
LD_PRELOAD interposer (measure/design.py names the design) and confirmed by the grader's
own bursts (measure/bursts.py)."""

import time
from pathlib import Path

from analysis.grade import records as C
from analysis.grade.context import check
from analysis.grade.measure import bursts as B
from analysis.grade.measure import design as D
from analysis.grade.measure import kitload as K
from analysis.grade.measure.sandboxed import Server, spread, start
from analysis.grade.trust import safeio
from analysis.grade.trust import sandbox as S

# The lock tracer: the preload of `./lockbench profile` in its trace mode
# (profile/lockprof_trace.cpp), which the launcher turns on by handing the server a
# descriptor in $LOCKPROF_TRACE_FD.
TRACER = Path(S.REFERENCE) / "liblockprof.so"
TRACE_CAP = 8 << 20
DESIGN_THREADS = 30   # of the kit client's 100, ten requests each


def _design_one(ctx, bin_dir, name) -> tuple:
    """(True conforms | False another design | None undetermined, evidence line, fix): one
    server with the lock tracer preloaded under 300 requests of the kit workload at
    n = 1000 (30 of its 100 threads: enough strings requested twice), then the grader's
    bursts on it; the trace file is the launcher's, the server only holds a descriptor on
    it."""
    n = 1000
    s, why = start(ctx, bin_dir, name, n, f"{name}_design",
                   env=(("LD_PRELOAD", "/sub/liblockprof.so"),),
                   extra_ro={TRACER: "/sub/liblockprof.so"}, trace=True)
    measured = D.Measured(error=why or B.NO_DELAY)
    if not why:
        K.drive(s.port, K.kit_plan(n, threads=DESIGN_THREADS), ctx.cfg["request_timeout_s"])
        if ctx.lab.delay:
            measured = _measure_design(ctx, s)
        time.sleep(0.2)
    s.stop()
    if why:
        return None, f"{name}: not checked ({why})", ""
    # a course's weights may name the designs of a one-server version's main
    allowed = ctx.cfg.get("designs", {}).get(ctx.lab.name)
    trace = D.traced(_trace_text(s.trace), n)
    ctx.traced[name] = trace.kind
    if measured.skips_delay:
        ctx.skips_delay[name] = measured.holds()
    return D.judge(name, trace, measured,
                   tuple(allowed) if allowed else ctx.lab.designs.get(name, ()))


def _trace_text(path: Path) -> str | None:
    """The trace's whole lines (a cut at TRACE_CAP drops the partial last one), or None
    when there is no readable trace."""
    try:
        text, cut = safeio.read_text(path, TRACE_CAP)
    except (FileNotFoundError, safeio.Unsafe):
        return None
    return text[:text.rfind("\n") + 1] if cut else text


# kind: (reads?, all to one string?), B.BURST requests each
BURSTS = {"w1": (False, True), "wk": (False, False), "r1": (True, True)}
# finding of D.Measured: (the burst that takes longer when it holds, the one it is compared
# with, the ratio it is decided at: None for the speed check's pair)
FINDINGS = {"per_string": ("w1", "wk", None),
            "readers_overlap": ("w1", "r1", (D.OVERLAP_RATIO, D.OVERLAP_RATIO))}


def _measure_design(ctx, s: Server) -> D.Measured:
    """Bursts of each kind of BURSTS on a running server at n = 1000, in shuffled turns,
    until the findings its design needs are clear (the sequential rule of the speed check,
    at most B.SPEED_LOOKS looks)."""
    spans, failed = {kind: [] for kind in BURSTS}, {}
    targets = {kind: (s, [0] * B.BURST if one else spread(s.n, B.BURST), read)
               for kind, (read, one) in BURSTS.items()}
    got: dict = {}
    for _ in range(B.SPEED_LOOKS):
        B.rounds(ctx, targets, ctx.cfg["burst_rounds"], spans, failed)
        if failed:
            return D.Measured(error=f"a burst failed: {next(iter(failed.values()))}")
        got = {f: B.slower(ctx, spans, slow, fast, at)
               for f, (slow, fast, at) in FINDINGS.items()}
        if None not in (verdict for verdict, *_ in got.values()):
            break
    return D.Measured(*(got[f][0] for f in FINDINGS), ratios=tuple(got[f][2] for f in FINDINGS),
                      one_string_s=min(spans["w1"]), usleep_s=_usleep(ctx))


def _usleep(ctx) -> float:
    """The shortest usleep(10) here (s), measured once a grading."""
    if ctx.usleep_s is None:
        ctx.usleep_s = B.usleep_floor()
    return ctx.usleep_s


def check_design(ctx, bin_dir, present: list) -> dict:
    """The lock design each mainN really uses: its lock calls traced by an LD_PRELOAD
    interposer under the kit workload at n = 1000, confirmed by the grader's own bursts
    (design.judge). A server neither can judge is undetermined and costs nothing."""
    who = C.title("design", ctx.lab)
    if not TRACER.is_file():
        return check("design", who, "undetermined",
                     "not checked: the lock tracer (liblockprof.so) is not built")
    res = [_design_one(ctx, bin_dir, name) for name in present]
    decided = [ok for ok, _, _ in res if ok is not None]
    status = ("fail" if False in decided else
              "pass" if decided and len(decided) == len(res) else "undetermined")
    return check("design", who, status, [line for _, line, _ in res] + trace_extras(ctx, bin_dir),
                 fraction=sum(decided) / len(decided) if decided else 0.0,
                 fix=[f for _, _, f in res if f],
                 judged={name: int(ok is not None) for name, (ok, _, _) in zip(present, res)})


def trace_extras(ctx, bin_dir) -> list:
    """A line per extra target of the lab (labs.Lab.extras: main1..main3 beside a `main`
    that is the student's best design), named by the design its lock trace shows under the
    kit workload; never judged, never counted."""
    out = []
    for name in ctx.lab.extras:
        if not (Path(bin_dir) / name).is_file():
            out.append(f"{name} (an extra target): not built, not traced")
            continue
        s, why = start(ctx, bin_dir, name, 1000, f"{name}_extra",
                       env=(("LD_PRELOAD", "/sub/liblockprof.so"),),
                       extra_ro={TRACER: "/sub/liblockprof.so"}, trace=True)
        if not why:
            K.drive(s.port, K.kit_plan(1000, threads=DESIGN_THREADS),
                    ctx.cfg["request_timeout_s"])
            time.sleep(0.2)
        s.stop()
        trace = D.traced(_trace_text(s.trace), 1000) if not why else None
        out.append(f"{name} (an extra target): " + (
            f"not traced ({why})" if trace is None else trace.kind
            if trace.kind != D.UNDETERMINED else f"not told ({trace.evidence})"))
    return out
