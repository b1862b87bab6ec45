"""The consistency check: correctness under concurrency. One write alone must be answered
with what it wrote; then attacker-shaped load and the first kit run of each setting,
recorded, each slot checked for linearizability (measure/linearize.py)."""


from analysis.grade import records as C
from analysis.grade.context import check
from analysis.grade.measure import kitload as K
from analysis.grade.measure import linearize as L
from analysis.grade.measure.kitrun import describe_failure
from analysis.grade.measure.sandboxed import start


def _attack(ctx, s, n: int) -> tuple:
    """Rounds of attacker-shaped load on four slots, each history checked from what the
    slots held before it; ([(slot, violation)], [what could not be checked])."""
    slots = [k * n // 4 for k in range(4)]
    initial = K.read_slots(s.port, slots, ctx.cfg["request_timeout_s"])
    bad, unchecked, judged = [], [], 0
    for rnd in range(ctx.cfg["attack_rounds"]):
        plan = K.attack_plan(n, seed=rnd + 1, requests=ctx.cfg["attack_requests"])
        done, _ = K.drive(s.port, plan, ctx.cfg["request_timeout_s"])
        failed = [q for q in done if not q.goes_on]
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
        if e["history"] and any(not q.goes_on for q in e["history"]):
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
NO_REPLY_FIX = ("answer every request before closing its connection: a write's reply is "
                "the string after the write, read back under the same lock, written whole "
                "(all 100 bytes)")
OLD_VALUE_FIX = ("answer a write with the string after it: set the string, then read it "
                 "back for the reply (under the same lock), not the other way round")


def _write_reply(ctx, s, name: str) -> str:
    """One read, then one write, alone, of string 0 of a fresh server: '' when the write's
    reply is the string it wrote, else what is wrong (the string it replaced named)."""
    timeout = ctx.cfg["request_timeout_s"]
    before, _ = K.exchange(s.port, K.frame(K.request_text(0, True, "")), timeout)
    got, err = K.exchange(s.port, K.frame(K.request_text(0, False, WRITE_PROBE)), timeout)
    if err == K.EMPTY:
        return (f"{name}: a write of {WRITE_PROBE!r} to string 0, alone, was answered with "
                "nothing: its connection was closed without a reply (the kit's client reads 0 "
                "bytes and goes on, but the lab's reply to a write is the string it wrote)")
    if err or got == WRITE_PROBE:
        return ""  # a crash or a hang is the workload's and robustness's to judge
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
            why = NO_REPLY_FIX if "answered with nothing" in reply else OLD_VALUE_FIX
            fix += [why] if why not in fix else []
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
