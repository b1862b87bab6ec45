"""The checks that drive the kit's own requests: the command line and the port quirk, the
initial values, the kit workload (like test.sh: errors, crashes, hangs), correctness under
concurrency (per-slot linearizability) and a silent client beside the others."""

import math
import random
import socket
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from analysis import ports
from analysis.grade import checks as C
from analysis.grade.measure import kitload as K
from analysis.grade.measure import linearize as L
from analysis.grade.measure.sandboxed import (
    MIN_RUNS,
    Server,
    await_lines,
    check,
    initial_value,
    start,
)


def check_cmdline(ctx, bin_dir, servers) -> dict:
    """Each server started with the kit's command line: listening on the port's
    byte-swapped twin, as the kit's client connects."""
    n, ev, ok = ctx.cfg["init_n"], [], True
    started = dict.fromkeys(servers, 0)
    for name in servers:
        s, why = start(ctx, bin_dir, name, n, f"{name}_cmdline")
        s.stop()
        if why:
            ok = False
            ev.append(f"{name} {n} 127.0.0.1 {s.asked}: {why}")
            continue
        started[name] = 1
        if s.quirk:
            ev.append(f"{name} {n} 127.0.0.1 {s.asked}: listening on {s.port} "
                      "(the kit's byte-swapped port)")
        else:
            ok = False
            ev.append(f"{name} {n} 127.0.0.1 {s.asked}: listening on {s.port}, not on "
                      f"{ports.twin(s.asked)}: the kit client cannot reach it (htons?)")
    return check("cmdline", C.title("cmdline", ctx.lab), "pass" if ok else "fail", ev,
                 judged=started)


def _initial_one(ctx, s, n: int) -> tuple:
    """(deviations, strings read) of a started server's n strings, read one by one."""
    bad, read = [], 0
    for i in range(n):
        got, err = K.exchange(s.port, K.frame(K.request_text(i, True, "")),
                              ctx.cfg["request_timeout_s"])
        if err:
            bad.append(f"slot {i}: {err}" + ("" if s.alive() else f" (server {s.death()})"))
            break
        read += 1
        if got != initial_value(i):
            bad.append(f"slot {i}: {got!r}, expected {initial_value(i)!r}")
    return bad, read


def check_initial(ctx, bin_dir, servers) -> dict:
    """Each server's strings, read before any write: 'String i: the initial value'."""
    n, ev, ok = ctx.cfg["init_n"], [], True
    read = dict.fromkeys(servers, 0)
    for name in servers:
        s, why = start(ctx, bin_dir, name, n, f"{name}_initial")
        if why:
            ok = False
            ev.append(f"{name}: not checked (did not start)")
            s.stop()
            continue
        bad, read[name] = _initial_one(ctx, s, n)
        s.stop()
        if bad:
            ok = False
            ev.append(f"{name} (n={n}): {len(bad)} deviation(s): " + "; ".join(bad[:3])
                      + (" ..." if len(bad) > 3 else ""))
        else:
            ev.append(f"{name} (n={n}): all {n} strings are 'String i: the initial value'")
    return check("initial", C.title("initial"), "pass" if ok else "fail", ev, judged=read)


def describe_failure(s: Server, failed: list) -> str:
    first = min(failed, key=lambda r: r.start)
    if not s.alive():
        inflight = [r for r in failed if r.error and "refused" not in r.error]
        culprit = min(inflight, key=lambda r: r.start) if inflight else first
        return (f"crashed: {s.death()}; the first request that got no reply: "
                f"{K.request_text(culprit.pos, culprit.is_read, culprit.text)!r} "
                f"({len(inflight)} in flight)")
    timeouts = [r for r in failed if "no reply" in r.error]
    if timeouts:
        return (f"hangs: {len(timeouts)} request(s) got no reply within "
                f"{ctx_timeout(timeouts)}, e.g. {first.describe()}")
    return f"errors: {first.describe()}"


def ctx_timeout(reqs):
    return reqs[0].error.split("within ")[-1]


def _new_entry() -> dict:
    return {"runs": 0, "runs_done": 0, "requests_ok": 0, "failure": "", "client_mean_s": [],
            "client_wall_s": [], "timing": None, "timing_problem": "", "history": None,
            "short": [], "pause": None}


