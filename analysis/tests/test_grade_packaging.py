"""`python -m analysis grade` on submissions as a class really hands them in (docs/grading.md,
the build check): made by the test from the honest fixtures (tests/fixtures/correct and
the timing patterns of tests/fixtures/hostile, each with kitserver.h beside its main.c),
graded once together (--quick --runs 2 --jobs 2), each with its expected per-check
verdicts."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.grade import records as C
from analysis.grade.trust import sandbox
from analysis.tests.helpers import honest_statuses_problems, kit_fixture

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

NO_SANDBOX = sandbox.available()
if NO_SANDBOX:
    pytest.skip(f"no sandbox: {NO_SANDBOX}", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
MACHO = b"\xcf\xfa\xed\xfe" + bytes(60)
PER_SERVER = ("cmdline", "initial", "workload", "consistency", "idle", "timing")


def _correct(dest: Path) -> Path:
    return kit_fixture("correct", dest.parent, dest.name)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} has no {old!r}: the case would not be made"
    path.write_text(text.replace(old, new, 1))


def _first_only(d: Path) -> None:
    _edit(d / "Makefile", "all: main1", "first: main1\nall: main1")


def _main_all(d: Path) -> None:
    (d / "Makefile").write_text(
        "main: main.c\n\t$(CC) -O2 -DVARIANT=1 -o main main.c -lpthread\n"
        "all: main main2 main3 main4\n"
        "main2 main3 main4: main%: main.c\n\t$(CC) -O2 -DVARIANT=$* -o $@ main.c -lpthread\n")


def _fcommon(d: Path) -> None:
    # a global defined (not declared extern) in a header that two files include
    (d / "g.h").write_text("int shared_counter;\n")
    (d / "other.c").write_text('#include "g.h"\nint bump(void) { return ++shared_counter; }\n')
    src = (d / "main.c").read_text()
    (d / "main.c").write_text('#include "g.h"\n' + src)
    _edit(d / "Makefile", "main.c $(LDFLAGS)", "main.c other.c $(LDFLAGS)")


def _fcommon_objects(d: Path) -> None:
    # the same, compiled to objects first and linked after: the failed make leaves the
    # objects up to date, so building again with -fcommon must start from scratch
    _fcommon(d)
    (d / "Makefile").write_text(
        "all: main1 main2 main3 main4\n"
        "main1 main2 main3 main4: main%: main%.o other.o\n\t$(CC) -o $@ $^ -lpthread\n"
        "main1.o main2.o main3.o main4.o: main%.o: main.c g.h\n"
        "\t$(CC) -O2 -I. -DVARIANT=$* -c -o $@ main.c\n"
        "other.o: other.c g.h\n\t$(CC) -O2 -c -o $@ other.c\n")


def _stale_macho(d: Path) -> None:
    (d / "main1").write_bytes(MACHO)
    (d / "main1").chmod(0o755)


def _no_makefile(d: Path) -> None:
    subprocess.run(["make", "-s"], cwd=d, check=True, capture_output=True)
    for f in ("Makefile", "main.c"):
        (d / f).unlink()
    (d / "main3").write_bytes(MACHO)


def _only_main1(d: Path) -> None:
    _edit(d / "Makefile", "main1 main2 main3 main4: main%", "main1: main%")
    _edit(d / "Makefile", "all: main1 main2 main3 main4", "all: main1")


def _pattern(case: str, dest: Path) -> Path:
    return kit_fixture(f"hostile/{case}", dest.parent, dest.name)


def _server_sources(d: Path) -> None:
    # no Makefile; one source per server, named after the server's number
    src = (d / "main.c").read_text()
    for i, name in enumerate(("server.c", "server2.c", "server3.c", "server4.c"), 1):
        (d / name).write_text(f"#define VARIANT {i}\n" + src)
    for f in ("Makefile", "main.c"):
        (d / f).unlink()


# what the packaging cases' grading leaves out (their tests allow it undetermined)
PACKAGING_SKIP = "consistency,idle,speed,design,probe,pause"
# what a test that asserts only on how the servers were built leaves out
EVERY_SKIPPABLE = ",".join(C.SKIPPABLE)
SOURCES_LAYOUT = "main1=server.c,main2=server2.c,main3=server3.c,main4=server4.c"


CASES = {"first_only": _first_only, "main_all": _main_all, "fcommon": _fcommon,
         "fcommon_objects": _fcommon_objects, "stale_macho": _stale_macho,
         "no_makefile": _no_makefile, "only_main1": _only_main1,
         "server_sources": _server_sources}


def grade(subs, out, *flags):
    p = subprocess.run([sys.executable, "-m", "analysis", "grade", *map(str, subs),
                        "--quick", "--runs", "2", "--no-reference", "--no-progress",
                        "--jobs", "2", *flags, "--out", str(out)],
                       capture_output=True, text=True, cwd=REPO, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("subs")
    subs = []
    for name, make in CASES.items():
        make(_correct(root / name))
        subs.append(root / name)
    timing = [_pattern(c, root / c) for c in ("timing_after_lock", "timing_sum", "timing_racy")]
    # every case is the correct fixture's server, whose design test_grade.py asserts: left
    # out, it is undetermined, which honest_statuses_problems allows; the packaging cases
    # are about building (robustness stays: a missing main1 is charged for it)
    out = tmp_path_factory.mktemp("grades")
    grade(subs, out, "--skip", PACKAGING_SKIP)
    return grade(timing, out, "--skip", "design,pause")


def checks(out: Path, name: str) -> dict:
    ev = json.loads((out / name / "evidence.json").read_text())
    assert not ev.get("error"), ev.get("error")
    return {c["id"]: c for c in ev["checks"]}


def statuses(c: dict, but: str = "") -> dict:
    return {k: x["status"] for k, x in c.items() if k != but}


def text(c: dict) -> str:
    return "\n".join(c["evidence"] + list(c.get("fix") or []))


def test_a_first_target_that_builds_one_server_is_not_a_passing_build(graded):
    c = checks(graded, "first_only")
    assert c["build"]["status"] == "fail" and c["build"]["fraction"] == 0.25
    assert "make all" in text(c["build"]) and "built only main1" in text(c["build"])
    assert c["binaries"]["status"] == "pass" and c["workload"]["status"] == "pass"


def test_a_default_target_named_main_is_graded_as_main1_and_plain_make_gets_its_share(graded):
    # `main:` first, `all: main main2 main3 main4`: main is the number the others leave free
    c = checks(graded, "main_all")
    assert "layout: main1 is main" in text(c["build"])
    assert c["build"]["status"] == "fail" and c["build"]["fraction"] == 0.25, c["build"]
    assert "plain `make` built only main1" in text(c["build"])
    assert c["binaries"]["status"] == "pass"
    for cid in PER_SERVER:
        assert c[cid]["status"] != "fail", (cid, c[cid])


def test_the_layout_option_grades_main_as_main1(tmp_path):
    sub = _correct(tmp_path / "main_all")
    _main_all(sub)
    out = grade([sub], tmp_path / "out", "--layout", "main1=main", "--skip", EVERY_SKIPPABLE)
    c = checks(out, "main_all")
    assert c["binaries"]["status"] == "pass" and "layout: main1 is main" in text(c["build"])


@pytest.mark.parametrize("case", ["fcommon", "fcommon_objects"])
def test_multiple_definitions_are_built_with_fcommon_and_the_fix_is_named(graded, case):
    # fcommon_objects: the retry used to rebuild nothing (its objects were up to date), so
    # all four servers stayed missing
    c = checks(graded, case)
    assert c["build"]["status"] == "fail" and "-fcommon" in text(c["build"])
    assert "extern" in text(c["build"])
    assert c["binaries"]["status"] == "pass" and c["workload"]["status"] == "pass"


def test_a_stale_foreign_binary_is_set_aside_and_rebuilt(graded):
    c = checks(graded, "stale_macho")
    assert c["build"]["status"] == "pass" and "Mach-O" in text(c["build"])
    assert not honest_statuses_problems(statuses(c), PACKAGING_SKIP), statuses(c)


def test_handed_in_binaries_without_a_makefile_are_used_unless_they_cannot_run(graded):
    c = checks(graded, "no_makefile")
    assert c["build"]["status"] == "skip" and "Mach-O" in text(c["build"])
    assert c["binaries"]["status"] == "fail" and "main3" in text(c["binaries"])
    assert c["workload"]["fraction"] == 0.75


def test_three_missing_servers_cost_their_share_of_every_check(graded):
    res = json.loads((graded / "only_main1" / "results.json").read_text())
    assert res["score"] < 50, res["score"]  # an earlier grader gave 77 of 100
    assert res["max_score"] == 100  # every check scored: missing servers cost, not the maximum


def test_a_clock_started_after_the_lock_is_named_and_costs_only_timing(graded):
    c = checks(graded, "timing_after_lock")
    assert c["timing"]["status"] == "fail" and "lock waiting" in text(c["timing"])
    assert not honest_statuses_problems(statuses(c, but="timing")), statuses(c)


def test_timing_lines_that_are_sums_are_named_sums(graded):
    c = checks(graded, "timing_sum")
    assert c["timing"]["status"] == "fail" and "a sum" in text(c["timing"])
    assert not honest_statuses_problems(statuses(c, but="timing")), statuses(c)


def test_sources_named_otherwise_get_the_exact_layout_and_are_graded_with_it(graded, tmp_path):
    c = checks(graded, "server_sources")
    assert "server.c, server2.c, server3.c, server4.c" in text(c["build"])
    assert "--layout main1=NAME,main2=NAME" in text(c["build"])
    sub = _correct(tmp_path / "server_sources")
    _server_sources(sub)
    out = grade([sub], tmp_path / "out", "--layout", SOURCES_LAYOUT, "--skip", "design,pause")
    c = checks(out, "server_sources")
    assert c["binaries"]["status"] == "pass"
    assert not honest_statuses_problems(statuses(c, but="build")), statuses(c)


def test_start_times_shared_between_threads_are_named_a_race_and_cost_only_timing(graded):
    c = checks(graded, "timing_racy")
    assert c["timing"]["status"] == "fail" and "shared between threads" in text(c["timing"])
    assert "global shared by all threads" in text(c["timing"])
    assert not honest_statuses_problems(statuses(c, but="timing")), statuses(c)
