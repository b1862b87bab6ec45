"""`python -m analysis grade` against hostile submissions: student-like kit servers written
from the kit's contract (tests/fixtures/hostile/<case>/, on tests/fixtures/common/kitserver.h) that
attack the grader instead of the lab, and folders the tests make (symbolic links, odd
names). Each test asserts the safe outcome and says, in a comment, what the grader of
commit 6bef42e did wrong. A case is copied into tmp_path with kitserver.h and a generated
hostile_gen.h (MARKER: a unique string the case's extra processes carry in their command
line; secret paths). The gradings are grouped (--quick --runs 2 --jobs 2, one per group and
module) so the module takes a few minutes on two cores."""

import contextlib
import csv
import io
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis.grade import records as C
from analysis.grade.trust import sandbox
from analysis.tests.helpers import (
    assert_hostile_zip_unpacked_inside,
    honest_statuses_problems,
    kit_fixture,
    zip_fixture,
)

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

NO_SANDBOX = sandbox.available()
if NO_SANDBOX:
    pytest.skip(f"no sandbox: {NO_SANDBOX}", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
RELEASE = Path(os.environ.get("LOCKBENCH_BIN_DIR", REPO / "build" / "release")).absolute()
WEIGHTS = REPO / "analysis" / "grade_weights.toml"
TOKEN = secrets.token_hex(4)  # this session's markers: lbh<TOKEN><case>, at most 15 chars
QUICK = ["--quick", "--runs", "2", "--no-progress", "--jobs", "2"]
# What a grading whose point is the sandbox (a hog, a filler, a daemon) leaves out: it needs
# the servers started, not every check of them, and each start costs the hostile part's
# work again. The checks themselves are asserted in test_grade.py.
SKIP_ALL = ["--skip", ",".join(C.SKIPPABLE)]
# Beside a starved honest submission: the checks that serve many clients at once stay.
BESIDE = "design,consistency,robustness,probe,pause"
MIB = 1 << 20


def marker(case: str) -> str:
    return f"lbh{TOKEN}{case[:3]}"


def prepare(case: str, dest: Path, **defines) -> Path:
    """A copy of tests/fixtures/hostile/<case> at dest, with kitserver.h and hostile_gen.h
    (MARKER and the given string macros)."""
    kit_fixture(f"hostile/{case}", dest.parent, dest.name)
    defines = {"MARKER": marker(case), **defines}
    (dest / "hostile_gen.h").write_text(
        "".join(f"#define {k} {json.dumps(str(v))}\n" for k, v in defines.items()))
    return dest


def _processes() -> dict:
    """{pid: (ppid, command line)} of every process on the host now."""
    procs = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                procs[int(d.name)] = (ppid, (d / "cmdline").read_bytes())
            except (OSError, IndexError, ValueError):
                continue
    return procs


def _watch(root: int, stop: threading.Event, seen: dict) -> None:
    """Until stop, every 0.2 s: the largest peak resident set (VmHWM) of any process under
    root, with its command line, into seen["kib"], seen["cmd"] (ru_maxrss of the children
    does not see the grading worker: bubblewrap's pid 1 is not reaped by its parent); the
    markers of this session seen on the host into seen["marks"] (a case's processes ran)."""
    seen.update(kib=0, cmd="", marks=set())
    while not stop.wait(0.2):
        procs, kids = _processes(), {}
        for pid, (ppid, _) in procs.items():
            kids.setdefault(ppid, []).append(pid)
        todo = [root]
        while todo:
            pid = todo.pop()
            todo += kids.get(pid, [])
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            hwm = next((int(ln.split()[1]) for ln in status.splitlines()
                        if ln.startswith("VmHWM:")), 0)
            if hwm > seen["kib"] and pid in procs:
                seen.update(kib=hwm, cmd=procs[pid][1].replace(b"\0", b" ")[:200].decode(
                    errors="replace"))
        for _, cmd in procs.values():
            at = cmd.find(f"lbh{TOKEN}".encode())
            if at >= 0:
                seen["marks"].add(cmd[at:at + 14].decode(errors="replace"))


def grade(subs, out: Path, *flags, timeout=900, prefix=()) -> SimpleNamespace:
    """Grades subs into out, watching its processes (_watch: .peak, .marks); the whole
    process group is killed if it does not finish within timeout. prefix: a command the
    grader runs under."""
    cmd = [*prefix, sys.executable, "-m", "analysis", "grade", *map(str, subs), *flags,
           "--out", str(out)]
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    stop, seen = threading.Event(), {}
    watch = threading.Thread(target=_watch, args=(p.pid, stop, seen), daemon=True)
    watch.start()
    try:
        so, se = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail(f"grading {[Path(s).name for s in subs]} did not finish in {timeout} s")
    finally:
        stop.set()
        watch.join()
    return SimpleNamespace(out=out, code=p.returncode, stdout=so.decode(errors="replace"),
                           stderr=se.decode(errors="replace"), marks=seen["marks"],
                           peak={"kib": seen["kib"], "cmd": seen["cmd"]})

def evidence(out: Path, name: str) -> dict:
    f = out / name / "evidence.json"
    log = out / name / "worker.log"
    assert f.is_file(), (f"no {name}/evidence.json: the grading worker died: "
                         + (log.read_text(errors="replace")[-800:] if log.is_file() else ""))
    return json.loads(f.read_text())

def checks(out: Path, name: str) -> dict:
    return {c["id"]: c for c in evidence(out, name).get("checks", [])}


def score(out: Path, name: str) -> float:
    return json.loads((out / name / "results.json").read_text())["score"]


def points(out: Path, name: str) -> dict:
    """{a check's title: its points} of a submission's results.json."""
    return {t["name"]: t["score"]
            for t in json.loads((out / name / "results.json").read_text())["tests"]}


def marked_pids(mark: str) -> list:
    """Processes on the host whose command line holds mark (or whose name is it)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmdline, comm = (d / "cmdline").read_bytes(), (d / "comm").read_text().strip()
        except OSError:
            continue
        if mark.encode() in cmdline or comm == mark[:15]:
            pids.append(int(d.name))
    return pids


def survivors(mark: str, grace_s: float = 3.0) -> list:
    """The marked processes still there grace_s after grading (the kernel ends a pid
    namespace's processes asynchronously); kills them (they are this test's), returns
    their pids."""
    deadline = time.monotonic() + grace_s
    while (left := marked_pids(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


@pytest.fixture(scope="module", autouse=True)
def reap_marked():
    """Whatever a test leaves behind, no marked process of this module survives it."""
    yield
    survivors(f"lbh{TOKEN}", grace_s=0)


def regular_files(root: Path):
    """Every regular file under root, not following symbolic links."""
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if not p.is_symlink() and p.is_file():
                yield p


def containing(root: Path, needles: dict) -> list:
    """'file: label' for each regular file under root holding a needle ({label: bytes})."""
    hits, keep = [], max(map(len, needles.values())) - 1
    for p in regular_files(root):
        with open(p, "rb") as f:
            tail = b""
            while chunk := f.read(16 * MIB):
                data = tail + chunk
                hits += [f"{p.relative_to(root)}: {k}" for k, v in needles.items() if v in data]
                tail = data[-keep:] if keep else b""
    return sorted(set(hits))


def first_line(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.readline().strip()
    except OSError:
        return b""


def tree_size(root: Path) -> tuple:
    """(apparent bytes, allocated bytes) of the regular files under root."""
    st = [p.stat() for p in regular_files(root)]
    return sum(s.st_size for s in st), sum(s.st_blocks * 512 for s in st)


# ---- one grading of most cases ----------------------------------------------------------

@pytest.fixture(scope="module")
def group(tmp_path_factory):
    """forged/honest timing, two symlinked timing files (each main4 pointing into the
    other's output), include -> /etc, up -> .., a daemon, a loud make and the trace
    forgers, graded into one folder by two commands (what each case's tests assert)."""
    base = tmp_path_factory.mktemp("hostile")
    subs = base / "subs"
    canary = base / "secret" / "canary.txt"
    canary.parent.mkdir()
    token = f"CANARY-{secrets.token_hex(16)}"
    canary.write_text(token + "\n")
    names = ["forged_timing", "honest_timing"]
    for case in names:
        prepare(case, subs / case)
    other_secret = {}
    for me, other in (("symlink_a", "symlink_b"), ("symlink_b", "symlink_a")):
        # the layout of commit 6bef42e: a server runs in grades/<name>/runs/<tag>/
        d = prepare("symlink_timing", subs / me, CANARY_PATH=canary,
                    OTHER_LINK=f"../../../{other}/build/main.c")
        other_secret[me] = f"OTHER-SECRET-{me}-{secrets.token_hex(8)}"
        with open(d / "main.c", "a") as f:
            f.write(f"/* {other_secret[me]} */\n")
        names.append(me)
    prepare("tree_links", subs / "etc_link")
    (subs / "etc_link" / "include").symlink_to("/etc")
    prepare("tree_links", subs / "up_link")
    (subs / "up_link" / "up").symlink_to("..")
    for case in ("daemon", "loud_make", *TRACE_FORGERS):
        prepare(case, subs / case)
    files = [*names, "etc_link", "up_link", "daemon", "loud_make"]
    judged = ["forged_timing", "honest_timing", *TRACE_FORGERS]
    # the links, the daemon and the loud make need their servers built and started; the
    # twins are judged on speed, timing and score, the forgers on design: two commands into
    # one output folder
    first = grade([subs / n for n in files if n not in judged], base / "out", *QUICK,
                  "--no-reference", *SKIP_ALL)
    g = grade([subs / n for n in judged], base / "out", *QUICK, "--no-reference",
              "--skip", "consistency,idle,robustness")
    assert first.code == 0, first.stderr[-3000:]
    assert g.code == 0, g.stderr[-3000:]
    g.stdout, g.stderr = first.stdout + g.stdout, first.stderr + g.stderr
    g.marks |= first.marks
    g.peak = max(first.peak, g.peak, key=lambda p: p["kib"])
    g.names, g.canary, g.other_secret = [*files, *TRACE_FORGERS], token, other_secret
    return g


def test_forged_timing_scores_no_better_than_its_honest_twin(group):
    # 6bef42e: the speed check trusted the timing files when they looked plausible, so
    # main2/main4 lines divided by 5 made one-lock servers "5x faster": forged PASS 100,
    # the honest twin FAIL 90 (speed).
    # Check by check: the design check measures locks, not timing lines, and whether it
    # confirms a trace may differ between two gradings of the same design on a busy machine.
    forged, honest = points(group.out, "forged_timing"), points(group.out, "honest_timing")
    assert forged.keys() == honest.keys()
    gained = {k: (forged[k], honest[k]) for k in forged
              if forged[k] > honest[k] and k != C.BY_ID["design"].title}
    speed = checks(group.out, "forged_timing")["speed"]
    assert not gained and speed["status"] != "pass", (gained, speed)


def test_a_symlinked_timing_file_is_refused_and_leaks_nothing(group):
    # 6bef42e: the worker (root, cwd = the repository) read server_output_time_aggregated
    # following the link and quoted the lines as "not a number": /etc/shadow's and
    # grade_weights.toml's first lines in evidence.json and the pages; a dangling link was
    # "no file", not a link.
    needles = {"canary": group.canary.encode()}
    shadow = first_line("/etc/shadow")
    if shadow:
        needles["/etc/shadow line 1"] = shadow
    for i, line in enumerate(WEIGHTS.read_text().splitlines()):
        if len(line.strip()) >= 30:
            needles[f"grade_weights.toml line {i + 1}"] = line.strip().encode()
    problems = containing(group.out, needles)
    for label, text in needles.items():
        if text in (group.stdout + group.stderr).encode():
            problems.append(f"grade command output: {label}")
    for me, other in (("symlink_a", "symlink_b"), ("symlink_b", "symlink_a")):
        theirs = {f"{other}'s main.c": group.other_secret[other].encode()}
        problems += [f"{me}/{h}" for h in containing(group.out / me, theirs)]
        timing = checks(group.out, me).get("timing", {})
        said = " ".join(timing.get("evidence", [])).lower()
        if timing.get("status") != "fail" or "symbolic link" not in said:
            problems.append(f"{me} timing check: {timing.get('status')}: {said[:300]}")
    assert not problems, "\n".join(problems)


def test_a_loud_make_keeps_the_grader_small_and_its_output_is_cut(group):
    # 6bef42e: make's output was captured whole in the worker (200 MB of bytes, decoded and
    # split into lines: over a GB resident), and a passing build showed none of it.
    problems = []
    if group.peak.get("kib", 0) >= 300 * 1024:
        problems.append(f"largest resident set while grading: {group.peak}")
    build = checks(group.out, "loud_make").get("build", {})
    said = " ".join(build.get("evidence", [])).lower()
    if "cut" not in said and "omitted" not in said:
        problems.append(f"build evidence does not say the output was cut: {said[:300]}")
    big = [f"{p}: {p.stat().st_size}" for p in regular_files(group.out / "loud_make")
           if p.stat().st_size > 20 * MIB]
    assert not problems and not big, "\n".join(problems + big)


def test_an_include_link_to_etc_is_graded_without_a_crash_or_quoting_etc(group):
    # 6bef42e: build() chmod-ed every folder of the copy 0777, following include -> /etc:
    # EROFS in the read-only sandbox, the worker died, verdict FAIL "grading", 0 points.
    ev = evidence(group.out, "etc_link")
    assert not ev.get("error"), ev.get("error")
    assert score(group.out, "etc_link") > 0
    assert all(c["status"] == "pass" for c in ev["checks"] if c["id"] in ("build", "binaries"))
    etc = {p: first_line(p) for p in ("/etc/passwd", "/etc/shadow", "/etc/group")}
    hits = containing(group.out, {p: v for p, v in etc.items() if len(v) >= 12})
    assert not hits, hits


def test_an_up_link_does_not_make_the_output_world_writable(group):
    # 6bef42e: the same chmod 0777 followed up -> .. to grades/up_link itself.
    for d in (group.out, group.out / "up_link"):
        assert d.stat().st_mode & 0o002 == 0, f"{d} is world-writable: {oct(d.stat().st_mode)}"


# main2 and main4 of each really lock the whole array with one mutex; main1 and main3 are
# honest. What the design check read for them before the trace had to be confirmed by the
# grader's measurement, and what it must say now.
TRACE_FORGERS = {
    # the real lock through libc's own pthread_mutex_lock beside dummy per-string locks
    # taken through the traced calls: PASS on the trace alone
    "trace_dlsym": "the grader's measurement does not",
    # the trace file deleted and forged (its descriptor emptied and taken over, now):
    # PASS on the forged lines
    "trace_forger": "the grader's measurement does not",
    # $LD_PRELOAD dropped and the program run again: not traced, measured instead (this
    # one was caught then too)
    "trace_reexec": "no usable lock trace",
}


def assert_forged_designs_fail(out: Path) -> None:
    """Each forger's design check is failed (or undetermined, never passed), and main2's
    and main4's lines say why."""
    problems = []
    for case, why in TRACE_FORGERS.items():
        c = checks(out, case)["design"]
        lines = {ln.split(":")[0].split()[0]: ln for ln in c["evidence"]}
        if c["status"] == "pass":
            problems.append(f"{case}: design passed: {c['evidence']}")
        for server in ("main2", "main4"):  # failed, saying why, or at most undetermined
            line = lines.get(server, "")
            if "the measurement agrees" in line or not (why in line
                                                        or line.endswith("undetermined")):
                problems.append(f"{case}: {line}")
        if c["status"] == "fail" and not any("it behaves as one" in f for f in c.get("fix", [])):
            problems.append(f"{case}: the fix does not name the design measured: {c}")
    assert not problems, "\n".join(problems)


def test_a_forged_lock_trace_does_not_pass_the_design_check(group):
    assert_forged_designs_fail(group.out)


def test_a_daemon_does_not_outlive_grading(group):
    # 6bef42e: passes (each server's bubblewrap has its own pid namespace, which ends with
    # the server); kept for the rewritten sandbox.
    assert (group.out / "daemon" / "evidence.json").is_file()
    assert marker("daemon") in group.marks, "no daemon seen while grading: the test is void"
    assert not survivors(marker("daemon")), "the daemon is still running after grading"


# ---- gradings of their own --------------------------------------------------------------

def test_a_process_holder_does_not_starve_a_submission_graded_beside_it(tmp_path,
                                                                         kit_fixtures):
    # 6bef42e: RLIMIT_NPROC counts every process of user nobody on the machine, and both
    # submissions ran as nobody: the holder's ~1990 sleeping processes left the correct
    # submission no threads, and it failed.
    holder = prepare("process_holder", tmp_path / "process_holder")
    g = grade([kit_fixtures / "correct", holder], tmp_path / "out", *QUICK, "--no-reference",
              "--skip", BESIDE)
    left = survivors(marker("process_holder"))
    assert g.code == 0, g.stderr[-3000:]
    assert marker("process_holder") in g.marks, "no holder process seen: the test is void"
    st = {k: c["status"] for k, c in checks(g.out, "correct").items()}
    assert not honest_statuses_problems(st, BESIDE), st
    assert not left, f"{len(left)} of the holder's processes outlived grading"


def test_a_process_holder_in_another_grade_command_does_not_starve_this_one(tmp_path,
                                                                             kit_fixtures):
    # Two grade commands on one host: were both to run submissions as one user (nobody),
    # one command's holder would spend the other's RLIMIT_NPROC. Each grading takes a slot
    # (uids of its own) with a lock file that the other command sees.
    holder = prepare("process_holder", tmp_path / "process_holder")
    with ThreadPoolExecutor(2) as pool:
        hostile = pool.submit(grade, [holder], tmp_path / "out_h", *QUICK, "--no-reference",
                              *SKIP_ALL)
        time.sleep(2)  # the holder is building and forking while the honest one is graded
        honest = pool.submit(grade, [kit_fixtures / "correct"], tmp_path / "out_c", *QUICK,
                             "--no-reference", "--skip", BESIDE)
        g, h = honest.result(), hostile.result()
    assert g.code == 0 and h.code == 0, (g.stderr[-2000:], h.stderr[-2000:])
    assert marker("process_holder") in h.marks, "no holder process seen: the test is void"
    st = {k: c["status"] for k, c in checks(g.out, "correct").items()}
    assert not honest_statuses_problems(st, BESIDE), st
    assert not survivors(marker("process_holder"))


def test_a_memory_hog_meets_a_memory_limit_and_is_gone_after_grading(tmp_path):
    # 6bef42e: memory was bounded per process by address space only (RLIMIT_AS 16 GiB):
    # twelve hogs of 3 GiB ran side by side unhindered (the fixture's valve stops them at
    # half the machine), and the evidence named no memory limit.
    hog = prepare("memory_hog", tmp_path / "memory_hog")
    g = grade([hog], tmp_path / "out", *QUICK, "--no-reference", *SKIP_ALL)
    left = survivors(marker("memory_hog"))
    assert g.code == 0, g.stderr[-3000:]
    assert marker("memory_hog") in g.marks, "no hog process seen: the test is void"
    memory = evidence(g.out, "memory_hog").get("sandbox", {}).get("memory")
    assert memory, "the evidence does not say which memory limit applied"
    assert not left, f"{len(left)} hog process(es) outlived grading"


def _tmp_entries() -> set:
    return {p for d in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(d)
            for p in Path(d).iterdir()}


def test_a_disk_filler_leaves_a_small_output_and_nothing_elsewhere(tmp_path):
    # 6bef42e: every server's working folder was kept in grades/<name>/runs/: up to 1 GiB
    # per server start (tens of GiB), and the 4 GiB sparse file was copied with its holes
    # filled.
    sub = prepare("disk_filler", tmp_path / "disk_filler")
    (sub / "sparse.bin").touch()
    os.truncate(sub / "sparse.bin", 4 << 30)
    out = tmp_path / "out"
    before = _tmp_entries()
    try:
        g = grade([sub], out, *QUICK, "--no-reference", *SKIP_ALL)
        assert g.code == 0, g.stderr[-3000:]
        assert (out / "disk_filler" / "evidence.json").is_file()
        apparent, allocated = tree_size(out)
        left = []
        for p in sorted(_tmp_entries() - before):
            size = tree_size(p)[1] if p.is_dir() and not p.is_symlink() else p.lstat().st_size
            if size > MIB or any(w in p.name for w in ("lockbench", "grade", "fill_", "disk")):
                left.append(f"{p}: {size} bytes")
        assert apparent < 20 * MIB and allocated < 20 * MIB, (apparent, allocated)
        assert not left, left
    finally:
        shutil.rmtree(out, ignore_errors=True)  # GiBs when the grader kept them


# ---- names ------------------------------------------------------------------------------

# '=HYPERLINK("http://x","y")' cannot be one folder (its '/'): the formula without them
NAMES = ["a/alice", "b/alice", "c/alice-2", "reference", "javascript:alert(1)",
         "x\nalice: PASS 100 of 100", '=HYPERLINK("http:x","y")']


class _Hrefs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        self.hrefs += [v for k, v in attrs if k == "href" and v is not None]


def _summary(out: Path) -> list:
    return list(csv.DictReader(io.StringIO((out / "summary.csv").read_text(), newline="")))


def test_odd_folder_names_get_their_own_rows_safe_cells_and_links(tmp_path):
    # 6bef42e: b/alice became alice-2, as did c/alice-2 (one folder, one row graded twice);
    # the newline name printed a console line "alice: PASS 100 of 100: FAIL 0/10";
    # '=HYPERLINK(...)' was a formula cell; index.html linked to
    # 'javascript:alert(1)/verdict.html'; a submission named reference wrote its evidence
    # into the reference measurement's folder, so the next run re-measured the reference
    # over it and showed that submission's verdict from the reference's evidence (FAIL,
    # then PASS).
    subs = []
    for n in NAMES:
        (tmp_path / "subs" / n).mkdir(parents=True)
        (tmp_path / "subs" / n / "README").write_text("no Makefile, no binaries\n")
        subs.append(tmp_path / "subs" / n)
    ref = all((RELEASE / m).is_file() for m in ("main1", "main2", "main3", "main4"))
    flags = [*QUICK, *(["--bin-dir", RELEASE] if ref else ["--no-reference"])]
    out = tmp_path / "out"
    runs, reference = [], []
    for _ in range(2):
        runs.append(grade(subs, out, *flags, timeout=600))
        reference += [(r["verdict"], r["score"]) for r in _summary(out)
                      if any(c == "reference" or c.endswith("/reference") for c in r.values())]
    problems = [f"run {i + 1}: exit {g.code}: {g.stderr[-500:]}" for i, g in enumerate(runs)
                if g.code != 0]
    rows = _summary(out)
    folders = [p.parent.name for p in out.glob("*/results.json")]
    if len(rows) != len(NAMES) or len({r["submission"] for r in rows}) != len(NAMES):
        problems.append(f"summary.csv rows: {[r['submission'] for r in rows]}")
    if len(folders) != len(NAMES):
        problems.append(f"output folders with results.json: {sorted(folders)}")
    problems += [f"console line {ln!r}" for g in runs for ln in g.stdout.splitlines()
                 if ln.startswith("alice: PASS")]
    problems += [f"row {r}" for r in rows if r["submission"].startswith("alice: PASS")]
    problems += [f"cell {c!r}" for r in rows for c in r.values() if c and c[0] in "=+-@"]
    parser = _Hrefs()
    parser.feed((out / "index.html").read_text())
    for h in parser.hrefs:
        if ":" in h or h.startswith("/") or not (out / urllib.parse.unquote(h)).is_file():
            problems.append(f"href {h!r}")
    if ref and (len(reference) != 2 or reference[0] != reference[1]):
        problems.append(f"the submission named reference, run 1 / run 2: {reference}")
    assert not problems, "\n".join(problems)


# ---- the race detector ------------------------------------------------------------------

def test_race_finds_no_lock_and_a_server_that_does_not_start_is_no_pass(tmp_path,
                                                                         kit_fixtures):
    # 6bef42e: a server that did not start under the ThreadSanitizer build was "not
    # checked" and the check still passed: tsan_no_start got races PASS without running.
    tsan = prepare("tsan_no_start", tmp_path / "tsan_no_start")
    g = grade([kit_fixtures / "no_lock", tsan], tmp_path / "out", *QUICK, "--no-reference",
              "--race", *SKIP_ALL)
    assert g.code == 0, g.stderr[-3000:]
    races = {n: checks(g.out, n).get("races", {}) for n in ("no_lock", "tsan_no_start")}
    assert races["no_lock"].get("status") == "fail", races["no_lock"]
    assert races["tsan_no_start"].get("status") not in ("pass", None), races["tsan_no_start"]


def _state(pid: int) -> str:
    """The process's state letter ('' when it is gone): Z and X have ended, run nothing."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _live(pid: int) -> bool:
    return _state(pid) not in ("", "Z", "X")


def _kitref_or_marked(mark: bytes) -> tuple:
    """({pid: uid} of the grader's kitref1/kitref4 servers, {pid: uid} of processes whose
    command line holds mark) on the host now."""
    refs, marked = {}, {}
    for d in os.scandir("/proc"):
        if not d.name.isdigit():
            continue
        try:
            with open(f"/proc/{d.name}/cmdline", "rb") as f:
                cmd = f.read(4096)
            uid = d.stat().st_uid
        except OSError:
            continue
        if mark in cmd:
            marked[int(d.name)] = uid
        elif os.path.basename(cmd.split(b"\0", 1)[0]) in (b"kitref1", b"kitref4"):
            refs[int(d.name)] = uid
    return refs, marked


def _watch_turns(mark: str, stop: threading.Event, seen: dict) -> None:
    """Until stop, every 0.05 s: whether a kitref server and a live process marked `mark`
    run as one uid (the submission's: the grader starts its own servers as that uid too)
    at once. A look at /proc takes milliseconds, during which a turn may end and the next
    begin, so an overlap counts only when, after that look, the kitref is seen alive and
    then the marked process still alive: both were alive at the same moment. seen:
    "ref_looks" (looks that saw a kitref of a uid that ran a marked process),
    "overlaps" (what was seen running together), "marked" (pids seen marked)."""
    seen.update(ref_looks=0, overlaps=[], marked=set())
    uids: set = set()
    while not stop.wait(0.05):
        refs, marked = _kitref_or_marked(mark.encode())
        seen["marked"] |= set(marked)
        uids |= set(marked.values())
        seen["ref_looks"] += any(u in uids for u in refs.values())
        for ref, uid in refs.items():
            if not _live(ref):
                continue
            both = [pid for pid, u in marked.items() if u == uid and _live(pid)]
            if both:
                seen["overlaps"].append(f"kitref pid {ref} and marked pids {both}, uid {uid}")


@pytest.fixture(scope="module")
def container_group(tmp_path_factory, kit_fixtures):
    """In container mode, in one command: the .pth planter first, then the trace forgers,
    then an honest submission (graded well after the planter's make ran), then a 2024+
    main that leaves a CPU hog behind each time it starts, watched while it is graded
    (_watch_turns: .turns)."""
    if os.geteuid() != 0:
        pytest.skip("container mode needs root")
    base = tmp_path_factory.mktemp("container")
    subs = [prepare("pth_planter", base / "subs" / "planter")]
    subs += [prepare(case, base / "subs" / case) for case in TRACE_FORGERS]
    hog = prepare("stray_hog", base / "subs" / "stray_hog")
    planted, ran = [], []
    stop, turns = threading.Event(), {}
    watch = threading.Thread(target=_watch_turns, args=(marker("stray_hog"), stop, turns),
                             daemon=True)
    watch.start()
    try:
        # the honest one handed in as a zip: container mode unpacks it too
        correct = zip_fixture(kit_fixtures / "correct", base / "correct.zip", top="correct",
                              hostile=True)
        # the planter's point is its make, the forgers' the design check, the hog's the
        # concurrency check and the clock probe, the honest one's its workload
        g = grade([*subs, correct, hog], base / "out", *QUICK, "--no-reference",
                  "--sandbox", "container", "--skip", "consistency,idle,speed,robustness,pause")
    finally:
        stop.set()
        watch.join()
        planted = list(Path("/tmp/.local/lib").glob(
            f"python3*/site-packages/{marker('pth_planter')}.pth"))
        ran = list(Path("/tmp").glob(f"{marker('pth_planter')}-ran-as-*"))
        for f in [*planted, *ran]:
            f.unlink()
    assert g.code == 0, g.stderr[-3000:]
    g.planted, g.ran, g.turns = planted, ran, turns
    g.hogs_left = live_marked(marker("stray_hog"))
    survivors(marker("stray_hog"), grace_s=0)
    return g


def live_marked(mark: str, grace_s: float = 3.0) -> list:
    """The marked processes still running (not ended and waiting to be reaped) grace_s
    after grading."""
    deadline = time.monotonic() + grace_s
    while (left := [p for p in marked_pids(mark) if _live(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.root
def test_a_pth_file_planted_in_a_shared_tmp_runs_in_no_grader_process(container_group):
    # Container mode ran the launcher (root) and the worker with HOME=/tmp and Python's user
    # site folder on: a .pth file a submission's make left in /tmp/.local ran inside both
    # during the next grading of the same command, as uid 0.
    # Where the container allows a mount namespace the submission's /tmp is its own now,
    # so the file does not even reach the container's /tmp; elsewhere it does, and no
    # grader Python reads it (test_grade_sandbox.py: python_argv's isolation).
    g = container_group
    tmp = evidence(g.out, "planter")["sandbox"]["scratch"]
    if "/tmp its own" in tmp:
        assert not g.planted, f"the planter wrote into the container's /tmp: {g.planted}"
    else:
        assert g.planted, "the fixture planted nothing: the test would prove nothing"
    assert not g.ran, f"a grader process ran the planted .pth file: {g.ran}"
    assert checks(g.out, "correct")["workload"]["status"] == "pass"
    assert_hostile_zip_unpacked_inside(checks(g.out, "correct")["build"])


@pytest.mark.root
def test_a_forged_lock_trace_does_not_pass_the_design_check_in_container_mode(
        container_group):
    assert_forged_designs_fail(container_group.out)
    assert checks(container_group.out, "correct")["design"]["status"] != "fail"


@pytest.mark.root
def test_nothing_a_main_left_behind_runs_during_the_graders_own_servers_turns(
        container_group):
    # In container mode no pid namespace ends with a server: a CPU hog that main started
    # with setsid ran on through the turns of kitref1 and kitref4 it was timed against in
    # the concurrency check and the clock probe, skewing both, until grading ended.
    g = container_group
    assert g.turns["marked"], "no hog seen while grading: the test is void"
    assert g.turns["ref_looks"], "no turn of kitref1/kitref4 seen: the test is void"
    assert not g.turns["overlaps"], g.turns["overlaps"][:5]
    # what was stopped is said, with the check it was stopped for
    c = checks(g.out, "stray_hog")
    said = "\n".join(c["concurrency"]["evidence"])
    assert "that main left running after its server was stopped" in said, said
    assert any(ln.startswith("clock probe: ") and "left running" in ln
               for ln in c["timing"]["evidence"]), c["timing"]["evidence"]
    assert not g.hogs_left, f"hogs still running after grading: {g.hogs_left}"


# A mount namespace of the grader's own where every cgroup mount is read-only: no cgroup
# can be made, as in most platforms' containers.
NO_CGROUP = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             'for m in $(awk \'$9 ~ /^cgroup/ {print $5}\' /proc/self/mountinfo); do '
             'mount -o remount,bind,ro "$m" || exit 1; done; exec "$@"', "sh"]


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="container mode needs root")
def test_a_pid_hopping_daemon_does_not_outlive_grading_without_a_cgroup(tmp_path):
    # Without a writable cgroup the clean-up listed the uid's processes and killed those
    # pids: a daemon that forks and exits every millisecond was always one hop ahead (17,075
    # hops, alive 35 s past grading).
    hopper = prepare("pid_hopper", tmp_path / "subs" / "hopper")
    once = Path(f"/var/tmp/{marker('pid_hopper')}.hop")  # the daemon was started
    try:
        g = grade([hopper], tmp_path / "out", "--quick", "--runs", "2", "--no-progress",
                  "--no-reference", "--sandbox", "container", *SKIP_ALL, prefix=NO_CGROUP)
        assert g.code == 0, g.stderr[-3000:]
        sb = evidence(g.out, "hopper")["sandbox"]
        assert "no cgroup" in sb["memory"], sb  # the case this test is about
        # a pid that lives a millisecond is seldom caught in a look at /proc: the file
        # that the daemon's parent made before starting it says that it ran
        assert once.exists() or marker("pid_hopper") in g.marks, \
            "no hopper started while grading: the test is void"
        assert not survivors(marker("pid_hopper"), grace_s=1.0), \
            "the pid-hopping daemon is still running after grading"
    finally:
        with contextlib.suppress(FileNotFoundError):
            once.unlink()
