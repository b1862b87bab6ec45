"""Design conformance: the lock trace's parser and classifier
(analysis/grade/measure/design.py) on made-up traces, then liblockprof.so
(profile/lockprof_trace.cpp) in trace mode preloaded into the student-like fixtures
(tests/fixtures/correct, design_swap, handmade_rwlock, no_lock, clocked_locks), each server
driven with kit-like requests and its design classified."""

import itertools
import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.grade.measure import design as D
from analysis.grade.measure import kitload
from analysis.launch import server_spec as SS
from analysis.launch.procs import StartError, pick_port
from analysis.tests.helpers import RELEASE, built_fixture, preload_library

pytestmark = [pytest.mark.slow]

LIB = RELEASE / "liblockprof.so"  # its trace mode: $LOCKPROF_TRACE_FD or $LOCKPROF_TRACE_FILE
N = 1000
FRESH = itertools.count(10_000)  # a new lock object each time
BASE = 0x55D4C8A0C040    # a plausible heap address
STACK = 0x7FFE2A149190


# ---------------------------------------------------------------- made-up traces

def workload(n: int = N, seed: int = 1) -> list:
    """300 (pos, is_read): 236 distinct strings, 16 of them requested 5 times; 70 % reads."""
    rng = random.Random(seed)
    distinct = rng.sample(range(n), 236)
    positions = distinct + distinct[:16] * 4
    rng.shuffle(positions)
    return [(p, rng.random() < 0.7) for p in positions]


def line(pos: int, is_read: bool, entries, text: str = "") -> str:
    request = (f"{pos}-{int(is_read)}-" + (text or ("" if is_read else "String[x]")))[:24]
    return " ".join(["R", request, str(len(entries)), *entries])


def trace(design, wl=None) -> str:
    """A trace as the tracer would write it: design(pos, is_read) -> entries."""
    return "\n".join(line(p, r, design(p, r)) for p, r in (wl or workload())) + "\n"


def a(i: int) -> str:
    return f"{BASE + 0x40 * i:#x}"


def classify(design, wl=None, n=N) -> D.Design:
    return D.classify(D.parse(trace(design, wl)), n)


DESIGNS = {
    "one mutex": (lambda p, r: [f"{a(0)}:m"], D.ONE_MUTEX, "the same one mutex"),
    "mutex per string": (lambda p, r: [f"{a(p)}:m"], D.MUTEX_PER_STRING, "own string"),
    "one rwlock": (lambda p, r: [f"{a(0)}:{'r' if r else 'w'}"], D.ONE_RWLOCK,
                   "reads took it for reading"),
    "rwlock per string": (lambda p, r: [f"{a(p)}:{'r' if r else 'w'}"], D.RWLOCK_PER_STRING,
                          "reads took it for reading"),
    "no lock": (lambda p, r: [], D.NO_LOCK, "none took"),
    # hand-made: the mutex twice (enter, leave); a condition variable only on a conflict
    "hand-made one rwlock": (lambda p, r: [f"{a(0)}:m2"] + ([f"{a(1)}:c"] if p % 7 == 0 else []),
                             D.ONE_RWLOCK, "hand-made"),
    "hand-made rwlock per string": (lambda p, r: [f"{a(3 * p)}:m2"], D.RWLOCK_PER_STRING,
                                    "condition variables used in 0 requests"),
    "rwlock taken for writing by reads": (lambda p, r: [f"{a(0)}:w"], D.ONE_MUTEX,
                                          "behaves as a mutex"),
    "rwlock per string, always for writing": (lambda p, r: [f"{a(p)}:w"], D.MUTEX_PER_STRING,
                                              "behaves as a mutex"),
    "writes take the rwlock for reading": (lambda p, r: [f"{a(0)}:r"], D.OTHER,
                                           "writers are not excluded"),
    "a mutex per stripe of 10": (lambda p, r: [f"{a(p % 10)}:m"], D.OTHER, "striping"),
    "a fresh mutex per request": (lambda p, r: [f"{a(next(FRESH))}:m"], D.OTHER,
                                  "different locks"),
    "writes lock twice, reads once": (lambda p, r: [f"{a(0)}:m" if r else f"{a(0)}:m2"],
                                      D.ONE_MUTEX, "once per read"),
    # our own reference server: a latency-log mutex taken inside the string's rwlock
    "rwlock per string, a shared mutex nested inside": (
        lambda p, r: [f"{a(p)}:{'r' if r else 'w'}", f"{STACK:#x}:M"], D.RWLOCK_PER_STRING,
        "not held when the string's lock was taken"),
    "a string's mutex taken inside one shared mutex": (
        lambda p, r: [f"{STACK:#x}:m", f"{a(p)}:M"], D.ONE_MUTEX, "behaves as that one mutex"),
    "one rwlock taken inside one shared mutex": (
        lambda p, r: [f"{STACK:#x}:m", f"{a(0)}:{'R' if r else 'W'}"], D.ONE_MUTEX,
        "behaves as one mutex"),
    # a timing mutex every request takes after the access: the data lock is the first one
    "hand-made one rwlock and a timing mutex": (
        lambda p, r: [f"{a(9)}:m2", f"{a(0)}:m"], D.ONE_RWLOCK, "the same one mutex (and 1 "
        "other shared mutex), twice per request: a hand-made"),
    "one mutex and a timing mutex": (lambda p, r: [f"{a(9)}:m", f"{a(0)}:m"], D.ONE_MUTEX,
                                     "once per read"),
    "half the requests lock": (lambda p, r: [f"{a(0)}:m"] if p % 2 else [], D.OTHER,
                               "took no lock"),
}


