"""Which lock design a student server really uses, from its lock trace.

The trace comes from `liblockprof.so` (profile/lockprof_trace.cpp) in its trace mode, preloaded
into the server: one line per request, written when the reply left,

    R <first bytes of the request, up to 24, sanitised> <n> <addr>:<kind>[count] ...[ +]

kind m mutex, r / w rwlock taken for reading / writing, c condition variable waited on or
signalled; M R W: taken while the thread already held another traced lock; count (only
when above 1): how often it was taken in that request; a final " +": more than 32 objects.

`parse` reads that text strictly and never raises: the server runs in the same process as
the tracer and can write into the same file, so anything not exactly in the format is
dropped, and so is a line with an implausible address (below 4096, not 4-aligned, beyond
user space) or a repeated entry. A line that is exactly in the format cannot be told from a
real one: the design verdict is evidence about the design, not proof (a program can also
lock with atomics or semaphores, which are not traced).

`classify` decides from the requests whose position parses (the leading digits of the
request text) and lies in [0, n):

- no lock: at least 90 % of them took no mutex or rwlock.
- one lock: the same object in at least 90 % of them, and under 10 % took an object that
  only one string's requests ever took.
- a lock per string: at least 90 % took an object that only their string's requests took,
  and a string requested more than once took the same one each time (80 % of such
  strings); without any repeated string a lock per string cannot be told from a lock per
  request, and the verdict is undetermined. A shared lock every request also took is
  noted; when the string's lock was taken while holding it (nested), the server behaves
  as that one shared lock.
- mutex or rwlock: an rwlock whose reads took it for reading and writes for writing is an
  rwlock; one taken for writing by the reads too behaves as a mutex; writes that took it
  only for reading are "something else" (writers are not excluded).
- a hand-made read/write lock (a mutex and condition variables, textbook style) takes its
  mutex twice per request, on entry and on exit, and holds it across neither. When at
  least 90 % of the reads and of the writes took their mutex twice or more, the design
  counts as an rwlock (one, or one per string, as above) and the evidence says hand-made
  and in how many requests condition variables were used (none when no request ever had
  to wait). A plain mutex design takes it once per read.
- something else: locks shared by groups of strings (striping), locks that differ for
  the same string, some requests locking and others not, mixed kinds.
- undetermined: fewer than 50 such requests, or fewer than 10 distinct strings.
"""

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

MAX_OBJS = 32            # the tracer's per-request table (kTraceObjs, lockprof_trace.cpp)
MIN_REQUESTS = 50
MIN_POSITIONS = 10
MAX_RECORDS = 200_000    # parse stops there (the tracer's default cap is 20000)
MOST = 0.9               # "every request", allowing for a few odd ones
FEW = 0.1

ONE_MUTEX, MUTEX_PER_STRING = "one mutex", "a mutex per string"
ONE_RWLOCK, RWLOCK_PER_STRING = "one rwlock", "an rwlock per string"
NO_LOCK, OTHER, UNDETERMINED = "no lock", "something else", "undetermined"
KINDS = (ONE_MUTEX, MUTEX_PER_STRING, ONE_RWLOCK, RWLOCK_PER_STRING, NO_LOCK, OTHER,
         UNDETERMINED)
EXPECTED = {"main1": ONE_MUTEX, "main2": MUTEX_PER_STRING, "main3": ONE_RWLOCK,
            "main4": RWLOCK_PER_STRING}
_BEHAVES = {ONE_MUTEX: "behaves as one mutex for the whole array",
            MUTEX_PER_STRING: "behaves as a mutex per string",
            ONE_RWLOCK: "behaves as one rwlock for the whole array",
            RWLOCK_PER_STRING: "behaves as an rwlock per string",
            NO_LOCK: "takes no lock", OTHER: "locks in some other way"}

_LINE = re.compile(r"R ([!-~]{1,24}) (0|[1-9][0-9]{0,2})"
                   r"((?: 0x[1-9a-f][0-9a-f]{0,15}:[mrwcMRW](?:[2-9]|[1-9][0-9]{1,8})?)*)"
                   r"( \+)?")
_ENTRY = re.compile(r" 0x([0-9a-f]+):([mrwcMRW])([0-9]*)")
_REQUEST = re.compile(r"([0-9]{1,9})-([01])(?:-|$)")


