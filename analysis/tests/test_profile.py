"""`lockbench profile` (analysis/profile/ with liblockprof.so preloaded) on real programs:
the kit-style fixture servers driven by the kit's workload
(analysis/grade/measure/kitload.py) and stopped by SIGTERM, our own main3, a
thread-per-request server through 3000 threads, profile/stress.c under every swap lock, and
the inputs refused before anything starts. Every server listens below 32768 (on a port's
byte-swapped twin too); every wait is bounded."""

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from analysis import ports
from analysis.grade.measure import kitload
from analysis.launch import server_spec as SS
from analysis.launch.procs import StartError, pick_port
from analysis.lockprof import preload
from analysis.tests.helpers import PY, RELEASE, REPO, built_fixture, preload_library

pytestmark = [pytest.mark.slow]

LIB = RELEASE / "liblockprof.so"
N = 100
MUTEX_SIZE = 40  # sizeof(pthread_mutex_t) on x86_64 glibc: the fixture's locks[] stride
RWLOCK_SIZE = 56


@pytest.fixture(scope="module")
def lib() -> Path:
    return preload_library(LIB)


@pytest.fixture(scope="module")
def correct(lib, tmp_path_factory) -> Path:
    return built_fixture("correct", tmp_path_factory.mktemp("fixtures"))


def children(pid: int) -> list:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.fixture
def serve(tmp_path):
    """start(server, *options, env=()) -> a Profiled server, killed at the end whatever
    happened."""
    started = []

    def start(server, *options, env=()):
        started.append(Profiled(server, tmp_path, *options, env=env))
        return started[-1]
    yield start
    for s in started:
        s.kill()


def profile_cmd(*options) -> list:
    return [PY, "-m", "analysis.profile", *map(str, options)]


class Profiled:
    """`lockbench profile OPTIONS -- SERVER N 127.0.0.1 PORT` started through the one
    launcher (the profiler as the server's wrapper, `env` added to its environment) and
    listening; stop() sends SIGTERM to the profiler (it forwards it) and returns (exit
    status, output, the --json document)."""

    def __init__(self, server: Path, tmp: Path, *options, env: tuple = ()):
        self.json = tmp / f"profile-{time.monotonic_ns()}.json"
        self.out = self.json.with_suffix(".out")
        spec = SS.ServerSpec(server.name, "kit", server, env=(("PYTHONPATH", str(REPO)), *env),
                             wrap=(*profile_cmd("--json", self.json, *options), "--"))
        for _ in range(5):  # a port taken between the check and the bind: another one
            self.srv = SS.launch(spec, N, pick_port(), SS.Place(tmp, kit_work=tmp),
                                 log_file=self.out)
            self.port = self.srv.port
            try:
                self.srv.start()
                self.program = children(self.srv.proc.pid)
                return
            except StartError:
                self.kill()
        raise AssertionError(f"{server.name} did not start: {self.out.read_text()}")

    def kill(self) -> None:
        """Both processes gone: the program runs in a process group of its own."""
        for pid in getattr(self, "program", []):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.srv.stop()

    def stop(self) -> tuple:
        try:
            self.srv.stop(timeout=30)
        finally:
            self.kill()
        doc = json.loads(self.json.read_text()) if self.json.is_file() else None
        return self.srv.exit_code, self.out.read_text(errors="replace"), doc


def kit_runs(port: int, runs: int = 1) -> list:
    """The kit's workload `runs` times (1000 requests a run, one connection each, 100 threads
    x 10); every request must get its reply."""
    done = []
    for _ in range(runs):
        got, _ = kitload.drive(ports.twin(port), kitload.kit_plan(N), timeout=10.0)
        failed = [r.describe() for r in got if not r.ok]
        assert len(got) == 1000 and not failed, failed[:3]
        done += got
    return done


def by_slot(locks: list, stride: int, plan: list) -> dict:
    """Each lock record named by its slot: the fixture's locks[] is one array, so the
    addresses are base + stride * slot; the lowest address is the lowest slot touched."""
    touched = sorted({r.pos for r in plan})
    base = min(int(r["addr"], 16) for r in locks) - stride * touched[0]
    out = {}
    for r in locks:
        slot, rest = divmod(int(r["addr"], 16) - base, stride)
        assert rest == 0, r["addr"]
        out[slot] = r
    return out