@pytest.mark.parametrize("name", DESIGNS)
def test_classify_made_up_designs(name):
    fn, kind, says = DESIGNS[name]
    got = classify(fn)
    assert got.kind == kind, got.evidence
    assert says in got.evidence
    assert got.requests == 300 and "300 requests to 236 strings" in got.evidence


def test_classify_undetermined_without_enough_evidence():
    wl = workload()
    few = classify(DESIGNS["one mutex"][0], wl[:40])
    assert few.kind == D.UNDETERMINED and "only 40 requests" in few.evidence
    assert D.classify([], N).kind == D.UNDETERMINED
    one_string = classify(DESIGNS["one mutex"][0], [(5, i % 2 == 0) for i in range(100)])
    assert one_string.kind == D.UNDETERMINED and "too few strings" in one_string.evidence
    # every string requested once: a lock per string looks like a lock per request
    once = classify(DESIGNS["mutex per string"][0], [(p, True) for p in range(200)])
    assert once.kind == D.UNDETERMINED and "requested twice" in once.evidence
    # positions outside [0, n) and requests without a position are not counted
    assert classify(DESIGNS["one mutex"][0], n=10).kind == D.UNDETERMINED
    assert D.classify(D.parse("R hello 1 0x55d4c8a0c040:m\n" * 500), N).kind == D.UNDETERMINED


def test_classify_ignores_a_few_odd_requests():
    wl = workload()
    fn = DESIGNS["mutex per string"][0]
    got = classify(lambda p, r: [] if p % 25 == 0 else fn(p, r), wl)
    assert got.kind == D.MUTEX_PER_STRING and "without a lock, left aside" in got.evidence


# ---------------------------------------------------------------- parse

def test_parse_reads_every_field():
    recs = D.parse("R 42-0-String[42]_has_be 3 0x55d4c8a0c040:m2 0x7ffe2a149190:W "
                   "0x55d4c8a0c100:c\n")
    assert len(recs) == 1
    r = recs[0]
    assert (r.request, r.pos, r.is_read, r.truncated) == ("42-0-String[42]_has_be", 42, False,
                                                          False)
    assert r.locks == (D.Lock(0x55D4C8A0C040, "m", 2, False), D.Lock(0x7FFE2A149190, "w", 1, True),
                       D.Lock(0x55D4C8A0C100, "c", 1, False))
    full = " ".join(a(i) + ":m" for i in range(D.MAX_OBJS))
    (r,) = D.parse(f"R 7-1- {D.MAX_OBJS} {full} +")
    assert r.truncated and len(r.locks) == D.MAX_OBJS and r.pos == 7 and r.is_read
    assert D.parse("R ? 0")[0].pos is None