@dataclass(frozen=True)
class Lock:
    addr: int
    kind: str            # m, r, w or c
    count: int = 1       # times taken in the request
    nested: bool = False  # taken while the thread held another traced lock


@dataclass(frozen=True)
class Record:
    request: str         # the request's first bytes as the tracer sanitised them
    locks: tuple         # of Lock, in the order first touched
    truncated: bool = False  # more objects than the tracer lists

    @property
    def pos(self) -> int | None:
        m = _REQUEST.match(self.request)
        return int(m.group(1)) if m else None

    @property
    def is_read(self) -> bool | None:
        m = _REQUEST.match(self.request)
        return m.group(2) == "1" if m else None


@dataclass(frozen=True)
class Design:
    kind: str            # one of KINDS
    evidence: str        # one line for a person
    requests: int = 0    # traced requests the decision was made from


def _record(line: str) -> Record | None:
    m = _LINE.fullmatch(line)
    if m is None:
        return None
    entries = _ENTRY.findall(m.group(3))
    if len(entries) != int(m.group(2)) or len(entries) > MAX_OBJS:
        return None
    if m.group(4) and len(entries) != MAX_OBJS:
        return None
    locks, seen = [], set()
    for hexaddr, kind, count in entries:
        addr = int(hexaddr, 16)
        if addr < 4096 or addr % 4 or addr >= 1 << 56 or (addr, kind) in seen:
            return None
        seen.add((addr, kind))
        locks.append(Lock(addr, kind.lower(), int(count or 1), kind.isupper()))
    return Record(m.group(1), tuple(locks), bool(m.group(4)))


def parse(text) -> list:
    """Records of a trace (str or bytes); lines not exactly in the format are skipped.
    Never raises; at most MAX_RECORDS records."""
    return parse_checked(text)[0]


def parse_checked(text) -> tuple:
    """(records, lines dropped): parse, counting the non-empty lines not in the format. The
    tracer writes whole lines, each in one write(2), so a dropped line was written by
    someone else and the trace is not believed (see `traced`)."""
    out: list = []
    bad = 0
    try:
        if isinstance(text, bytes | bytearray):
            text = bytes(text).decode("ascii", "replace")
        if not isinstance(text, str):
            return out, 1
        for line in text.split("\n"):
            if len(out) >= MAX_RECORDS:
                break
            rec = _record(line) if len(line) <= 64 + MAX_OBJS * 40 else None
            if rec is not None:
                out.append(rec)
            elif line:
                bad += 1
    except Exception:  # a trace is untrusted input: keep what was read
        bad += 1
    return out, bad


def traced(text, n: int) -> "Design":
    """The design a trace shows, or undetermined ("not traced") when there is none or a
    line in it is not the tracer's: only a whole, well-formed trace is evidence."""
    if text is None:
        return Design(UNDETERMINED, "no trace written: a static binary, or the tracer was "
                                    "not loaded")
    records, bad = parse_checked(text)
    if bad:
        return Design(UNDETERMINED, f"the trace holds {bad} line(s) the tracer does not "
                                    "write, so none of it is believed")
    return classify(records, n)


@dataclass
class _Use:
    """One lock object in one request."""
    kind: str = ""           # mutex, rwlock or mixed
    modes: frozenset = frozenset()
    count: int = 0
    nested: bool = False


def _uses(rec: Record) -> dict:
    uses: dict = {}
    for lk in rec.locks:
        if lk.kind == "c":
            continue
        u = uses.setdefault(lk.addr, _Use())
        kind = "mutex" if lk.kind == "m" else "rwlock"
        u.kind = kind if u.kind in ("", kind) else "mixed"
        u.modes = u.modes | {lk.kind}
        u.count += lk.count
        u.nested = u.nested or lk.nested
    return uses


def _frac(k: int, total: int) -> float:
    return k / total if total else 0.0


def classify(records, n) -> Design:
    """The design the trace shows for a server with an array of n strings."""
    try:
        return _classify(list(records), int(n))
    except Exception as e:  # a verdict of "undetermined" beats a crash
        return Design(UNDETERMINED, f"the trace could not be classified ({type(e).__name__})")


