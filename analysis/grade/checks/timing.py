"""The timing check: the lab's deliverable, server_output_time_aggregated, judged against
what the grader measured itself (the kit workload's lines, and the clock probe's), and
the tables of the page."""

import math
import random
import statistics
from pathlib import Path

from analysis import kernel_sockets as ks
from analysis.grade import records as C
from analysis.grade.context import SKIPPED, check, over_budget
from analysis.grade.measure import kitload as K
from analysis.grade.measure.bursts import (
    NO_DELAY,
    NO_REFS,
    REF_PER_STRING,
    stop_strays,
    strays_line,
)
from analysis.grade.measure.sandboxed import TIMING, await_lines, start
from analysis.grade.trust import sandbox as S

LATENCY_FLOOR_S = 5e-6   # every kit access sleeps usleep(10), so a mean below this is garbage


def parse_timing(line: str, lab=None):
    """A timing line's mean latency (s): the number, or for a lab whose lines are sums
    (2018) the number / 1000; None when it is not a number."""
    try:
        v = float(line.strip())
    except ValueError:
        return None
    return v / 1000 if lab is not None and lab.timing == "sum" else v


def _floor(lab) -> float:
    """The lowest plausible mean: every access sleeps usleep(10), except in the 2018 kit."""
    return LATENCY_FLOOR_S if lab is None or lab.delay else 0.0


AFTER_LOCK_SHARE = 0.25  # main1's probe lines below this share of its lock waiting: left out
TIMING_FIXES = {
    "missing": f"write {TIMING} in the server's working folder: after every 1000 requests "
               "append their mean latency in seconds with fprintf(f, \"%e\\n\", mean)",
    "format": "print one number per line with %e (a double, not a pointer or an integer)",
    "count": "write exactly one line per 1000 requests (a batch), no more, no less",
    "early": "write a batch's line only after its 1000 requests have all been answered: "
             "join the batch's threads first, then add up their latencies and write the mean "
             "(a line written before is an average of requests still running, and resetting "
             "the batch's index under them writes past the array)",
    "late": "write a batch's line as soon as its 1000th request has been served (after "
            "joining that batch's threads), not when the next batch's first connection "
            "arrives: the file must not stay one line behind while the server runs",
    "floor": "each request sleeps usleep(10) in the array access (keep the kit's "
             "usleep(ART_DELAY) in getContent and setContent), so a mean below 5 us means the "
             "delay was left out, or the clock or the division is wrong",
    "sum": "the lines look like the sum of the 1000 latencies: divide by 1000 for the mean",
    "after_lock": "the timing lines leave out the lock waiting the grader's client saw: start "
                  "the clock when the request has been read, before pthread_mutex_lock, and "
                  "keep each request's start time in a local variable of its own thread (a "
                  "start time in a global shared by all threads is a race: a thread then "
                  "measures from whichever request started last)",
    "above": "a latency above what the client itself waited cannot be: check the clock "
             "(one start and end time per thread, not shared globals) and the units",
    "unsafe": f"{TIMING} must be a regular file the server writes, not a link",
}


def _line_problems(lines, clients, lab=None) -> list:
    """[(kind, text)] for the lines of one setting, at most 4."""
    out, floor = [], _floor(lab)
    sums = lab is not None and lab.timing == "sum"
    for i, line in enumerate(lines):
        v = parse_timing(line, lab)
        quoted = repr(line[:40])
        client = clients[i] if i < len(clients) else None
        if v is None or not math.isfinite(v) or v <= 0:
            out.append(("format", f"line {i + 1} {quoted} is not a positive finite number"))
        elif v < floor:
            out.append(("floor", f"line {i + 1} {quoted} is below {floor:g} s, "
                                 "impossible with usleep(10) per access: the server skips "
                                 "the kit's delay, or its clock is wrong"))
        elif client is not None and v > client * 1.5:
            sum_like = not sums and floor <= v / 1000 <= client * 1.5
            out.append(("sum" if sum_like else "above",
                        f"line {i + 1} {quoted} is above the client's own mean latency "
                        f"{client:.3e} s" + (" (about 1000 times a mean: a sum?)"
                                             if sum_like else "")))
        if len(out) >= 4:
            break
    return out