# ---------------------------------------------------------------- profiling the fixtures

def test_main2_shows_one_mutex_per_string_the_kit_touched(correct, serve):
    server = serve(correct / "main2")
    done = kit_runs(server.port)
    code, out, doc = server.stop()
    assert code == 0, out
    locks = doc["locks"]
    touched = Counter(r.pos for r in done)
    assert len(locks) == len(touched) and all(r["kind"] == "mutex" for r in locks)
    slots = by_slot(locks, MUTEX_SIZE, done)
    assert set(slots) == set(touched)
    assert {s: r["acquisitions"]["mutex"] for s, r in slots.items()} == dict(touched)
    assert all(r["site"].startswith("handle+") and r["impl"] == "pthread" for r in locks)
    assert all(r["wait_ns"]["samples"] == r["acquisitions"]["mutex"] for r in locks)
    assert all(r["hold_ns"]["p50"] >= 10_000 for r in locks), "usleep(10) under every lock"
    assert doc["processes"][0]["reason"] == "SIGTERM"
    assert f"{len(touched)} lock object(s) in 1 process(es)" in out


def test_main4_shows_rwlocks_taken_for_reading_and_writing(correct, serve):
    server = serve(correct / "main4")
    done = kit_runs(server.port)
    code, out, doc = server.stop()
    assert code == 0, out
    locks = doc["locks"]
    assert all(r["kind"] == "rwlock" for r in locks)
    slots = by_slot(locks, RWLOCK_SIZE, done)
    reads = Counter(r.pos for r in done if r.is_read)
    writes = Counter(r.pos for r in done if not r.is_read)
    assert {s: r["acquisitions"]["read"] for s, r in slots.items() if reads[s]} == dict(reads)
    assert {s: r["acquisitions"]["write"] for s, r in slots.items() if writes[s]} == \
        dict(writes)
    assert sum(reads.values()) > 0 and sum(writes.values()) > 0


def test_main1_shows_one_mutex_taken_1000_times(correct, serve, tmp_path):
    server = serve(correct / "main1", "--markdown", tmp_path / "section.md")
    kit_runs(server.port)
    code, out, doc = server.stop()
    assert code == 0, out
    [lock] = doc["locks"]
    assert lock["kind"] == "mutex" and lock["acquisitions"] == {"mutex": 1000}
    assert 0 < lock["contended"] <= 1000  # 100 threads on one lock held across usleep
    section = (tmp_path / "section.md").read_text()
    assert section.startswith("## Lock profile") and "| mutex | pthread | 1000 |" in section


# ---------------------------------------------------------------- swapping the locks