def _classify(records: list, n: int) -> Design:
    reqs = [r for r in records if isinstance(r, Record) and r.pos is not None
            and 0 <= r.pos < n]
    total, positions = len(reqs), {r.pos for r in reqs}
    head = f"{total} requests to {len(positions)} strings traced"
    if total < MIN_REQUESTS:
        why = "no request was traced" if not records else f"only {total} requests traced"
        return Design(UNDETERMINED, f"{why} (at least {MIN_REQUESTS} needed)", total)
    if len(positions) < MIN_POSITIONS:
        return Design(UNDETERMINED, f"{head}: too few strings to tell one lock from one per "
                                    "string", total)
    uses = [(r, _uses(r)) for r in reqs]
    locked = [(r, u) for r, u in uses if u]
    if _frac(total - len(locked), total) >= MOST:
        return Design(NO_LOCK, f"{head}: {'none' if not locked else len(locked)} took a "
                               "pthread mutex or rwlock (semaphores, spinlocks and atomics "
                               "are not traced)", total)
    if _frac(total - len(locked), total) > FEW:
        return Design(OTHER, f"{head}: {total - len(locked)} took no lock, the others did",
                      total)
    if len(locked) < total:
        head += f" ({total - len(locked)} without a lock, left aside)"
    return _by_objects(head, locked, len(locked))


def _by_objects(head: str, locked: list, total: int) -> Design:
    where: dict = defaultdict(set)   # addr -> positions
    used: Counter = Counter()        # addr -> requests
    for r, u in locked:
        for a in u:
            where[a].add(r.pos)
            used[a] += 1
    common = {a for a in used if len(where[a]) > 1 and used[a] >= MOST * total}
    own = {a for a in used if len(where[a]) == 1}
    with_own = [(r, u) for r, u in locked if own & u.keys()]
    if common and _frac(len(with_own), total) < FEW:
        return _one_lock(head, locked, common, total)
    if _frac(len(with_own), total) >= MOST:
        return _per_string(head, with_own, own, common, total)
    shared = {a for a in used if len(where[a]) > 1}
    return Design(OTHER, f"{head}: {len(with_own)} took a lock of their own string, "
                         f"{len(shared)} locks were shared by several strings but not all "
                         f"(striping?), {len(used)} lock objects in all", total)


def _one_lock(head: str, locked: list, common: set, total: int) -> Design:
    kinds = {a: _kind_of(a, locked) for a in common}
    # the data lock is the one taken first (a timing mutex comes after the access)
    rank = Counter()
    for _, u in locked:
        for i, a in enumerate(u):
            rank[a] += i
    rw = sorted((a for a in common if kinds[a] == "rwlock"), key=lambda a: (rank[a], a))
    mu = sorted((a for a in common if kinds[a] == "mutex"), key=lambda a: (rank[a], a))
    if len(rw) > 1 or len(rw) + len(mu) != len(common):
        return Design(OTHER, f"{head}: every request took {len(common)} shared locks of "
                             "mixed kinds", total)
    if rw and mu and _frac(sum(rw[0] in u and u[rw[0]].nested for _, u in locked), total) >= 0.5:
        return Design(ONE_MUTEX, f"{head}: every request took the same rwlock while holding "
                                 "a mutex every request took: behaves as one mutex", total)
    data = rw[0] if rw else mu[0]
    extra = len(common) - 1
    what = f"the same one {'rwlock' if rw else 'mutex'}"
    if extra:
        what += f" (and {extra} other shared mutex{'es' if extra > 1 else ''})"
    return _modes(f"{head}: every request took {what}", locked, lambda u: {data} & u.keys(),
                  ONE_RWLOCK if rw else ONE_MUTEX, total)