GOOD = f"R 5-1- 1 {a(5)}:m"
GARBAGE = [
    "", " ", "R", "R 5-1- 1", "hello world", "\x00\x00\x00", "R 5-1- 1 " + a(5) + ":m\x00",
    "\ufeff" + GOOD, GOOD + "\r", GOOD + " ", " " + GOOD, GOOD.replace(" ", "  ", 1),
    "R 5-1-" + "x" * 30 + " 1 " + a(5) + ":m",   # a request longer than 24 characters
    "r" + GOOD[1:], "R 5-1- 1 " + a(5).upper().replace("X", "x") + ":m",
    "R 5-1- 2 " + a(5) + ":m",                     # count does not match
    "R 5-1- 01 " + a(5) + ":m", "R 5-1- 1 " + a(5) + ":x", "R 5-1- 1 " + a(5) + ":C",
    "R 5-1- 1 " + a(5) + ":m1", "R 5-1- 1 " + a(5) + ":m02", "R 5-1- 1 " + a(5),
    "R 5-1- 1 " + a(5) + ":m +",                   # '+' with fewer than 32 objects
    "R 5-1- 33 " + " ".join(a(i) + ":m" for i in range(33)),
    GOOD + GOOD,                                   # two lines run together
    "R 5-1- 1 0x" + "f" * 17 + ":m", "R 5-1- -1", "R 5-1- 1 -" + a(5)[2:] + ":m",
]
FORGED = [
    "R 5-1- 1 0x1:m",                  # below 4096: no lock lives there
    "R 5-1- 1 0x0:m", "R 5-1- 1 0x00001000:m",
    f"R 5-1- 1 {BASE + 1:#x}:m",        # not 4-aligned
    "R 5-1- 1 0x100000000000000:m",    # beyond user space
    f"R 5-1- 2 {a(1)}:m {a(1)}:m",      # the same entry twice
]


@pytest.mark.parametrize("bad", GARBAGE + FORGED)
def test_parse_drops_garbage_and_forged_looking_lines(bad):
    assert D.parse(bad) == []
    # and keeps the good lines around it
    assert len(D.parse("\n".join([GOOD, bad, GOOD]))) == 2


def test_parse_takes_bytes_and_odd_types():
    assert len(D.parse((GOOD + "\n").encode() * 3)) == 3
    assert D.parse(b"\xff\xfe" + GOOD.encode()) == []
    assert D.parse(None) == [] and D.parse(42) == [] and D.parse(["R"]) == []


def test_parse_caps_the_records(monkeypatch):
    monkeypatch.setattr(D, "MAX_RECORDS", 10)
    assert len(D.parse((GOOD + "\n") * 50)) == 10


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.binary(),
                 st.lists(st.sampled_from([GOOD, *GARBAGE, *FORGED, "\n", "R ", ":m", " 0x"]))
                 .map("".join)))
def test_parse_never_raises(text):
    recs = D.parse(text)
    assert all(isinstance(r, D.Record) for r in recs)
    D.classify(recs, N)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.builds(D.Record, st.text(max_size=30),
                          st.lists(st.builds(D.Lock, st.integers(0, 1 << 60),
                                             st.sampled_from("mrwcx"), st.integers(-1, 5),
                                             st.booleans()), max_size=4).map(tuple),
                          st.booleans()), max_size=120),
       st.integers(-5, 2000))
def test_classify_never_raises(records, n):
    got = D.classify(records, n)
    assert got.kind in D.KINDS and got.evidence


# ---------------------------------------------------------------- verdict_line

