"""The checks of the kit's own start and workload: the command line and the port quirk,
the initial values, and the kit workload like test.sh (errors, crashes, hangs; the idle
pause as one setting more; replies shorter than the kit's frame named once)."""


from analysis import ports
from analysis.grade import records as C
from analysis.grade.context import check, initial_value
from analysis.grade.measure import kitload as K
from analysis.grade.measure.sandboxed import start


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
                ev.append(f"{name} n={n}: {asked} runs, {e['requests_ok']} requests answered, "
                          + (unanswered(e) or "no errors"))
    cut = sorted({e.get("runs") for v in wl.values() for e in v.values()
                  if e.get("runs") and e["runs"] < runs})
    if cut:
        ev.append(f"the grader's time budget cut the runs per setting from {runs} to "
                  f"{', '.join(map(str, cut))}")
    ev += short_reply_finding(wl) + unanswered_finding(wl)
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
    out = check_workload(ctx.wl, ctx.cfg["runs"], ctx.pause)
    if "pause" in ctx.cfg.get("skip", ()) or not ctx.cfg.get("idle_pause_s"):
        out["evidence"].append("idle pause: left out (" + ("--skip" if "pause" in ctx.cfg.get(
            "skip", ()) else "--idle-pause 0") + "), so a server that ends by itself when "
                               "idle is not seen")
    return out


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


UNANSWERED = ("empty", "reset")   # the outcomes after which the kit's client goes on unanswered


def unanswered(e: dict) -> str:
    """'300 closed without a reply, 2 reset' of one setting's requests, or ''."""
    words = {"empty": "closed without a reply", "reset": "reset before a reply"}
    got = e.get("outcomes") or {}
    return ", ".join(f"{got[k]} {words[k]}" for k in UNANSWERED if got.get(k))


def unanswered_finding(wl) -> list:
    """One line per server whose requests went unanswered in a run the kit's client would
    have finished: its one read() returns 0 (or -1 on a reset) and the thread goes on, so
    they are not failures of this check; what they cost is the consistency check's (a
    write must be answered with the string it wrote)."""
    out = []
    for name, per_n in wl.items():
        total = sum(sum((e.get("outcomes") or {}).values()) for e in per_n.values())
        gone = sum((e.get("outcomes") or {}).get(k, 0) for e in per_n.values()
                   for k in UNANSWERED)
        writes = sum(e.get("unreplied_writes", 0) for e in per_n.values())
        if gone:
            out.append(f"finding: {name}: {gone} of {total} requests got no reply ({writes} of "
                       "them writes); the kit's client reads 0 bytes, goes on and finishes its "
                       "run, so they are not failures of this check: the consistency check "
                       "judges a write's reply")
    return out
