"""`lockbench compare` (analysis/compare/): the statistics and
verdicts on given numbers; every refusal, one line and exit 2 with nothing run; the
program's ELF headers checked, hostile ones refused in one line, never an error; and real
programs compared under real swap locks: zstd with its round trip as the check, memcached
under memcaslap (the metric its TPS line), sysbench's mutex test, a program that one lock
breaks. The tests say what happened (rows, exit statuses, the check, the refusals), never
which lock wins; each real comparison is kept to 2 rounds and 2 or 3 locks."""

import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis import elf
from analysis import kernel_sockets as ks
from analysis.compare import cli as compare
from analysis.compare import report as R
from analysis.launch.procs import pick_port
from analysis.stats import median_ci
from analysis.tests.helpers import PY, RELEASE, REPO, elf_file

LIB = RELEASE / "liblockprof.so"
WALL = {"kind": "wall", "of": "program", "regex": None, "lower_is_better": True}
TPS = {"kind": "regex", "of": "load", "regex": "TPS: ([0-9]+)", "lower_is_better": False}


def run_compare(*args, cwd: Path, timeout=300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([PY, "-m", "analysis.compare", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def need(*tools) -> None:
    """The programs these tests compare come with the bootstrap (./lockbench setup)."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed (./lockbench setup installs them: "
                    "apt-get install memcached libmemcached-tools zstd sysbench)")
    if not LIB.is_file():
        pytest.fail(f"{LIB} is not built (cmake --build --preset release)")


def rows_of(doc: dict) -> dict:
    return {r["name"]: r for r in doc["rows"]}


def assert_rounds(doc: dict, names: list, rounds: int) -> None:
    """Every round ran every configuration once; each row has a value per round unless it
    broke, and a median then."""
    assert [r["name"] for r in doc["rows"]] == names
    assert len(doc["orders"]) == rounds
    assert all(sorted(o) == sorted(names) for o in doc["orders"])
    for r in doc["rows"]:
        if r["broke"] is None:
            assert r["runs"] == rounds and all(v > 0 for v in r["values"]), r
            assert min(r["values"]) <= r["median"] <= max(r["values"])


# ---- the statistics, on given numbers ----------------------------------------------------------

def test_the_interval_is_the_projects_median_rule():
    xs = [5.0, 1.0, 4.0, 2.0, 3.0, 9.0, 7.0, 8.0, 6.0]
    lo, mid, hi = median_ci(xs, 0.05)
    assert R.interval(xs) == (mid, lo, hi) == (5.0, 2.0, 8.0)
    assert R.MIN_ROUNDS == 6
    assert R.interval([1.0, 2.0, 3.0, 4.0, 5.0]) == (3.0, None, None)
    assert R.interval([]) == (None, None, None)


def test_factors_say_how_many_times_better_round_by_round():
    a, b = [1.0, 2.0, None, 4.0], [2.0, 2.0, 3.0, 1.0]
    assert R.factors(a, b, lower_is_better=True) == [2.0, 1.0, 0.25]
    assert R.factors(a, b, lower_is_better=False) == [0.5, 1.0, 4.0]
    assert R.ratios(a, b) == [0.5, 1.0, 4.0]


def test_verdicts_in_words():
    assert R.verdict((1.18, 1.09, 1.27), WALL) == "1.18x faster than pthread (1.09-1.27), clearly"
    assert R.verdict((0.5, 0.4, 0.8), TPS) == "2.00x worse than pthread (1.25-2.50), clearly"
    assert R.verdict((1.02, 0.95, 1.1), WALL).startswith("a tie with pthread: 1.02x (0.95-1.10)")
    assert "not established" in R.verdict((1.3, None, None), WALL)
    assert R.verdict((0.8, None, None), WALL).startswith("1.25x slower than pthread")


def summary(values: dict, metric=WALL) -> tuple:
    rows = R.summarise(list(values), values, {}, metric)
    return rows, R.best(rows, values, metric)


def test_the_best_lock_clearly_and_in_a_tie():
    base = [10.0, 11, 10, 12, 10, 11, 10]
    values = {"native": base, "pthread": base, "mcs": [v / 2 for v in base],
              "clh": [v * 2 for v in base]}
    rows, b = summary(values)
    assert b["name"] == "mcs" and b["ties"] == [] and b["established"]
    assert R.best_line(b, WALL).startswith("best: mcs, clearly")
    assert rows["mcs"]["verdict"].startswith("2.00x faster than pthread")
    assert rows["clh"]["verdict"].startswith("2.00x slower than pthread")
    assert rows["pthread"]["vs_native"] == (1.0, 1.0, 1.0)
    values["clh"] = [v / 2 for v in base[:3]] + [v / 1.9 for v in base[3:]]
    rows, b = summary(values)
    assert b["name"] == "mcs" and b["ties"] == ["clh"]
    assert "a tie with clh" in R.best_line(b, WALL)


def test_a_broken_lock_is_left_out_of_the_ranking():
    base = [10.0] * 6
    values = {"native": base, "pthread": base, "mcs": [1.0] + [None] * 5}
    rows = R.summarise(list(values), values, {"mcs": "exit status 1"}, WALL)
    b = R.best(rows, values, WALL)
    assert b["name"] == "pthread" and rows["mcs"]["broke"] == "exit status 1"
    head, table = R.table_rows(rows, WALL)
    assert table[2] == ["mcs", "1", "broke the program: exit status 1"]
    doc = {"command": ["x"], "rounds": 6, "metric": WALL, "rows": rows, "best": b,
           "profile": None}
    assert "broke the program" in R.markdown(doc)
    assert json.loads(json.dumps(R.json_doc(doc)))["rows"][2]["broke"] == "exit status 1"


# ---- refused before anything runs --------------------------------------------------------------

@pytest.fixture(scope="module")
def static_program(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("static")
    (d / "s.c").write_text("int main(void) { return 0; }\n")
    p = subprocess.run(["gcc", "-static", "-o", str(d / "s"), str(d / "s.c")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return d / "s"


def test_refusals_are_one_line_and_exit_2_with_nothing_run(static_program, tmp_path, capsys):
    ran = tmp_path / "ran"
    prog = ("--", "sh", "-c", f"touch {ran}")
    cases = {
        ("--locks", "spin", *prog): "unknown mutex lock 'spin'",
        ("--locks", "ticket", *prog): "now called 'ticketlock'",
        ("--locks", "pflock", *prog): "unknown mutex lock 'pflock'",
        ("--locks", "mcs,,clh", *prog): "empty item",
        ("--rwlocks", "seqlock", *prog): "unknown rwlock 'seqlock'",
        ("--rwlocks", "flat-combining", *prog): "flat combining cannot replace",
        ("--rounds", "0", *prog): "out of range",
        ("--rounds", "1e3", *prog): "not a decimal integer",
        ("--timeout", "nan", *prog): "not a decimal number",
        ("--timeout", "0", *prog): "out of range",
        ("--port", "0x10", "--load", "true", *prog): "not a decimal integer",
        ("--top", "-1", *prog): "out of range",
        (): "no program to run",
        ("--",): "no program to run",
        ("--", "/nonexistent/prog"): "not found",
        ("--", "no-such-program-anywhere"): "not found on PATH",
        ("--", static_program): "statically linked",
        ("--load", "true", *prog): "--load needs --port",
        ("--port", "11311", *prog): "--port needs --load",
        ("--metric", "TPS: [0-9]+", *prog): "has no capturing group",
        ("--metric", "TPS: ([0-9]+", *prog): "not a regular expression",
        ("--lower-is-better", *prog): "--lower-is-better needs --metric",
        ("--check", " ", *prog): "an empty command",
        ("--plot", tmp_path / "p.svg", *prog): "ends in .png",
        ("--json", "/nonexistent/dir/c.json", *prog): "does not exist",
    }
    for args, said in cases.items():
        code, err = in_process(capsys, *args)
        lines = err.splitlines()
        assert code == 2 and len(lines) == 1 and said in lines[0], (args, err)
        assert not ran.exists(), args
    p = run_compare("--locks", "spin", *prog, cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and not ran.exists(), p.stderr


def test_pthread_asked_for_is_the_row_every_comparison_has_said_once():
    a = compare.parse(["--locks", "pthread,mcs", "--", "true"])
    assert "always a row" in compare.always_a_row(a) and compare.always_a_row(a) == ""
    assert [c.name for c in compare.configs(a)] == ["native", "pthread", "mcs"]
    a = compare.parse(["--locks", "mcs", "--", "true"])
    assert compare.always_a_row(a) == "" and a.locks == ["mcs"]


NEITHER = "is neither an ELF program nor a script"
FOREIGN = "is built for another architecture than the interposer liblockprof.so"


def linkage(program: Path, lib: Path) -> str | None:
    """What check_linkage says of the program: None when it may be preloaded."""
    try:
        compare.P.check_linkage(program, lib)
    except compare.P.RefusedError as e:
        return str(e)
    return None


@pytest.mark.parametrize("data, said", [
    pytest.param(elf_file([elf.PT_LOAD, elf.PT_INTERP]), None, id="dynamic"),
    pytest.param(elf_file([elf.PT_INTERP], ident=b"\x7fELF\x02\x02\x01"), None,
                 id="big-endian"),
    pytest.param(b"#!/bin/sh\nexit 0\n", None, id="script"),
    pytest.param(elf_file([elf.PT_LOAD]), "is statically linked", id="static"),
    pytest.param(elf_file([elf.PT_INTERP], machine=183), FOREIGN, id="another-machine"),
    pytest.param(elf_file(ident=b"\x7fELF\x01\x01\x01"), FOREIGN, id="32-bit"),
    pytest.param(b"hello\n" * 20, NEITHER, id="text"),
    pytest.param(elf_file()[:63], NEITHER, id="header-cut"),
    pytest.param(elf_file([elf.PT_LOAD, elf.PT_INTERP])[:100], NEITHER, id="table-cut"),
    pytest.param(elf_file([elf.PT_INTERP], phoff=1 << 63), NEITHER, id="table-far-past-end"),
    pytest.param(elf_file([elf.PT_INTERP], phentsize=0), NEITHER, id="entry-size-0"),
    pytest.param(elf_file([elf.PT_INTERP], ident=b"\x7fELF\x03\x01\x01"), NEITHER,
                 id="class-3"),
])
def test_the_program_is_checked_from_its_elf_headers(tmp_path, data, said):
    lib = tmp_path / "liblockprof.so"
    lib.write_bytes(elf_file(machine=62))
    (tmp_path / "prog").write_bytes(data)
    got = linkage(tmp_path / "prog", lib)
    assert got == said if said is None else said in got, got


def test_a_hostile_program_or_interposer_gets_one_refusal_never_an_error(tmp_path):
    lib, prog = tmp_path / "liblockprof.so", tmp_path / "prog"
    lib.write_bytes(b"not an ELF file")   # no program matches it
    prog.write_bytes(elf_file([elf.PT_INTERP]))
    assert FOREIGN in linkage(prog, lib)
    lib.write_bytes(elf_file(machine=62))
    good = elf_file([elf.PT_LOAD, elf.PT_INTERP, elf.PT_DYNAMIC])
    rng = random.Random(2024)
    kinds = (NEITHER, FOREIGN, "is statically linked")
    said = set()
    for i in range(600):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        prog.write_bytes(bytes(data[:rng.randrange(len(data))] if i % 3 == 0 else data))
        got = linkage(prog, lib)
        said.add(got if got is None else next((k for k in kinds if k in got), got))
    assert said == {None, *kinds}, said


def in_process(capsys, *args) -> tuple:
    """(exit status, stderr) of compare.main in this process (argparse exits)."""
    try:
        code = compare.main([str(a) for a in args])
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


def test_help_answers_at_once_naming_every_lock():
    p = subprocess.run([str(REPO / "lockbench"), "compare", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "usage: lockbench compare" in p.stdout
    for name in compare.P.MUTEX_LOCKS:
        assert name in p.stdout


# ---- real programs -----------------------------------------------------------------------------

@pytest.mark.slow
def test_failures_after_the_start_are_one_line_and_exit_1(tmp_path):
    need()
    cases = {
        ("--metric", "TPS: ([0-9]+)", "--", "true"): "no run's output matched --metric",
        ("--check", "false", "--", "true"): "fails without the preload: the check exited with "
                                            "status 1",
        ("--timeout", "0.5", "--", "sleep", "30"): "ran longer than --timeout 0.5 s",
        ("--port", pick_port(), "--load", "true", "--", "false"): "before listening on port",
    }
    for args, said in cases.items():
        p = run_compare("--rounds", "1", "--locks", "mcs", "--top", "0", *args, cwd=tmp_path)
        lines = p.stderr.splitlines()
        assert p.returncode == 1 and lines and said in lines[-1], (args, p.stderr)
        assert "Traceback" not in p.stderr


UNLOCK_ELSEWHERE = r"""
#include <pthread.h>
#include <stdio.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static void* unlock(void* arg) { return (void*)(long)pthread_mutex_unlock(&m); }
int main(void) {
  pthread_t t;
  void* err;
  pthread_mutex_lock(&m);
  pthread_create(&t, 0, unlock, 0);
  pthread_join(t, &err);
  if (err != 0) { printf("unlock from another thread refused: %ld\n", (long)err); return 1; }
  return 0;
}
"""


@pytest.mark.slow
def test_a_lock_that_breaks_the_program_is_named_and_left_out(tmp_path):
    """docs/profile.md: an MCS mutex unlocked by another thread than its locker is refused
    (EPERM), which glibc allows and a ticket lock too: this program breaks under mcs only."""
    need()
    (tmp_path / "u.c").write_text(UNLOCK_ELSEWHERE)
    subprocess.run(["gcc", "-O2", "-pthread", "-o", "u", "u.c"], cwd=tmp_path, check=True)
    p = run_compare("--rounds", "2", "--locks", "mcs,ticketlock", "--json", "c.json", "--",
                    "./u", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    rows = rows_of(doc)
    assert rows["mcs"]["broke"] == ("exited with status 1: unlock from another thread refused: "
                                    "1 (round 1)")
    assert rows["mcs"]["runs"] == 0 and rows["ticketlock"]["broke"] is None
    assert doc["best"]["name"] != "mcs" and "mcs" not in doc["best"]["against"]
    assert re.search(r"^mcs +0 +broke the program: exited with status 1", p.stdout, re.M)


@pytest.mark.slow
def test_zstd_with_its_round_trip_as_the_check(tmp_path):
    need("zstd")
    data = b"".join(b"%d lockbench compare %x\n" % (i, i * 2654435761 % 2**32)
                    for i in range(150_000))
    (tmp_path / "in").write_bytes(data)
    p = run_compare("--rounds", "2", "--locks", "mcs,futex-mutex", "--check",
                    "zstd -q -d -c out | cmp - in", "--json", "c.json", "--markdown", "c.md",
                    "--plot", "c.png", "--", "zstd", "-T2", "-q", "-f", "in", "-o", "out",
                    cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    assert_rounds(doc, ["native", "pthread", "mcs", "futex-mutex"], 2)
    assert doc["metric"]["kind"] == "wall" and doc["best"] is not None
    assert all(r["broke"] is None for r in doc["rows"]), p.stdout
    out = subprocess.run(["zstd", "-q", "-d", "-c", "out"], cwd=tmp_path, capture_output=True)
    assert out.stdout == data
    assert "## Lock comparison" in (tmp_path / "c.md").read_text()
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("native", "pthread", "mcs", "futex-mutex"):
        assert any(line.startswith(name + " ") for line in p.stdout.splitlines()), name
    assert "why: the most contended locks of one profiling run under pthread" in p.stdout


@pytest.mark.slow
def test_memcached_under_memcaslap_the_metric_its_tps_line(tmp_path):
    need("memcached", "memcaslap")
    port = pick_port()
    user = ["-u", "root"] if os.geteuid() == 0 else []
    p = run_compare("--rounds", "2", "--locks", "mcs,ttas-backoff", "--port", port, "--load",
                    f"memcaslap -s 127.0.0.1:{port} -T 2 -c 16 -t 1s", "--metric",
                    r"TPS: ([0-9]+)", "--json", "c.json", "--", "memcached", *user, "-l",
                    "127.0.0.1", "-p", port, "-U", "0", "-t", "2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    assert_rounds(doc, ["native", "pthread", "mcs", "ttas-backoff"], 2)
    assert doc["metric"] == {"kind": "regex", "of": "load", "regex": "TPS: ([0-9]+)",
                             "lower_is_better": False}
    assert all(r["broke"] is None for r in doc["rows"]), p.stdout
    assert "lock object(s) in 1 process(es)" in doc["profile"]["summary"], doc["profile"]
    assert port not in ks.listening_ports()   # every server stopped


@pytest.mark.slow
def test_sysbench_mutex_by_wall_time_and_by_its_total_time(tmp_path):
    need("sysbench")
    bench = ["--", "sysbench", "mutex", "--threads=2", "run"]
    p = run_compare("--rounds", "2", "--locks", "ticketlock,clh", "--rwlocks", "pflock",
                    "--json", "w.json", *bench, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "w.json").read_text())
    assert_rounds(doc, ["native", "pthread", "ticketlock", "clh", "rw:pflock"], 2)
    configs = {c["name"]: c for c in doc["configs"]}
    assert configs["clh"]["swap"] == "clh" and configs["clh"]["swap_rw"] == "pthread"
    assert configs["rw:pflock"]["swap"] is None and configs["rw:pflock"]["swap_rw"] == "pflock"
    p = run_compare("--rounds", "2", "--locks", "mcs", "--top", "0", "--metric",
                    r"total time:\s+([0-9.]+)s", "--lower-is-better", "--json", "t.json",
                    *bench, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    assert_rounds(doc, ["native", "pthread", "mcs"], 2)
    assert doc["metric"]["lower_is_better"] and doc["profile"] is None