def _per_string(head: str, with_own: list, own: set, common: set, total: int) -> Design:
    by_pos: dict = defaultdict(list)
    for r, u in with_own:
        by_pos[r.pos].append(set(u) & own)
    repeated = [sets for sets in by_pos.values() if len(sets) > 1]
    if not repeated:
        return Design(UNDETERMINED, f"{head}: each took a lock no other string's request "
                                    "took, but no string was requested twice: a lock per "
                                    "string cannot be told from a lock per request", total)
    same = sum(bool(set.intersection(*sets)) for sets in repeated)
    if _frac(same, len(repeated)) < 0.8:
        return Design(OTHER, f"{head}: requests to the same string took different locks "
                             f"({len(repeated) - same} of {len(repeated)} strings requested "
                             "more than once): a lock per request or per thread", total)
    objs = {a for r, u in with_own for a in u if a in own}
    kinds = {_kind_of(a, with_own) for a in objs}
    if len(kinds) != 1 or kinds == {"mixed"}:
        return Design(OTHER, f"{head}: the strings' locks are of mixed kinds", total)
    kind = kinds.pop()
    nested = sum(any(u[a].nested for a in u if a in own) for _, u in with_own)
    if common and _frac(nested, total) >= 0.5:
        big = "rwlock" if any(_kind_of(a, with_own) == "rwlock" for a in common) else "mutex"
        return Design(ONE_RWLOCK if big == "rwlock" else ONE_MUTEX,
                      f"{head}: each took its string's {kind} while holding one {big} every "
                      f"request took: behaves as that one {big}", total)
    what = (f"each took the {kind} of its own string ({len(objs)} {_plural(kind)} for "
            f"{len(by_pos)} strings; a string requested again took the same one)")
    if common:
        k = len(common)
        what += (f"; every request also took {'one lock' if k == 1 else f'{k} locks'} shared "
                 f"by all, not held when the string's lock was taken")
    return _modes(f"{head}: {what}", with_own, lambda u: own & u.keys(),
                  RWLOCK_PER_STRING if kind == "rwlock" else MUTEX_PER_STRING, total)


def _plural(kind: str) -> str:
    return "mutexes" if kind == "mutex" else f"{kind}s"


def _kind_of(addr: int, locked: list) -> str:
    kinds = {u[addr].kind for _, u in locked if addr in u}
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _modes(head: str, locked: list, data, kind: str, total: int) -> Design:
    """How the data lock (data(uses) -> its addresses in that request) was taken by reads and
    writes: rwlock modes, or a mutex taken twice per request (a hand-made rwlock)."""
    reads = [(r, [u[a] for a in data(u)]) for r, u in locked if r.is_read]
    writes = [(r, [u[a] for a in data(u)]) for r, u in locked if not r.is_read]
    per_string = kind in (MUTEX_PER_STRING, RWLOCK_PER_STRING)
    if kind in (ONE_RWLOCK, RWLOCK_PER_STRING):
        w_only_r = sum(all(x.modes <= {"r"} for x in us) for _, us in writes)
        r_as_w = sum(any("w" in x.modes for x in us) for _, us in reads)
        if _frac(w_only_r, len(writes)) > FEW:
            return Design(OTHER, f"{head}; {w_only_r} of {len(writes)} writes took it only "
                                 "for reading: writers are not excluded", total)
        if reads and _frac(r_as_w, len(reads)) >= MOST:
            return Design(MUTEX_PER_STRING if per_string else ONE_MUTEX,
                          f"{head}; reads took it for writing too: it behaves as a mutex",
                          total)
        if reads and _frac(r_as_w, len(reads)) > FEW:
            return Design(OTHER, f"{head}; {r_as_w} of {len(reads)} reads took it for "
                                 "writing, the others for reading", total)
        how = "reads took it for reading" if reads else "no read was traced"
        return Design(kind, f"{head}; {how}, writes for writing", total)
    twice_r = sum(all(x.count >= 2 for x in us) for _, us in reads)
    twice_w = sum(all(x.count >= 2 for x in us) for _, us in writes)
    if (reads and _frac(twice_r, len(reads)) >= MOST
            and (not writes or _frac(twice_w, len(writes)) >= MOST)):
        conds = sum(any(lk.kind == "c" for lk in r.locks) for r, _ in locked)
        return Design(RWLOCK_PER_STRING if per_string else ONE_RWLOCK,
                      f"{head}, twice per request: a hand-made read/write lock (mutex taken "
                      f"on entry and on exit; condition variables used in {conds} requests)",
                      total)
    return Design(kind, f"{head}; once per read, so not a hand-made read/write lock", total)