def check_consistent(port: int) -> None:
    """Our client's consistency checker (an attacker-shaped workload and more), at the
    byte-swapped twin like the kit."""
    p = subprocess.run([str(RELEASE / "client"), str(N), "127.0.0.1", str(port), "--check",
                        "--quiet", "--time-limit", "120"], capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0 and "CONSISTENT" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("lock, server, kind",
                         [(lock, "main2", "mutex") for lock in preload.MUTEX_LOCKS] +
                         [(lock, "main4", "rwlock") for lock in preload.RW_ONLY_LOCKS])
def test_swapped_locks_serve_the_kit_and_pass_the_check(correct, serve, lock, server, kind):
    if not (RELEASE / "client").is_file():
        pytest.skip("build/release/client is not built")
    s = serve(correct / server, "--swap-lock", lock)
    kit_runs(s.port)
    check_consistent(s.port)
    code, out, doc = s.stop()
    assert code == 0, out
    assert doc["swap"][kind] == lock
    assert doc["locks"] and all(r["impl"] == lock and r["kind"] == kind for r in doc["locks"])


@pytest.mark.parametrize("mutex, rwlock", [("mcs", "pflock"), ("clh", "bravo-pflock")])
def test_swap_under_our_own_main3(lib, serve, mutex, rwlock):
    """build/release/main3: one std::shared_mutex, a pthread rwlock, swapped too; it ends
    through its own SIGTERM handler and exit, so the destructor writes the profile."""
    if not (RELEASE / "main3").is_file() or not (RELEASE / "client").is_file():
        pytest.skip("build/release/main3 and client are not built")
    s = serve(RELEASE / "main3", "--swap-lock", mutex, "--swap-rwlock", rwlock)
    check_consistent(s.port)
    code, out, doc = s.stop()
    assert code == 0, out
    assert doc["processes"][0]["reason"] == "exit"
    rw = [r for r in doc["locks"] if r["kind"] == "rwlock" and r["impl"] == rwlock]
    assert rw and max(r["acquisitions"]["read"] for r in rw) > 0
    assert max(r["acquisitions"]["write"] for r in rw) > 0
    assert any(r["kind"] == "mutex" and r["impl"] == mutex for r in doc["locks"])


@pytest.mark.parametrize("lock", ["pthread", "mcs", "clh", "futex-mutex"])
def test_3000_threads_over_a_life(correct, serve, lock):
    """The kit fixture makes a thread per request: 3 kit runs, 3000 threads, 3000
    acquisitions of main1's one mutex (no per-thread limit, as LiTL's 2048; CLH's nodes
    outlive the threads that used them)."""
    s = serve(correct / "main1", *(["--swap-lock", lock] if lock != "pthread" else []))
    kit_runs(s.port, runs=3)
    code, out, doc = s.stop()
    assert code == 0, out
    [lock_rec] = doc["locks"]
    assert lock_rec["acquisitions"] == {"mutex": 3000}
    assert lock_rec["impl"] == lock


@pytest.fixture(scope="module")
def stress(lib, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("stress") / "stress"
    p = subprocess.run(["gcc", "-O2", "-Wall", "-o", str(out), str(REPO / "profile" / "stress.c"),
                        "-lpthread"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return out


STRESS_SWAPS = {  # every swap lock as a mutex, and as a rwlock, at least once
    "profile": [], **{lock: ["--swap-lock", lock] for lock in preload.SWAP_LOCKS},
    "ttas-backoff+mcs-rw": ["--swap-lock", "ttas-backoff", "--swap-rwlock", "mcs"],
    "futex-mutex+bravo-pflock-rw": ["--swap-lock", "futex-mutex", "--swap-rwlock",
                                    "bravo-pflock"],
    "mcs+clh-rw": ["--swap-lock", "mcs", "--swap-rwlock", "clh"],
    "clh+futex-mutex-rw": ["--swap-lock", "clh", "--swap-rwlock", "futex-mutex"],
}


STRESS_CHECKS = 9  # the lines stress.c prints, one per section


def kill_session(sid: int) -> None:
    """SIGKILL to every process of session sid (the profiler puts its program in a process
    group of its own, in the same session)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == sid:
                os.kill(int(stat.parent.name), signal.SIGKILL)


def run_whole(cmd: list, timeout: float, env=None) -> subprocess.CompletedProcess:
    """cmd in a session of its own; at the timeout the whole session is killed (the program
    under the profiler too, which would otherwise spin on for ever, orphaned) and the test
    fails with what it printed."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          cwd=REPO, start_new_session=True, env=env) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_session(proc.pid)
            out, err = proc.communicate()
            pytest.fail(f"no end in {timeout} s: {' '.join(map(str, cmd))}\n{out[-2000:]}"
                        f"{err[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.parametrize("options", STRESS_SWAPS.values(), ids=STRESS_SWAPS.keys())
def test_stress_program_keeps_every_lock_promise(stress, tmp_path, options):
    """Mutual exclusion, whole writes for readers (read-mostly too), condition waits that
    lose nothing and time out, trylock and timedlock against a holder, errno kept,
    recursion kept, objects initialised again, error-checking mutexes, a fork."""
    out = tmp_path / "p.json"
    p = run_whole(profile_cmd("--json", out, *options, "--", stress, 4, 5000), timeout=300)
    assert p.returncode == 0 and "FAIL" not in p.stdout, p.stdout + p.stderr
    assert p.stdout.count("ok   ") == STRESS_CHECKS
    doc = json.loads(out.read_text())
    conds = [r for r in doc["locks"] if r["kind"] == "cond"]
    assert sum(r["acquisitions"]["wait"] for r in conds) >= 1
    assert sum(r["acquisitions"]["signal"] for r in conds) == 2 * 5000
    served = {r["impl"] for r in doc["locks"] if r["kind"] != "cond"}
    assert served >= {doc["swap"]["mutex"], doc["swap"]["rwlock"]}
    if doc["swap"]["rwlock"] == "bravo-pflock":  # the read-mostly section took the fast path
        assert sum(r["fast_reads"] for r in doc["locks"] if r["impl"] == "bravo-pflock") > 0


SWAP_ENV = {"--swap-lock": "LOCKPROF_SWAP", "--swap-rwlock": "LOCKPROF_SWAP_RW"}


@pytest.mark.parametrize("options", [o for o in STRESS_SWAPS.values() if o],
                         ids=[name for name, o in STRESS_SWAPS.items() if o])
def test_stress_program_keeps_every_lock_promise_swapped_without_profiling(lib, stress, options):
    """Swapping without profiling or tracing, the entry points jump straight into the swap
    lock's own fast path (the command always profiles, so the preload is set up by hand): the
    same promises there."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKPROF_")}
    env["LD_PRELOAD"] = str(lib)
    env.update({SWAP_ENV[flag]: name for flag, name in zip(options[::2], options[1::2])})
    p = run_whole([str(stress), "4", "5000"], timeout=300, env=env)
    assert p.returncode == 0 and "FAIL" not in p.stdout, p.stdout + p.stderr
    assert p.stdout.count("ok   ") == STRESS_CHECKS and not p.stderr, p.stdout + p.stderr


# ---------------------------------------------------------------- refused, failed, help

def default_signals() -> None:
    """In the child: SIGINT and SIGTERM at their default actions, as from a terminal (a
    background job of a non-interactive shell starts with SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_profile(*args, timeout=60):
    return subprocess.run(profile_cmd(*args), capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, preexec_fn=default_signals)


@pytest.fixture(scope="module")
def static_main1(lib, tmp_path_factory) -> Path:
    d = built_fixture("static_build", tmp_path_factory.mktemp("static"))
    # readelf comes with the compiler (binutils); a static program has no INTERP segment
    p = subprocess.run(["readelf", "-l", str(d / "main1")], capture_output=True, text=True)
    assert p.returncode == 0 and "INTERP" not in p.stdout, p.stdout[-2000:]
    return d / "main1"


def test_bad_inputs_get_one_line_and_exit_2_before_starting(lib, static_main1, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    text.chmod(0o755)
    cases = {
        (): "no program to run",
        ("--",): "no program to run",
        ("--", "/nonexistent/prog"): "not found",
        ("--", "no-such-program-anywhere"): "not found on PATH",
        ("--", static_main1, "10", "127.0.0.1", "3000"): "statically linked",
        ("--", text): "neither an ELF program nor a script",
        ("--swap-lock", "spin", "--", "true"): "--swap-lock",
        ("--swap-rwlock", "seqlock", "--", "true"): "--swap-rwlock",
        ("--swap-lock", "bravo-pflock", "--swap-rwlock", "spin", "--", "true"): "--swap-rwlock",
        # the old names of the locks give the new ones
        **{("--swap-lock", old, "--", "true"): f"now called {new!r}"
           for old, new in preload.RENAMED.items()},
        ("--swap-lock", "flat-combining", "--", "true"): "flat combining cannot replace",
        ("--swap-rwlock", "flat-combining", "--", "true"): "flat combining cannot replace",
        ("--top", "1e3", "--", "true"): "--top",
        ("--json", "/nonexistent/dir/p.json", "--", "true"): "does not exist",
        ("--stacks", "0", "--", "true"): "--stacks",
        ("--stacks", "65", "--", "true"): "--stacks",
        ("--folded", "s.folded", "--", "true"): "--folded needs --stacks N",
        ("--stacks", "8", "--folded", "/nonexistent/dir/s.folded", "--", "true"): "does not exist",
        ("--timeline", "/nonexistent/dir/t.json", "--", "true"): "does not exist",
    }
    for args, said in cases.items():
        p = run_profile(*args)  # its timeout only stops a hang: how fast is not asserted
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.splitlines()) == 1 and said in p.stderr, (args, p.stderr)
        assert p.stdout == ""


def test_a_program_that_fails_prints_its_profile_and_exits_1(lib):
    p = run_profile("--", PY, "-c", "raise SystemExit(3)")  # exit(3): the destructor runs
    assert p.returncode == 1 and "exited with status 3" in p.stderr
    assert len(p.stderr.splitlines()) == 1 and "lock object(s)" in p.stdout


def test_a_program_that_leaves_no_profile_is_one_line_and_exit_1(lib):
    p = run_profile("--", "sh", "-c", "kill -KILL $$")
    assert p.returncode == 1 and "wrote no lock profile" in p.stderr
    assert len(p.stderr.splitlines()) == 1


def test_help_answers_at_once_without_the_build():
    for cmd in ([PY, "-m", "analysis.profile", "--help"],
                [str(REPO / "lockbench"), "profile", "--help"]):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
        assert p.returncode == 0 and "--swap-lock" in p.stdout
        said = " ".join(p.stdout.split())  # argparse wraps the help
        assert all(lock in said for lock in (*preload.SWAP_LOCKS, "pthread")), said


def test_list_locks_names_exactly_what_the_interposer_swaps_in():
    """One list: the names --list-locks prints are common/swap_locks.h's (which the
    interposer is built on, and lockserver --list-locks prints the same) and the lock
    families of lockserver's strategies."""
    p = subprocess.run([PY, "-m", "analysis.profile", "--list-locks"], capture_output=True,
                       text=True, timeout=30, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0 and p.stderr == "", p.stderr
    listed = [line.split()[0] for line in p.stdout.splitlines()]
    assert listed == [*preload.SWAP_LOCKS, "pthread"], listed
    table = (REPO / "common" / "swap_locks.h").read_text().split("kSwapLocks[] = {")[1]
    assert re.findall(r'\{"([a-z-]+)",', table.split("};")[0]) == list(preload.SWAP_LOCKS)
    server = RELEASE / "lockserver"
    if server.is_file():
        assert subprocess.run([str(server), "--list-locks"], capture_output=True, text=True,
                              timeout=30).stdout == p.stdout
        strategies = subprocess.run([str(server), "--list-strategies"], capture_output=True,
                                    text=True, timeout=30).stdout
        # every swap lock is a strategy family too: its microbenchmark runs the same code
        for lock in preload.SWAP_LOCKS:
            assert f"one-{lock} " in strategies, f"no strategy one-{lock}"


def test_the_program_sees_the_default_signal_actions_it_left(lib):
    """Our SIGINT/SIGTERM handler stands in for the default action unseen: CPython installs
    KeyboardInterrupt only over the default, and still does."""
    code = ("import signal, sys; "
            "sys.exit(0 if signal.getsignal(signal.SIGINT) is signal.default_int_handler "
            "and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL else 4)")
    p = run_profile("--", PY, "-c", code)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_dump_the_program_forged_is_one_line_and_exit_1_with_its_own_profile_kept(lib):
    # The program knows the dump folder ($LOCKPROF_FILE): a forged or broken file there is
    # left out with one line, never a traceback; the program's real dump is still reported.
    code = ("import os, pathlib, threading; "
            "d = pathlib.Path(os.environ['LOCKPROF_FILE']).parent; "
            "(d / 'lockprof.1.json').write_text('[' * 200000); "
            "(d / 'lockprof.2.json').write_text('{\"pid\": 2, \"swap\": {}, \"locks\": []}'); "
            "lock = threading.Lock()\nfor _ in range(3):\n    with lock: pass")
    p = run_profile("--", PY, "-c", code)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and "lock object(s) in 1 process(es)" in p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 2, lines
    assert "lockprof.1.json is nested too deeply to be a dump: left out" in lines[0]
    assert "lockprof.2.json swap has no mutex, rwlock: left out" in lines[1]