def _one_run(ctx, s, entry, n, r) -> None:
    """One kit client run (1000 requests) against a started server; records its outcome."""
    done, wall = K.drive(s.port, K.kit_plan(n), ctx.cfg["request_timeout_s"])
    ok = [q for q in done if q.ok]
    failed = [q for q in done if not q.ok]
    entry["requests_ok"] += len(ok)
    entry["short"] += [q.size for q in K.short(ok)]
    if r == 0:
        entry["history"] = done
    if failed or len(done) < K.THREADS * K.PER_THREAD:
        time.sleep(0.2)
        entry["failure"] = (f"run {r + 1}: " + describe_failure(s, failed) if failed
                            else f"run {r + 1}: only {len(done)} requests finished")
        return
    entry["runs_done"] += 1
    entry["client_mean_s"].append(statistics.fmean(q.end - q.start for q in ok))
    entry["client_wall_s"].append(wall)
    ctx.run_s.append(wall)
    if ctx.cfg["pause_s"]:
        time.sleep(ctx.cfg["pause_s"])


def _finish(ctx, s, entry, tag, runs) -> None:
    await_lines(ctx, s, entry["runs_done"])
    ended = s.ended()
    s.stop()
    if ended and not entry["failure"]:
        entry["failure"] = f"ended after the runs: {ended}"
    entry["timing"], entry["timing_problem"] = s.timing_lines()
    ctx.log(f"  {tag}: {entry['runs_done']}/{entry['runs']} runs"
            + (f", {entry['failure']}" if entry["failure"] else ""))


def _slot_end(ctx, sizes_left: int) -> float:
    """When the runs at this n must stop under a time budget: what is left once the later
    checks are provided for (at this machine's pace so far), split evenly over the sizes
    still to run; infinite without a budget."""
    if not ctx.budget_s:
        return math.inf
    later = sum(ctx.cost(c.id) for c in C.CHECKS if c.cost_in_runs)
    now = time.monotonic()
    return now + max(0.0, ctx.left() - later) / sizes_left


def workload(ctx, bin_dir, servers, sizes, runs, tag_prefix="") -> dict:
    """The kit workload like test.sh: per server and n a fresh server, `runs` client runs
    (fewer, never below MIN_RUNS, when a time budget would run out: entry['runs'] says how
    many were asked of that setting). The servers of one n are started side by side and
    take their runs in turns, in a shuffled order each round, so a burst of noise on the
    machine hits them alike and the speed check can compare them round by round. Returns
    {name: {n: {...}}}."""
    res: dict = {}
    rng = random.Random(20261124)
    for i, n in enumerate(sizes):
        stop_at = _slot_end(ctx, len(sizes) - i)
        live = {}
        for name in servers:
            tag = f"{tag_prefix}{name}_n{n}"
            entry = res.setdefault(name, {})[n] = _new_entry()
            s, why = start(ctx, bin_dir, name, n, tag)
            if why:
                entry["failure"] = f"did not start: {why}"
                s.stop()
                continue
            live[name] = (s, entry, tag)
        order, asked = list(live), runs
        for r in range(runs):
            if r >= MIN_RUNS and time.monotonic() > stop_at:
                asked = r
                break
            rng.shuffle(order)
            for name in order:
                s, entry, _ = live[name]
                if not entry["failure"]:
                    _one_run(ctx, s, entry, n, r)
        for name in servers:
            res[name][n]["runs"] = asked
        for s, entry, tag in live.values():
            _finish(ctx, s, entry, tag, runs)
    return res


def check_workload(wl, runs, pause=None) -> dict:
    """The kit workload's settings, and for each server the idle pause (pause.py) as one
    setting more: {server: (ok, line, served)}."""
    ev, ok = [], True
    for name, per_n in wl.items():
        for n, e in per_n.items():
            asked = e.get("runs") or runs
            if e["failure"]:
                ok = False
                ev.append(f"{name} n={n}: {e['failure']} ({e['runs_done']}/{asked} runs "
                          "complete)")
            else:
                ev.append(f"{name} n={n}: {asked} runs, {e['requests_ok']} requests, no errors")
    cut = sorted({e.get("runs") for v in wl.values() for e in v.values()
                  if e.get("runs") and e["runs"] < runs})
    if cut:
        ev.append(f"the grader's time budget cut the runs per setting from {runs} to "
                  f"{', '.join(map(str, cut))}")
    ev += short_reply_finding(wl)
    total = sum(len(v) for v in wl.values())
    good = sum(1 for v in wl.values() for e in v.values() if not e["failure"])
    answered = {name: sum(e["requests_ok"] for e in per_n.values())
                for name, per_n in wl.items()}
    for name, (kept, line, served) in (pause or {}).items():
        ev.append(f"idle pause: {line}")
        if kept is not None:
            total, good, ok = total + 1, good + kept, ok and kept
            answered[name] = answered.get(name, 0) + served
    return check("workload", C.title("workload"),
                 "pass" if ok else "fail", ev, fraction=good / total if total else 0.0,
                 judged=answered)