def verdict_line(server: str, design: Design, allowed: tuple = ()) -> tuple:
    """(ok, text): ok True when the server behaves as the lab asks (one of `allowed`, by
    default the design of mainN's number), False when it does not, None when undetermined
    or nothing is asked of it."""
    allowed = allowed or ((EXPECTED[server],) if server in EXPECTED else ())
    if design.kind == UNDETERMINED or design.kind not in _BEHAVES:
        return None, f"{server}: lock design undetermined ({design.evidence})"
    behaves = f"{server} {_BEHAVES[design.kind]}"
    if not allowed:
        return None, behaves
    if design.kind in allowed:
        return True, behaves + (", as expected" if len(allowed) == 1 else
                                ", one of the lab's designs")
    return False, f"{behaves}; expected {wanted(allowed)}"


def wanted(allowed: tuple) -> str:
    """The designs a server may use, as the page says them."""
    return allowed[0] if len(allowed) == 1 else "one of " + ", ".join(allowed)


PER_STRING = (MUTEX_PER_STRING, RWLOCK_PER_STRING)
RWLOCKS = (ONE_RWLOCK, RWLOCK_PER_STRING)
OVERLAP_RATIO = 2.2
BURST = 32   # simultaneous requests of one of the grader's bursts (bursts.BURST)
SKIPS_DELAY = "skips the kit's delay"
SKIPS_DELAY_FIX = ("keep the kit's `usleep(ART_DELAY)` in every access (the kit's `getContent` "
                   "and `setContent`), inside the lock: the delay is what makes the lab's locks "
                   "matter, and a server without it is timed and ranked on nothing the lab asks")


@dataclass(frozen=True)
class Measured:
    """What the grader's own bursts of simultaneous requests showed a server do. Each
    finding is True, False or None (not clear), with the median of the round-by-round
    ratio it was decided from:

    per_string       writes to one string took longer than writes to k strings: each
                     string has a lock of its own (with one lock for the array both wait
                     alike);
    readers_overlap  writes to one string took more than OVERLAP_RATIO times as long as
                     reads of that string: the lock its requests share lets readers in
                     together (an rwlock). A kit write does two accesses (set, then get for
                     the reply) and a read one, so where readers wait for each other (a
                     mutex) the writes take less than twice as long.

    It cannot tell one mutex from no lock at all (both leave writes to k strings waiting
    alike and readers apart as measured)."""
    per_string: bool | None = None
    readers_overlap: bool | None = None
    ratios: tuple = (None, None)
    error: str = ""
    one_string_s: float | None = None   # the fastest burst of writes to one string (s)
    usleep_s: float | None = None       # the shortest usleep(10) measured here (s)

    @property
    def skips_delay(self) -> bool:
        """Whether the writes to one string came back faster than one usleep(10) each:
        whatever the lock, writes to one string wait for each other, and each holds it
        across the kit's two accesses, each a usleep(10), so a burst of them takes at least
        BURST x 2 usleeps, and BURST x 1 even where the reply is read back outside the lock.
        Faster, the lock is held for far less than the delay (the delay left out, or slept
        outside the lock), or there is no lock at all. Noise only slows a burst, so the
        fastest burst is what is compared, and the finding stands on a busy machine."""
        return (self.one_string_s is not None and bool(self.usleep_s)
                and self.one_string_s < BURST * self.usleep_s)

    def holds(self) -> str:
        """The hold times as measured, in words."""
        return (f"the fastest burst of {BURST} writes to one string was answered within "
                f"{self.one_string_s * 1e6:.0f} us, {self.one_string_s / BURST * 1e6:.1f} us "
                "a write, where each write holds its string's lock across the kit's "
                f"usleep(10) twice, at least {self.usleep_s * 1e6:.0f} us each here (the "
                "shortest usleep(10) measured on this machine)")

    def kind(self) -> str | None:
        """The design measured, or None when it is not clear."""
        if self.per_string is None or self.readers_overlap is None:
            return None
        if self.per_string:
            return RWLOCK_PER_STRING if self.readers_overlap else MUTEX_PER_STRING
        return ONE_RWLOCK if self.readers_overlap else ONE_MUTEX

    def shows(self) -> str:
        """The design measured, as far as it is clear ('' when not at all)."""
        return self.kind() or {True: "a lock per string", False: "one lock for the whole "
                               "array"}.get(self.per_string, "")

    def agrees(self, kind: str) -> bool | None:
        """True when the measurement shows `kind`, False when it contradicts it, None when
        it cannot tell. Only a lock per string against one lock contradicts: writes take
        two sleeps, so that finding stands on a busy machine. Whether readers overlap can
        confirm a design but never contradict one: load on the machine makes overlapping
        readers look as if they waited, and a server whose writes do more than the kit's
        two accesses makes waiting readers look as if they overlapped."""
        if kind not in EXPECTED.values() or self.error:
            return None
        if self.per_string is not None and self.per_string != (kind in PER_STRING):
            return False
        if self.per_string is None or self.readers_overlap is None:
            return None
        return True if self.readers_overlap == (kind in RWLOCKS) else None

    def describe(self) -> str:
        if self.error:
            return f"not measured ({self.error})"
        r = [f" ({x:.2f}x)" if x is not None else "" for x in self.ratios]
        first = {True: f"writes to one string waited for each other{r[0]}, writes to "
                       "different strings did not: a lock per string",
                 False: f"writes to different strings waited for each other as much as "
                        f"writes to one string{r[0]}: one lock for the whole array (or none)",
                 None: f"whether writes to different strings overlap was not clear{r[0]}"}
        second = {True: f"reads of one string overlapped{r[1]}: an rwlock",
                  False: f"reads of one string waited for each other{r[1]}: a mutex",
                  None: f"whether reads of one string overlap was not clear{r[1]}"}
        return f"{first[self.per_string]}; {second[self.readers_overlap]}"