def _setting_problems(e, lab=None) -> list:
    lines, done = e["timing"], e["runs_done"]
    if lines is None:
        return [("unsafe" if e.get("timing_problem") else "missing",
                 e.get("timing_problem") or f"no {TIMING} file")]
    out = [("unsafe", e["timing_problem"])] if e.get("timing_problem") else []
    if len(lines) == done - 1 and not e.get("failure"):
        out.append(("late", f"{len(lines)} lines for {done} complete runs of 1000 requests: "
                            "the last batch's line was not written while the server ran on"))
    elif len(lines) != done:
        out.append(("count", f"{len(lines)} lines for {done} complete runs of 1000 requests"))
    return out + _line_problems(lines, e["client_mean_s"], lab)


PROBE_OUTSTANDING = 100  # requests the clock probe keeps in a server at once: the kit's
                         # 100 client threads
UNACCEPTED_MAX = 10      # connections a server leaves unaccepted while idle: more, and
                         # requests wait before it reads them (a fixed pool of threads)
STANDS_OUT = 1.5         # how much longer each batch of the judged server's must wait
PROBE_BATCHES = 3        # batches of 1000 requests per server, one timing line each


def _probe_plan(n: int) -> list:
    """The kit's 1000 requests at n, request j of every client thread before request j+1
    of any (the order the kit's 100 threads would roughly send them in)."""
    plan = K.kit_plan(n)
    return [mine[j] for j in range(K.PER_THREAD) for mine in plan]


def _probe_servers(ctx, bin_dir, present: list) -> tuple:
    """(the server whose lines are judged, [(label, folder, executable)] of those whose
    clients' waiting it is compared with, their names in words) or (None, why not). The
    four-server lab: main1 against main2 and main4; a one-server lab: main against the
    grader's own kit-style rwlock per string."""
    if not ctx.lab.delay:
        return None, NO_DELAY
    if ctx.lab.speed:
        others = [(m, bin_dir, m) for m in ("main2", "main4") if m in present]
        if "main1" not in present or not others:
            return None, "needs main1 and main2 or main4"
        return "main1", others, "main2's and main4's"
    judged, refs = ctx.lab.first, Path(S.REFERENCE)
    if judged not in present:
        return None, f"needs {judged}"
    if not (refs / REF_PER_STRING).is_file():
        return None, f"needs a server to compare with: {NO_REFS}"
    return judged, [(REF_PER_STRING, refs, REF_PER_STRING)], \
        f"the grader's rwlock per string's ({REF_PER_STRING})"


