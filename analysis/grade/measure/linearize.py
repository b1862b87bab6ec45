"""Per-slot linearizability of a recorded history (each slot a read/write register), in the
manner of Porcupine / Wing & Gong with Lowe's memoisation: search for an order of the
operations that respects real time (an op that returned before another was called comes
first) and register semantics (a read returns the latest write), memoising (done set,
value) pairs.

A kit write's reply is the string read back after the write, so a write request becomes two
operations over the same interval: the write, and a read of the reply that must come after
that write (other writes may slip in between, as in a server that locks twice).
"""

from dataclasses import dataclass

UNKNOWN = object()  # initial value not known: the first read defines it
MAX_STATES = 2_000_000


@dataclass(frozen=True)
class Op:
    idx: int
    is_write: bool
    value: str
    start: float
    end: float          # float('inf') when the request never returned
    label: str          # the request in words, for counterexamples
    after: int = -1     # idx of an op that must be linearised first (the read-back's write)


def ops_from_requests(requests) -> dict:
    """kitload.Request list -> {slot: [Op]}. Failed reads say nothing and are dropped; a
    failed write may or may not have happened, so it stays, open-ended. A write whose
    connection the server closed without a reply ('empty') was over when the close came,
    as every kit-style server closes a connection last, after its access: it stays, ending
    there (so a server that drops writes it does not answer is seen to)."""
    by_slot: dict = {}
    for r in requests:
        ops = by_slot.setdefault(r.pos, [])
        if r.is_read:
            if r.ok:
                ops.append(Op(len(ops), False, r.reply, r.start, r.end,
                              f"thread {r.thread} read slot {r.pos} -> {r.reply!r}"))
            continue
        closed = r.outcome == "empty"
        end = r.end if r.ok or closed else float("inf")
        w = Op(len(ops), True, r.text, r.start, end,
               f"thread {r.thread} wrote {r.text!r} to slot {r.pos}")
        ops.append(w)
        if r.ok:
            ops.append(Op(len(ops), False, r.reply, r.start, r.end,
                          f"thread {r.thread}'s write to slot {r.pos} replied {r.reply!r}",
                          after=w.idx))
    return by_slot


@dataclass
class Result:
    ok: bool | None            # None: gave up (too many states)
    explanation: str = ""
    ops: int = 0


def _ms(t, t0):
    return "never" if t == float("inf") else f"{(t - t0) * 1000:.3f} ms"


def _unexplained_read(ops: list, initial, t0: float) -> Result | None:
    """A read of a value nobody wrote (and not the initial one) can never be explained."""
    written = {o.value for o in ops if o.is_write}
    for o in ops:
        if not o.is_write and o.value not in written and o.value != initial:
            return Result(False, f"{o.label} (between {_ms(o.start, t0)} and "
                                 f"{_ms(o.end, t0)}): no write in the history wrote this "
                                 f"value, nor is it the initial value {initial!r} "
                                 "(a torn or mixed string)", len(ops))
    return None


def _candidates(ops: list, order: list, mask: int) -> list:
    """The operations not yet placed that may come next: those starting before the
    earliest end among them."""
    min_end = float("inf")
    cands = []
    for i in order:
        if mask >> i & 1:
            continue
        o = ops[i]
        if o.start > min_end:
            break
        min_end = min(min_end, o.end)
        cands.append(o)
    return [o for o in cands if o.start <= min_end]


def _moves(cands: list, mask: int, value) -> list:
    """The (mask, value) states one placed operation leads to, the one to try first last."""
    ready = [o for o in cands if o.after < 0 or mask >> o.after & 1]
    # A read that sees the current value can always go first: it changes nothing and
    # everything that had to precede it already did. So no branching on it.
    read = next((o for o in ready if not o.is_write and o.value == value), None)
    if read is not None:
        return [(mask | 1 << read.idx, read.value)]
    moves = []
    if value is UNKNOWN:  # the first read defines the initial value: branch on it
        moves += [(mask | 1 << o.idx, o.value)
                  for o in {o.value: o for o in ready if not o.is_write}.values()]
    # Branch on the writes; the one that ends first is tried first (pushed last).
    moves += [(mask | 1 << o.idx, o.value)
              for o in sorted((o for o in ready if o.is_write), key=lambda o: -o.end)]
    return moves


def _stuck(best: tuple, n: int, t0: float) -> Result:
    """The counterexample: how far the deepest valid order got, and what could not follow."""
    depth, _mask, value, cands = best
    held = "unknown" if value is UNKNOWN else repr(value)
    lines = [f"after {depth} of {n} operations in a valid order the slot holds {held}; "
             "none of the operations that must come next fits:"]
    lines += [f"  - {o.label} (between {_ms(o.start, t0)} and {_ms(o.end, t0)})"
              for o in cands[:6]]
    return Result(False, "\n".join(lines), n)


def check_slot(ops: list, initial=UNKNOWN, max_states: int = MAX_STATES) -> Result:
    """Is this one register's history linearizable from `initial`? A depth-first search
    over the orders the operations' intervals allow, states (placed set, value) seen once."""
    if not ops:
        return Result(True, ops=0)
    order = sorted(range(len(ops)), key=lambda i: ops[i].start)
    t0 = min(o.start for o in ops)
    if initial is not UNKNOWN:
        bad = _unexplained_read(ops, initial, t0)
        if bad:
            return bad
    full = (1 << len(ops)) - 1
    seen = set()
    best = (0, 0, initial, [])  # (depth, mask, value, candidates that failed)
    stack = [(0, initial, 0)]
    while stack:
        mask, value, depth = stack.pop()
        if mask == full:
            return Result(True, ops=len(ops))
        key = (mask, value if value is not UNKNOWN else None)
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > max_states:
            return Result(None, f"gave up after {max_states} states", len(ops))
        cands = _candidates(ops, order, mask)
        moves = _moves(cands, mask, value)
        stack += [(m, v, depth + 1) for m, v in moves]
        if not moves and depth >= best[0]:
            best = (depth, mask, value, cands)
    return _stuck(best, len(ops), t0)


def check_history(requests, initial: dict | None = None, max_states: int = MAX_STATES) -> dict:
    """{slot: Result} for every slot touched by the requests; `initial` maps slot -> value
    (missing: unknown)."""
    initial = initial or {}
    return {slot: check_slot(ops, initial.get(slot, UNKNOWN), max_states)
            for slot, ops in sorted(ops_from_requests(requests).items())}