def check_workload_run(ctx, _bin_dir, _present) -> dict:
    """The workload check's runner, on the kit workload and the idle pause the worker ran
    before this stage (ctx.wl, ctx.pause)."""
    return check_workload(ctx.wl, ctx.cfg["runs"], ctx.pause)


def short_reply_finding(wl) -> list:
    """The one line that names replies shorter than the kit's 100-byte frame: the kit's
    client reads one read() of up to 100 bytes and takes the text up to its first NUL, so
    they are the kit's to accept, a finding, never a failed request."""
    sizes = [b for v in wl.values() for e in v.values() for b in e.get("short", [])]
    if not sizes:
        return []
    answered = sum(e["requests_ok"] for v in wl.values() for e in v.values())
    return [f"finding: {len(sizes)} of {answered} replies were shorter than the kit's "
            f"{K.FRAME}-byte frame ({min(sizes)}-{max(sizes)} bytes); the kit's client "
            "reads them (one read() of up to 100 bytes, as far as the first NUL), so they "
            "count as answered: write the whole 100-byte buffer"]


def _attack(ctx, s, n: int) -> tuple:
    """Rounds of attacker-shaped load on four slots, each history checked from what the
    slots held before it; ([(slot, violation)], [what could not be checked])."""
    slots = [k * n // 4 for k in range(4)]
    initial = K.read_slots(s.port, slots, ctx.cfg["request_timeout_s"])
    bad, unchecked, judged = [], [], 0
    for rnd in range(ctx.cfg["attack_rounds"]):
        plan = K.attack_plan(n, seed=rnd + 1, requests=ctx.cfg["attack_requests"])
        done, _ = K.drive(s.port, plan, ctx.cfg["request_timeout_s"])
        failed = [q for q in done if not q.ok]
        if failed:  # a crash or hang is the workload check's finding; no verdict here
            unchecked.append(f"attacker load: {len(failed)} request(s) failed ("
                             + describe_failure(s, failed) + ")")
            break
        for slot, r in L.check_history(done, initial, ctx.cfg["max_states"]).items():
            if r.ok is False:
                bad.append((slot, r))
            elif r.ok is None:
                unchecked.append(f"attacker load, slot {slot}: search {r.explanation}")
            judged += _ops(done, slot) if r.ok is not None else 0
        if bad or not s.alive():
            break
        # next round starts from what the slots hold now
        initial = K.read_slots(s.port, slots, ctx.cfg["request_timeout_s"])
    return bad, unchecked, judged


def _ops(done: list, slot: int) -> int:
    """The answered requests of one slot in a history: the operations its check judged."""
    return sum(1 for q in done if q.ok and q.pos == slot)


def _kit_histories(ctx, per_n: dict, unchecked: list) -> tuple:
    """The first kit run of each n, checked; ([(n, slot, violation)], operations judged)."""
    bad, judged = [], 0
    for n_kit, e in per_n.items():
        if e["history"] and e["failure"]:
            unchecked.append(f"kit run at n={n_kit}: requests failed")
        elif e["history"]:
            for slot, r in L.check_history(e["history"], None, ctx.cfg["max_states"]).items():
                if r.ok is False:
                    bad.append((n_kit, slot, r))
                elif r.ok is None:
                    unchecked.append(f"kit run at n={n_kit}, slot {slot}: "
                                     f"search {r.explanation}")
                judged += _ops(e["history"], slot) if r.ok is not None else 0
    return bad, judged


WRITE_PROBE = "lockbench write probe"
OLD_VALUE_FIX = ("answer a write with the string after it: set the string, then read it "
                 "back for the reply (under the same lock), not the other way round")


def _write_reply(ctx, s, name: str) -> str:
    """One read, then one write, alone, of string 0 of a fresh server: '' when the write's
    reply is the string it wrote, else what is wrong (the string it replaced named)."""
    timeout = ctx.cfg["request_timeout_s"]
    before, _ = K.exchange(s.port, K.frame(K.request_text(0, True, "")), timeout)
    got, err = K.exchange(s.port, K.frame(K.request_text(0, False, WRITE_PROBE)), timeout)
    if err or got == WRITE_PROBE:
        return ""  # no answer at all is the workload's and robustness's to judge
    old = " (the string it replaced: get before set)" if got == before else ""
    return (f"{name}: a write of {WRITE_PROBE!r} to string 0, alone, was answered "
            f"{got!r}{old}, not the string it wrote")


def check_consistency(ctx, bin_dir, servers) -> dict:
    """Attacker-shaped load with a recorded history, per-slot linearizability; plus the
    histories of the first kit run of every setting (ctx.wl, the kit workload's). Before
    the load, one write alone: its reply must be what it wrote."""
    wl = ctx.wl
    n = 100
    ev, ok, examples, fix = [], True, [], []
    judged = dict.fromkeys(servers, 0)
    for name in servers:
        s, why = start(ctx, bin_dir, name, n, f"{name}_attack")
        if why:
            ev.append(f"{name}: not checked ({why})")
            ok = False
            s.stop()
            continue
        reply = _write_reply(ctx, s, name)
        if reply:
            ok = False
            ev.append(reply)
            fix = [OLD_VALUE_FIX]
        bad_here, unchecked, judged[name] = _attack(ctx, s, n)
        died = "" if s.alive() else s.death()
        s.stop()
        kit_bad, in_kit = _kit_histories(ctx, wl.get(name, {}), unchecked)
        judged[name] += in_kit
        if bad_here or kit_bad:
            ok = False
            ev.append(f"{name}: NOT linearizable: {len(bad_here)} slot(s) under the attacker's "
                      f"load, {len(kit_bad)} under the kit workload")
            for slot, r in bad_here[:1]:
                examples.append(f"{name}, slot {slot} (attacker load):\n{r.explanation}")
            for n_kit, slot, r in kit_bad[:1]:
                examples.append(f"{name}, n={n_kit}, slot {slot} (kit workload):\n{r.explanation}")
        elif unchecked:
            ev.append(f"{name}: no violation seen, but not fully checked: " + "; ".join(unchecked))
        else:
            ev.append(f"{name}: every slot linearizable (attacker load x{ctx.cfg['attack_rounds']}"
                      f" and the first kit run of each n)" + (f"; server {died}" if died else ""))
    return check("consistency", C.title("consistency"),
                 "pass" if ok else "fail", ev, counterexamples=examples, judged=judged,
                 **({"fix": fix} if fix else {}))


FILL_THREADS = 90   # with the first 20: 1100 requests, more than a batch of 1000 with the
                    # silent connection in it


def idle_one(ctx, bin_dir, name) -> tuple:
    """(True | False, evidence line, requests served beside the silent connection): 200
    kit requests must be served while a connection sits silent; then 900 more fill a whole
    batch of 1000 with the silent one in it, and a server that stalls there (it joins its
    batch before accepting again) is a finding, named with how many it served."""
    s, why = start(ctx, bin_dir, name, 10, f"{name}_idle")
    if why:
        s.stop()
        return False, f"{name}: not checked ({why})", 0
    try:
        idle = socket.create_connection(("127.0.0.1", s.port), timeout=2)
    except OSError as e:
        s.stop()
        return False, f"{name}: cannot connect ({e})", 0
    time.sleep(0.2)
    timeout = ctx.cfg["idle_timeout_s"]
    done, wall = K.drive(s.port, K.kit_plan(10, threads=20), timeout)
    served = sum(q.ok for q in done)
    line, fill = "", 0
    if served == 200:
        more, _ = K.drive(s.port, K.kit_plan(10, threads=FILL_THREADS), timeout)
        fill = sum(q.ok for q in more)
        line = "" if fill == len(more) == FILL_THREADS * K.PER_THREAD else (
            f"; finding: it stalled once a whole batch was open with the silent connection in "
            f"it: {200 + fill} of {200 + FILL_THREADS * K.PER_THREAD} requests served (each "
            f"given {timeout:g} s), as a server that accepts 1000 connections and joins them "
            "before accepting again does; the kit's client never leaves one silent")
    idle.close()
    s.stop()
    if served < 200:
        return False, (f"{name}: with one silent connection open, {served} of 200 kit requests "
                       f"were served (each given {timeout:g} s)"), served
    return True, (f"{name}: 200 of 200 requests served in {wall:.2f} s beside a silent "
                  "connection" + (line or f", and {fill} more after them, a whole batch "
                                          "with it")), served + fill


def check_idle(ctx, bin_dir, servers) -> dict:
    """A client that connects and sends nothing must not stop others being served (the
    servers are checked side by side: this is not a measurement)."""
    with ThreadPoolExecutor(len(servers)) as pool:
        res = list(pool.map(lambda name: idle_one(ctx, bin_dir, name), servers))
    ok = all(r[0] for r in res)
    return check("idle", C.title("idle"), "pass" if ok else "fail",
                 [r[1] for r in res], judged={name: r[2] for name, r in zip(servers, res)})