def judge(server: str, trace: Design, measured: Measured, allowed: tuple = ()) -> tuple:
    """(ok, evidence line, fix) for a server from its trace and the grader's measurement;
    allowed: the designs the lab accepts of it (by default the design of mainN's number).
    A pass needs both: the lock calls traced show an accepted design and the measurement
    shows that design too (the trace is written by a program that shares the tracer's
    process, so it is evidence the measurement must confirm). Fail when the trace shows
    another design (the program's own lock calls) or the measurement contradicts it;
    otherwise undetermined. Without a usable trace the measurement can fail a server,
    never pass it."""
    allowed = allowed or (EXPECTED[server],)
    want, said, behaves = wanted(allowed), measured.describe(), measured.shows()
    fix = (f"{server} must use {want} (the lab's design for {server})" if len(allowed) == 1
           else f"{server} must use {want}")
    if measured.skips_delay and trace.kind not in (UNDETERMINED, NO_LOCK):
        # its lock is taken for every request (traced), yet held for far less than the
        # delay: the granularity cannot be measured, and the delay is what is wrong
        return False, (f"{server} {SKIPS_DELAY}: {measured.holds()}; the lock calls traced "
                       f"say {trace.kind} ({trace.evidence}), held far shorter than the "
                       "delay allows, so how the design serves requests cannot be measured"), \
            SKIPS_DELAY_FIX
    if measured.skips_delay:
        said += (f" ({measured.holds()}: no lock held across the delay, or no delay: "
                 f"{server} {SKIPS_DELAY} or locks nothing)")
    if trace.kind == UNDETERMINED:
        head = f"{server}: no usable lock trace ({trace.evidence}); measured: {said}"
        if all(measured.agrees(a) is False for a in allowed):
            return False, f"{head}; expected {want}", f"{fix}; it behaves as {behaves}"
        return None, f"{head}; a design passes only when its trace and the measurement " \
                     "agree: undetermined", ""
    ok, line = verdict_line(server, trace, allowed)
    if ok is False:
        return False, f"{line} ({trace.evidence}); measured: {said}", \
            f"{fix}; it behaves as {trace.kind}"
    agrees = measured.agrees(trace.kind)
    if agrees is False:
        return False, (f"{server}: the lock calls traced say {trace.kind}, the grader's "
                       f"measurement does not: {said}; expected {want} (the trace: "
                       f"{trace.evidence})"), f"{fix}; it behaves as {behaves}"
    if agrees is None:
        return None, f"{line} ({trace.evidence}); not confirmed by the measurement " \
                     f"({said}): undetermined", ""
    return True, f"{line} ({trace.evidence}); the measurement agrees: {said}", ""