def clock_probe(ctx, bin_dir, present: list, round_: int = 1) -> dict:
    """What the timing lines must contain, measured by the grader: the judged server and
    those it is compared with (_probe_servers), at the largest n, each take PROBE_BATCHES
    batches of the kit's 1000 requests with PROBE_OUTSTANDING of them waiting in the server
    at once (K.window), in turns, and write one line per batch. Against the grader's own
    servers, each is started afresh for each batch and stopped after its line, with
    whatever the submission left running stopped before each start (stop_strays, counted
    in 'strays'): nothing of the submission runs during theirs, and each is measured
    alike. Returns {'n', 'judged', 'against', 'strays', label: {'client': [mean s a batch],
    'lines', 'why'}, 'round'} or {'why': why it did not run}. round_: a second round of
    batches takes its turns in another order, in fresh folders."""
    judged, *rest = _probe_servers(ctx, bin_dir, present)
    if judged is None:
        return {"why": rest[0], "judged": ctx.lab.first}
    (others, against), n, fresh = rest, max(ctx.cfg["sizes"]), not ctx.lab.speed
    res: dict = {"n": n, "judged": judged, "against": against, "strays": 0, "round": round_}
    where = {label: (folder, exe) for label, folder, exe in [(judged, bin_dir, judged), *others]}
    servers: dict = {}   # label: (the running server, batches done before it started)
    again = f"_r{round_}" * (round_ > 1)   # no line of the first round in its folders

    def up(label: str, tag: str) -> None:
        try:
            res["strays"] += stop_strays(ctx) if fresh else 0
        except OSError as e:  # the grader's own trouble: that server's batches not judged
            res[label]["why"] = f"what the submission left running was not stopped ({e})"
            return
        s, why = start(ctx, *where[label], n, tag)
        if why:
            s.stop()
            res[label]["why"] = f"did not start ({why})"
        else:
            servers[label] = (s, len(res[label]["client"]))

    def down(label: str) -> None:
        s, before = servers.pop(label)
        await_lines(ctx, s, len(res[label]["client"]) - before)
        s.stop()
        res[label]["lines"] = (res[label]["lines"] or []) + (s.timing_lines()[0] or [])

    for label in where:
        res[label] = {"client": [], "lines": None, "unaccepted": 0, "why": ""}
        if not fresh:
            up(label, f"{label}_clock{again}")
    rng = random.Random(20261126 + round_)
    order = list(where)
    for b in range(PROBE_BATCHES):
        rng.shuffle(order)
        for label in order:
            e = res[label]
            if fresh and not e["why"]:
                up(label, f"{label}_clock{b}{again}")
            if e["why"]:
                continue
            s, before = servers[label]
            _probe_batch(ctx, s, len(e["client"]) - before, n, e)
            if fresh:
                down(label)
    for label in list(servers):
        down(label)
    return res


def probe(ctx, bin_dir, present: list) -> None:
    """The clock probe's measurement (its record in records.py), when the grading does not
    leave it out and it fits in what is left of the time budget; else why not (the timing
    lines are then judged without it). Its results in ctx.probe."""
    if "probe" in ctx.cfg.get("skip", ()):
        ctx.probe = {"why": SKIPPED, "judged": ctx.lab.first}
        return
    why = over_budget(ctx, "probe")
    if why:
        ctx.probe = {"why": why, "judged": ctx.lab.first}
        return
    ctx.log("clock probe")
    first = clock_probe(ctx, bin_dir, present)
    # Lock waiting hidden in some batch by a busy machine leaves the clock unjudged; a
    # second round, when it fits, is judged on its own (every batch must stand out again).
    if not lost_in_noise(first) or ctx.left() < ctx.cost("probe"):
        ctx.probe = first
        return
    ctx.log("clock probe: a second round, no lock waiting stood out in every batch")
    again = clock_probe(ctx, bin_dir, present, round_=2)
    again["strays"] += first["strays"]
    ctx.probe = again


def _probe_batch(ctx, s, done: int, n: int, e: dict) -> None:
    """One probe batch on the server s, which has taken `done` batches before it: its
    client mean, or why it failed, in e; in e['early'] the lines already in its timing file
    just before the batch's last request went out (more than `done`: this batch's line was
    written before its batch had finished)."""
    reqs = _probe_plan(n)
    seen = []
    err, waiting = K.window(s.port, reqs, PROBE_OUTSTANDING, ctx.cfg["request_timeout_s"],
                            lambda: ks.accept_queue(s.port) or 0,
                            before_last=lambda: seen.append(len(s.timing_lines()[0] or [])))
    e["unaccepted"] = max(e["unaccepted"], waiting or 0)
    if seen and seen[0] > done:
        e.setdefault("early", []).append(len(e["client"]) + 1)
    answered = [r for r in reqs if r.ok]   # a close carries no kernel time of its own
    if err:
        e["why"] = err
    elif not s.alive():
        e["why"] = f"the server {s.death()} during a batch"
    elif not answered:
        e["why"] = "no request of its batch was answered"
    else:
        e["client"].append(statistics.fmean(r.end - r.start for r in answered))


