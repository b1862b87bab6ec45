"""The grader's clock probe (kitload.window, timing._probe_problem) against real student-like
servers started by the test, outside the sandbox: every request is answered and the server
writes one timing line per batch; the connections are all accepted before the first send;
and main1's lines are judged from what the probe measured: a correct clock keeps the lock
waiting, a clock started after the lock (timing_after_lock) and a start time shared by all
threads (timing_racy) leave it out. The sandboxed grading of the same fixtures is in
test_grade_packaging.py."""

import socket
import statistics
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis import kernel_sockets as ks
from analysis.grade.checks import timing as T
from analysis.grade.measure import kitload as K
from analysis.launch.procs import pick_port
from analysis.launch.server_spec import Place, ServerSpec, launch
from analysis.tests.helpers import built_fixture, kit_fixture

pytestmark = [pytest.mark.slow]

N = 1000


def hostile_main1(case: str, into: Path) -> Path:
    d = kit_fixture(f"hostile/{case}", into)
    p = subprocess.run(["make", "-s", "CC=gcc", "main1"], cwd=d, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return d / "main1"


class Probed:
    """A server started in its own folder, taking `batches` probe batches; what
    clock_probe records for it."""

    def __init__(self, binary: Path, folder: Path, batches: int = T.PROBE_BATCHES):
        folder.mkdir()
        srv = launch(ServerSpec(binary.name, "kit", binary), N, pick_port(),
                     Place(folder, kit_work=folder, ready_timeout=10.0),
                     log_file=folder.with_suffix(".log"))
        with srv:
            port = srv.listen_port
            self.client, self.left, self.reqs = [], [], []
            for _ in range(batches):
                reqs = T._probe_plan(N)
                err, left = K.window(port, reqs, T.PROBE_OUTSTANDING, 5.0,
                                     lambda: ks.accept_queue(port) or 0)
                assert err == "", err
                self.left.append(left)
                self.reqs.append(reqs)
                self.client.append(statistics.fmean(r.end - r.start for r in reqs))
            timing = folder / T.TIMING
            for _ in range(100):
                if timing.exists() and len(timing.read_text().splitlines()) >= batches:
                    break
                time.sleep(0.05)
            self.lines = timing.read_text().splitlines() if timing.exists() else []

    def entry(self) -> dict:
        return {"client": self.client, "lines": self.lines, "unaccepted": max(self.left),
                "why": ""}


@pytest.fixture(scope="module")
def correct(tmp_path_factory):
    return built_fixture("correct", tmp_path_factory.mktemp("correct"))


@pytest.fixture(scope="module")
def baseline(correct, tmp_path_factory):
    root = tmp_path_factory.mktemp("baseline")
    return {"main2": Probed(correct / "main2", root / "main2").entry(),
            "main4": Probed(correct / "main4", root / "main4").entry()}


def test_every_request_is_answered_after_every_connection_was_accepted(correct, tmp_path):
    p = Probed(correct / "main1", tmp_path / "main1", batches=2)
    assert p.left == [0, 0]
    assert len(p.lines) == 2, p.lines  # one line per batch of 1000: no connection left empty
    for r in (r for reqs in p.reqs for r in reqs):
        assert r.end > r.start
        if r.is_read:
            assert r.reply.startswith((f"String {r.pos}: the initial value",
                                       f"String[{r.pos}] has been modified by thread ")), r
        else:
            assert r.reply == r.text, r


@pytest.mark.parametrize("case,left_out", [("correct", False), ("timing_after_lock", True),
                                           ("timing_racy", True)])
def test_main1_lines_are_judged_against_the_lock_waiting_the_probe_made(
        case, left_out, correct, baseline, tmp_path):
    """A busy machine can hide the lock waiting in every batch: the probe then judges
    nothing (undetermined, never scored), and is tried afresh, at most three times in all;
    one of them must judge, and what it judges must be right."""
    binary = correct / "main1" if case == "correct" else hostile_main1(case, tmp_path)
    ref = baseline
    for attempt in range(3):
        d = tmp_path / str(attempt)
        d.mkdir()
        probe = {"n": N, "main1": Probed(binary, d / "main1").entry(), **ref}
        if T.lost_in_noise(probe):  # as the grader does: a second round, a fresh reference
            probe = {"n": N, "round": 2, "main1": Probed(binary, d / "again1").entry(),
                     "main2": Probed(correct / "main2", d / "again2").entry(),
                     "main4": Probed(correct / "main4", d / "again4").entry()}
        got, line = T._probe_problem(probe)
        if got is not None:
            break
        ref = {m: Probed(correct / m, d / f"ref_{m}").entry() for m in ("main2", "main4")}
    assert got is left_out, line
    assert ("the lock waiting is left out" in line) is left_out
    assert f"below {T.AFTER_LOCK_SHARE:g} x" in line or not left_out


def test_a_probe_that_could_not_run_or_a_pool_is_not_judged():
    assert T._probe_problem({"why": "needs main1 and main2 or main4"})[0] is None
    pool = {"client": [0.01] * 3, "lines": ["1e-4"] * 3, "unaccepted": 900, "why": ""}
    fast = {"client": [2e-4] * 3, "lines": ["1e-4"] * 3, "unaccepted": 0, "why": ""}
    got, line = T._probe_problem({"n": N, "main1": pool, "main2": fast})
    assert got is None and "900 of 1000" in line and "not judged" in line
    for bad in ("nan", "inf", "0x1p-3 junk"):
        odd = dict(pool, unaccepted=0, lines=["1e-4", bad, "1e-4"])
        got, line = T._probe_problem({"n": N, "main1": odd, "main2": fast})
        assert got is None and "not judged" in line, line
    # a one-server lab's main against the grader's reference rwlock per string
    after = dict(pool, unaccepted=0, lines=["2e-4"] * 3)
    one = {"n": N, "judged": "main", "against": "the grader's rwlock per string's (kitref4)",
           "main": after, "kitref4": fast}
    got, line = T._probe_problem(one)
    assert got is True and line.startswith("main under the grader's clock probe"), line
    assert "beyond the grader's rwlock per string's (kitref4)" in line
    got, line = T._probe_problem({**one, "main": dict(after, lines=["1e-2"] * 3)})
    assert got is False and "the lock waiting is in" in line, line
    quiet = dict(pool, unaccepted=0, client=[3e-4] * 3)
    got, line = T._probe_problem({"n": N, "main1": quiet, "main2": fast})
    assert got is None and "no lock waiting stands out" in line
    # a second round only where some batch stood out and some did not: not where none did
    # (no waiting to find again), nor for a pool, lines that are not numbers, or a judgement
    some = dict(quiet, client=[0.01, 2.5e-4, 0.012])
    assert T.lost_in_noise({"n": N, "main1": some, "main2": fast})
    assert not T.lost_in_noise({"n": N, "main1": quiet, "main2": fast})
    assert not T.lost_in_noise({"n": N, "main1": dict(some, unaccepted=900), "main2": fast})
    assert not T.lost_in_noise({"n": N, "main1": dict(some, lines=["x"] * 3), "main2": fast})
    assert not T.lost_in_noise({"n": N, "main1": dict(pool, unaccepted=0), "main2": fast})
    assert not T.lost_in_noise({"why": "needs main1 and main2 or main4"})
    got, line = T._probe_problem({"n": N, "round": 2, "main1": dict(pool, unaccepted=0),
                                  "main2": fast})
    assert got is True and "a second round" in line, line
    # a busy machine delayed two of main's batches, not the third: lock waiting would be in
    # all three, so nothing is judged (an honest clock was failed so once)
    noisy = dict(after, client=[0.01, 2.5e-4, 0.012])
    got, line = T._probe_problem({**one, "main": noisy})
    assert got is None and "no lock waiting stands out in every batch" in line, line
    # one slow batch of the reference's is noise too: its median is the bar
    got, line = T._probe_problem({**one, "kitref4": dict(fast, client=[2e-4, 2e-4, 0.009])})
    assert got is True, line


class Silent:
    """A listener that accepts every connection and then never answers (close_them=False)
    or closes each at once."""

    def __init__(self, close_them: bool):
        self.sock = socket.create_server(("127.0.0.1", pick_port()), backlog=2000)
        self.port, self.held = self.sock.getsockname()[1], []
        self.close_them = close_them
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            if self.close_them:
                c.close()
            else:
                self.held.append(c)

    def stop(self):
        self.sock.close()
        for c in self.held:
            c.close()


def test_a_server_that_does_not_answer_ends_the_probe_with_one_line():
    s = Silent(False)
    try:
        err, left = K.window(s.port, T._probe_plan(N)[:200], T.PROBE_OUTSTANDING, 0.5,
                             lambda: ks.accept_queue(s.port) or 0)
    finally:
        s.stop()
    assert "replies missing after 0.5 s" in err and left == 0, (err, left)


def test_a_server_that_closes_without_replies_ends_each_request_at_its_close():
    # the kit's client reads 0 bytes (or a reset) and goes on: the batch runs to its end,
    # every request over at its close, none answered; the probe then judges nothing
    s = Silent(True)
    reqs = T._probe_plan(N)[:200]
    try:
        err, left = K.window(s.port, reqs, T.PROBE_OUTSTANDING, 0.5,
                             lambda: ks.accept_queue(s.port) or 0)
    finally:
        s.stop()
    assert err == "" and left == 0, (err, left)
    assert all(r.outcome in ("empty", "reset") and r.end >= r.start > 0 for r in reqs)


def test_a_probe_lost_in_noise_takes_one_second_round_when_it_fits(monkeypatch):
    """The clock probe's rule, the probe itself scripted: a first round where some of
    main1's batches stood out and some did not is followed by one more (round 2, its stray
    count added), judged alone; no second round when the first was clear, or did not fit."""
    ref = {"client": [2e-4] * 3, "lines": ["1e-4"] * 3, "unaccepted": 0, "why": ""}
    mixed = {"n": N, "strays": 1, "main2": ref,
             "main1": dict(ref, client=[0.01, 2.5e-4, 0.012], lines=["1e-2"] * 3)}
    clear = {"n": N, "strays": 2, "main2": ref, "main1": dict(mixed["main1"], client=[0.01] * 3)}
    # the time left: before the first round, then after it
    for first, left, rounds in ((mixed, [100.0, 90.0], [1, 2]), (clear, [100.0, 90.0], [1]),
                                (mixed, [100.0, 5.0], [1])):
        calls, lefts = [], iter(left)

        def probe(ctx, bin_dir, present, round_=1, first=first, calls=calls):
            calls.append(round_)
            return dict(first if round_ == 1 else clear, round=round_)
        monkeypatch.setattr(T, "clock_probe", probe)
        ctx = SimpleNamespace(cfg={}, left=lambda lefts=lefts: next(lefts),
                              cost=lambda cid: 10.0, log=lambda msg: None, probe=None)
        T.probe(ctx, Path("."), ["main1", "main2"])
        got = ctx.probe
        assert calls == rounds
        assert got["round"] == rounds[-1]
        if rounds == [1, 2]:
            assert got["strays"] == 3
            assert T._probe_problem(got)[0] is False