def test_verdict_line():
    design = D.Design(D.ONE_RWLOCK, "reads took the rwlock for reading", 300)
    assert D.verdict_line("main2", design) == (
        False, "main2 behaves as one rwlock for the whole array; expected a mutex per string")
    assert D.verdict_line("main3", design) == (
        True, "main3 behaves as one rwlock for the whole array, as expected")
    ok, text = D.verdict_line("main4", D.Design(D.UNDETERMINED, "only 3 requests traced"))
    assert ok is None and text == "main4: lock design undetermined (only 3 requests traced)"
    assert D.verdict_line("main1", D.Design(D.NO_LOCK, "x")) == (False, "main1 takes no lock; "
                                                                 "expected one mutex")
    assert D.verdict_line("server9", design)[0] is None
    assert set(D.EXPECTED.values()) <= set(D.KINDS)


# ---------------------------------------------------------------- the real tracer

EXPECTED_BY_FIXTURE = {
    "correct": dict(D.EXPECTED),
    "design_swap": {"main1": D.ONE_MUTEX, "main2": D.ONE_RWLOCK, "main3": D.RWLOCK_PER_STRING,
                    "main4": D.MUTEX_PER_STRING},
    "handmade_rwlock": dict(D.EXPECTED),
    "no_lock": dict.fromkeys(D.EXPECTED, D.NO_LOCK),
    "clocked_locks": dict(D.EXPECTED),  # locks taken only with pthread_*_clock*lock
}


@pytest.fixture(scope="module")
def lib() -> Path:
    return preload_library(LIB)


class TracedServer:
    """A fixture server started through the one launcher (no sandbox) with the tracer
    preloaded; stop() ends it (call it in a finally)."""

    def __init__(self, binary: Path, trace_file: Path, env_extra=None, pass_fds=()):
        env = {"LD_PRELOAD": str(LIB), "LOCKPROF_TRACE_FILE": str(trace_file), **(env_extra or {})}
        spec = SS.ServerSpec(binary.name, "kit", binary, env=tuple(env.items()))
        place = SS.Place(binary.parent, kit_work=binary.parent, ready_timeout=10,
                         pass_fds=tuple(pass_fds))
        for _ in range(5):  # a port taken between the check and the bind: another one
            self.srv = SS.launch(spec, N, pick_port(), place,
                                 log_file=trace_file.with_suffix(".out"))
            try:
                self.srv.start()
                self.proc, self.port = self.srv.proc, self.srv.listen_port
                return
            except StartError:
                self.stop()
        raise AssertionError(f"{binary.name} did not start: "
                             f"{trace_file.with_suffix('.out').read_text(errors='replace')}")

    def stop(self) -> None:
        self.srv.stop()


def plan(seed: int) -> list:
    """kitload's plan shape: 30 threads x 10 requests, one connection each."""
    reqs = [kitload.Request(i % 30, p, r, "" if r else f"String[{p}] has been modified by "
                            f"thread {i % 30}") for i, (p, r) in enumerate(workload(N, seed))]
    return [reqs[t::30] for t in range(30)]


def traced_design(binary: Path, trace_file: Path, seed: int, env_extra=None) -> D.Design:
    server = TracedServer(binary, trace_file, env_extra)
    try:
        done, _ = kitload.drive(server.port, plan(seed), timeout=5.0)
    finally:
        server.stop()
    failed = [r.describe() for r in done if not r.ok]
    assert len(done) == 300 and not failed, failed[:3]
    return D.classify(D.parse(trace_file.read_bytes()), N)


@pytest.mark.parametrize("fixture", list(EXPECTED_BY_FIXTURE))
def test_tracer_tells_each_fixtures_design(fixture, lib, tmp_path):
    d = built_fixture(fixture, tmp_path)
    got = {}
    for k, name in enumerate(sorted(EXPECTED_BY_FIXTURE[fixture])):
        got[name] = traced_design(d / name, tmp_path / f"{name}.trace", seed=k + 1)
    assert {m: g.kind for m, g in got.items()} == EXPECTED_BY_FIXTURE[fixture], \
        {m: g.evidence for m, g in got.items()}
    for name, design in got.items():
        assert design.requests == 300, design.evidence
        ok, text = D.verdict_line(name, design)
        assert ok is (EXPECTED_BY_FIXTURE[fixture][name] == D.EXPECTED[name]), text