def batch_problems(probe) -> list:
    """[(kind, text)] of the judged server's probe lines, each against the grader's own
    batch: a line already written before the batch's last request was sent ('early'), and
    a line above the mean wait its batch's requests had from outside, which a mean of them
    cannot be ('above'). Judged whatever the noise: neither needs lock waiting to show."""
    if probe is None or probe.get("why"):
        return []
    judged = probe.get("judged", "main1")
    one, out = probe[judged], []
    if one.get("early"):
        b = one["early"]
        which = (f"the line of batch {b[0]} was" if len(b) == 1 else
                 f"the lines of batches {', '.join(map(str, b[:-1]))} and {b[-1]} were")
        out.append(("early", f"{judged} under the grader's clock probe: {which} already in "
                             "the file before the grader sent the batch's last request: "
                             "written before its batch finished"))
    lines = one["lines"] or []
    for i, (line, waited) in enumerate(zip(lines, one["client"])):
        v = parse_timing(line)
        if v is not None and math.isfinite(v) and v > waited * 1.5:
            out.append(("above", f"{judged} under the grader's clock probe: line {i + 1} "
                                 f"{line[:40]!r} cannot be the mean of its batch's 1000 "
                                 f"latencies: from outside they took {waited:.3e} s on "
                                 "average"))
            break
    return out


def _unjudged(probe, head: str) -> str:
    """Why the judged server's probe lines cannot be judged at all (its line), or ''."""
    if probe is None or probe.get("why"):
        return f"{head}: not run ({probe['why'] if probe else 'no kit workload'})"
    one = probe[probe.get("judged", "main1")]
    vals = [parse_timing(x) for x in one["lines"] or []]
    if (one["why"] or len(vals) != len(one["client"])
            or not all(v is not None and math.isfinite(v) for v in vals)):
        why = one["why"] or (f"{len(vals)} timing lines for {len(one['client'])} batches"
                             if len(vals) != len(one["client"]) else
                             "a timing line that is not a finite number")
        return f"{head}: not judged ({why})"
    if one["unaccepted"] > UNACCEPTED_MAX:
        return (f"{head}: {one['unaccepted']} of 1000 open connections stayed "
                "unaccepted, so requests wait before the server reads them (a fixed "
                "pool of threads?) and a clock started at the read rightly leaves that out: "
                "not judged")
    return ""


def _reference(probe, judged: str) -> float:
    """The median client wait of the fastest server the judged one is compared with."""
    others = [e["client"] for m, e in probe.items()
              if isinstance(e, dict) and m != judged and e.get("client")]
    return min((statistics.median(c) for c in others), default=math.nan)


def lost_in_noise(probe) -> bool:
    """True when the probe could be judged and some of the judged server's batches stood
    out against the reference but not all: lock waiting is there, and a busy machine hid
    it in some batch, which another round often does not. When none stood out there is
    nothing to find again (an rwlock per string makes no waiting that stands out)."""
    if _unjudged(probe, ""):
        return False
    judged = probe.get("judged", "main1")
    bar, waits = STANDS_OUT * _reference(probe, judged), probe[judged]["client"]
    return math.isfinite(bar) and min(waits) < bar <= max(waits)


def _probe_problem(probe) -> tuple:
    """(True when the judged server's probe lines leave the lock waiting out | False | None
    not judged, evidence line). A probe without 'judged' is the four-server lab's."""
    judged = (probe or {}).get("judged", "main1")
    against = (probe or {}).get("against", "main2's and main4's")
    head = f"{judged} under the grader's clock probe"
    if probe is not None and not probe.get("why"):
        head += (f" (n={probe['n']}, batches of 1000 requests with {PROBE_OUTSTANDING} "
                 "waiting in the server at once"
                 + (", a second round: in the first no lock waiting stood out in every "
                    "batch" if probe.get("round", 1) > 1 else "") + ")")
    why = _unjudged(probe, head)
    if why:
        return None, why
    one = probe[judged]
    vals = [parse_timing(x) for x in one["lines"]]
    mine, ref = statistics.median(one["client"]), _reference(probe, judged)
    # Lock waiting is in every batch, a busy machine's delay in some: each of the judged
    # server's batches must stand out against the faster reference's median.
    if not math.isfinite(ref) or min(one["client"]) < STANDS_OUT * ref:
        return None, (f"{head}: its clients waited {mine:.3e} s (the least in a batch "
                      f"{min(one['client']):.3e} s), {against} {ref:.3e} s: no lock waiting "
                      "stands out in every batch, so the clock is not judged on it")
    wait, line = mine - ref, statistics.median(vals)
    if wait > 1e-3 and line < AFTER_LOCK_SHARE * wait:
        return True, (f"{head}: median line {line:.3e} s is below {AFTER_LOCK_SHARE:g} x "
                      f"the {wait:.3e} s of lock waiting the client saw (its wait beyond "
                      f"{against}): the lock waiting is left out (a clock started "
                      "after the lock, or start times shared between threads)")
    return False, (f"{head}: median line {line:.3e} s against {wait:.3e} s of lock waiting "
                   f"the client saw beyond {against}: the lock waiting is in")


def check_timing(wl, runs, probe=None, lab=None, skips: dict | None = None) -> dict:
    """The lab's deliverable, judged against what the grader measured itself: the kit
    workload's lines, and main1's lines under the clock probe. It can cost only this
    check's points. lab: whose lines are means or sums (the 2018 kit's); skips: {server:
    its hold times} of the servers whose holds the design check measured far under the
    kit's usleep(10), named beside lines that are too small for the delay."""
    ev, kinds, good, total = [], [], 0, 0
    judged = dict.fromkeys(wl, 0)
    for name, per_n in wl.items():
        for n, e in per_n.items():
            judged[name] += len(e["timing"] or [])
            if not e["runs_done"] and not e["timing"] and not e.get("timing_problem"):
                ev.append(f"{name} n={n}: no batch of 1000 requests went through (the workload "
                          "check says why), so no line was due: not judged")
                continue
            total += 1
            problems = _setting_problems(e, lab)
            if problems:
                ev.append(f"{name} n={n}: " + "; ".join(text for _, text in problems))
                kinds += [k for k, _ in problems if k not in kinds]
            else:
                good += 1
                ev.append(f"{name} n={n}: {len(e['timing'])} plausible %e lines"
                          + (" (sums of 1000 latencies, as the older kit writes)"
                             if lab is not None and lab.timing == "sum" else ""))
    if "floor" in kinds:
        ev += [f"{name} skips the kit's delay: {holds} (the design check's bursts)"
               for name, holds in (skips or {}).items()]
    left_out, line = _probe_problem(probe)
    ev.append(line)
    if (probe or {}).get("strays"):
        ev.append(f"clock probe: {strays_line(probe['judged'], probe['strays'])}")
    if left_out:
        kinds.append("after_lock")
    found = batch_problems(probe)
    ev += [text for _, text in found]
    kinds += [k for k, _ in found if k not in kinds]
    if left_out is not None or found:
        total, good = total + 1, good + (not left_out and not found)
        who = probe["judged"]
        judged[who] = judged.get(who, 0) + len(probe[who]["lines"] or [])
    return check("timing", C.title("timing", lab), "fail" if kinds else "pass", ev,
                 fraction=good / total if total else 0.0, fix=[TIMING_FIXES[k] for k in kinds],
                 judged=judged)


def check_timing_run(ctx, _bin_dir, _present) -> dict:
    """The timing check's runner, on the kit workload's lines and the clock probe's."""
    return check_timing(ctx.wl, ctx.cfg["runs"], ctx.probe, ctx.lab, ctx.skips_delay)


def tables(wl, lab=None) -> dict:
    """{name: {n: {"mean", "median" (timing file, s, None if implausible), "client"}}}."""
    out = {}
    for name, per_n in wl.items():
        for n, e in per_n.items():
            vals = [parse_timing(ln, lab) for ln in (e["timing"] or [])]
            vals = [v for v in vals if v is not None and math.isfinite(v)
                    and v >= _floor(lab)]
            out.setdefault(name, {})[str(n)] = {
                "mean": statistics.fmean(vals) if vals else None,
                "median": statistics.median(vals) if vals else None,
                "lines": len(e["timing"] or []),
                "client": statistics.median(e["client_mean_s"]) if e["client_mean_s"] else None}
    return out