@pytest.mark.parametrize("swap", ["mcs", "futex-mutex"])
def test_trace_mode_combines_with_the_lock_swapper(swap, lib, tmp_path):
    """The preload's modes combine: with clocked_locks' locks swapped for ours (its
    pthread_*_clock*lock calls served by the swap locks' timed paths; rwlocks by pflock),
    the trace still names each server's design."""
    d = built_fixture("clocked_locks", tmp_path)
    for k, name in enumerate(("main2", "main3")):
        got = traced_design(d / name, tmp_path / f"{name}.trace", seed=k + 1,
                            env_extra={"LOCKPROF_SWAP": swap})
        assert got.kind == D.EXPECTED[name], got.evidence
        assert got.requests == 300, got.evidence


def test_tracer_writes_to_an_inherited_descriptor_and_closes_it_on_exec(lib, tmp_path):
    """$LOCKPROF_TRACE_FD: the lines go to the descriptor the grader handed in (the program
    cannot reach the file by name), which is closed on exec; a descriptor open only for
    reading is not used."""
    d = built_fixture("correct", tmp_path)
    trace = tmp_path / "handed.trace"
    fd = os.open(trace, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    server = TracedServer(d / "main2", tmp_path / "unused.trace", {"LOCKPROF_TRACE_FD": str(fd)},
                          pass_fds=(fd,))
    try:
        flags = next(ln for ln in Path(f"/proc/{server.proc.pid}/fdinfo/{fd}").read_text()
                     .splitlines() if ln.startswith("flags:"))
        done, _ = kitload.drive(server.port, plan(5)[:5], timeout=5.0)
    finally:
        server.stop()
        os.close(fd)
    assert int(flags.split()[1], 8) & os.O_CLOEXEC, flags
    assert len(done) == 50 and all(r.ok for r in done)
    assert len(D.parse(trace.read_text())) == 50
    assert not (tmp_path / "unused.trace").exists()  # $LOCKPROF_TRACE_FD wins
    reading = tmp_path / "read-only.trace"
    reading.write_text("")
    fd = os.open(reading, os.O_RDONLY)
    server = TracedServer(d / "main2", tmp_path / "unused.trace", {"LOCKPROF_TRACE_FD": str(fd)},
                          pass_fds=(fd,))
    try:
        done, _ = kitload.drive(server.port, plan(6)[:2], timeout=5.0)
    finally:
        server.stop()
        os.close(fd)
    assert len(done) == 20 and all(r.ok for r in done) and reading.read_text() == ""


def test_tracer_cap_and_refusals(lib, tmp_path):
    """LOCKPROF_TRACE_MAX caps the lines; a trace path that is a symbolic link is not followed
    (nothing is written through it) and the server serves as usual."""
    d = built_fixture("correct", tmp_path)
    capped = tmp_path / "capped.trace"
    server = TracedServer(d / "main2", capped, {"LOCKPROF_TRACE_MAX": "7"})
    try:
        done, _ = kitload.drive(server.port, plan(3)[:5], timeout=5.0)
    finally:
        server.stop()
    assert len(done) == 50 and all(r.ok for r in done)
    assert len(D.parse(capped.read_text())) == 7 == len(capped.read_text().splitlines())
    target = tmp_path / "target"
    target.write_text("")
    link = tmp_path / "link.trace"
    link.symlink_to(target)
    server = TracedServer(d / "main1", link)
    try:
        done, _ = kitload.drive(server.port, plan(4)[:3], timeout=5.0)
    finally:
        server.stop()
    assert len(done) == 30 and all(r.ok for r in done)
    assert target.read_text() == ""
