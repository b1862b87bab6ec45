"""A zip handed in (analysis.grade.trust.handin): unpacked with caps, nothing outside its folder,
no links, one top folder descended into; the process the launcher starts for it, the
launcher's check of that process's answer, the command line and the similarity reader."""

import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from analysis.grade import cli
from analysis.grade.trust import handin, launcher, sandbox
from analysis.grade.trust.sources import read_sources

REPO = Path(__file__).resolve().parents[2]


def make_zip(path: Path, members: dict, modes: dict | None = None) -> Path:
    """A zip of `members` {name: bytes, or None for a folder}; `modes` {name: st_mode}."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            mode = (modes or {}).get(name, stat.S_IFDIR | 0o755 if data is None
                                     else stat.S_IFREG | 0o644)
            info.external_attr = mode << 16
            z.writestr(info, b"" if data is None else data)
    return path


def unpack(path: Path, dst: Path, cap: int = 1 << 20, aside=frozenset()) -> dict:
    dst.mkdir(parents=True)
    with open(path, "rb") as f:
        return handin.unpack_into(f, str(dst), cap, frozenset(aside))


def tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_a_flat_zip_is_unpacked_as_it_is_with_the_execute_bits(tmp_path):
    z = make_zip(tmp_path / "a.zip", {"Makefile": b"all:\n", "server.c": b"int x;\n",
                                      "run.sh": b"#!/bin/sh\n", "src/": None,
                                      "src/b.h": b"#define B\n"},
                 {"run.sh": stat.S_IFREG | 0o755})
    r = unpack(z, tmp_path / "out")
    assert tree(tmp_path / "out") == {"Makefile": b"all:\n", "server.c": b"int x;\n",
                                      "run.sh": b"#!/bin/sh\n", "src/b.h": b"#define B\n"}
    assert r["files"] == 4 and r["makefile"] and r["top"] == "" and r["notes"] == []
    assert os.stat(tmp_path / "out" / "run.sh").st_mode & 0o111
    assert not os.stat(tmp_path / "out" / "server.c").st_mode & 0o111


def test_one_top_folder_is_descended_into_and_macos_litter_left_out(tmp_path):
    z = make_zip(tmp_path / "a.zip", {"alice/": None, "alice/Makefile": b"all:\n",
                                      "alice/server.c": b"x", "__MACOSX/alice/._server.c": b"m",
                                      "alice/.DS_Store": b"d"})
    r = unpack(z, tmp_path / "out")
    assert tree(tmp_path / "out") == {"Makefile": b"all:\n", "server.c": b"x"}
    assert r["top"] == "alice" and r["notes"] == []


@pytest.mark.parametrize("name,why", [
    ("../evil.c", "a path outside the hand-in"), ("a/../../evil.c", "a path outside"),
    ("/etc/evil", "an absolute path"), ("C:\\evil.c", "an absolute path"),
    ("..\\evil.c", "a path outside the hand-in")])
def test_a_member_outside_the_folder_is_not_unpacked(tmp_path, name, why):
    z = make_zip(tmp_path / "a.zip", {"server.c": b"x", name: b"pwned"})
    r = unpack(z, tmp_path / "sub" / "out")
    assert tree(tmp_path / "sub") == {"out/server.c": b"x"}
    assert not (tmp_path / "evil.c").exists()
    assert len(r["notes"]) == 1 and why in r["notes"][0] and "not unpacked" in r["notes"][0]


def test_links_devices_and_encrypted_members_are_not_unpacked(tmp_path):
    z = make_zip(tmp_path / "a.zip", {"server.c": b"x", "link": b"/etc/passwd",
                                      "fifo": b""},
                 {"link": stat.S_IFLNK | 0o777, "fifo": stat.S_IFIFO | 0o644})
    with zipfile.ZipFile(z, "a") as zf:
        zf.writestr("secret.c", b"x")
    data = bytearray(z.read_bytes())  # the "encrypted" flag, as a password tool sets it
    for sig, flags in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.rfind(sig)
        data[at + flags] |= 0x1
    z.write_bytes(bytes(data))
    r = unpack(z, tmp_path / "out")
    assert tree(tmp_path / "out") == {"server.c": b"x"}
    assert not os.path.lexists(tmp_path / "out" / "link")
    joined = " ".join(r["notes"])
    for why in ("a symbolic link", "not a regular file or folder", "encrypted"):
        assert why in joined, joined


def test_a_zip_bomb_stops_at_its_ratio_and_leaves_no_partial_file(tmp_path):
    z = make_zip(tmp_path / "a.zip", {"server.c": b"x", "bomb.c": bytes(64 << 20)})
    assert os.path.getsize(z) < 1 << 20
    r = unpack(z, tmp_path / "out", cap=256 << 20)
    assert tree(tmp_path / "out") == {"server.c": b"x"}
    assert "zip bomb" in r["notes"][0]


def test_what_a_hand_in_may_hold_caps_the_bytes_unpacked(tmp_path):
    z = make_zip(tmp_path / "a.zip", {"a.c": os.urandom(3000), "b.c": os.urandom(3000)})
    r = unpack(z, tmp_path / "out", cap=4000)
    assert list(tree(tmp_path / "out")) == ["a.c"] and r["bytes"] == 3000
    assert "beyond the bytes a hand-in may hold" in r["notes"][0]


def test_with_a_makefile_handed_in_servers_are_set_aside(tmp_path):
    z = make_zip(tmp_path / "a.zip", {"s/Makefile": b"all:\n", "s/main": b"\x7fELF....",
                                      "s/server.c": b"x"})
    r = unpack(z, tmp_path / "out", aside={"main", "main1"})
    assert tree(tmp_path / "out") == {"Makefile": b"all:\n", "server.c": b"x"}
    assert bytes.fromhex(r["set_aside"]["main"]) == b"\x7fELF...."


def test_what_is_no_zip_or_too_big_is_refused_in_one_line(tmp_path):
    z = make_zip(tmp_path / "a.zip", {"a.c": b"x"})
    data = bytearray(z.read_bytes())
    at = data.rfind(b"PK\x05\x06")
    data[at + 10:at + 12] = b"\xff\xff"  # the entry count of a ZIP64 archive
    with pytest.raises(handin.NotAZipError, match="ZIP64"):
        handin.entry_count(io.BytesIO(bytes(data)))
    with pytest.raises(handin.NotAZipError, match="no end record"):
        handin.entry_count(io.BytesIO(b"PK\x03\x04 not really"))
    big = io.BytesIO()
    big.write(b"\0" * (handin.MAX_ZIP + 1))
    with pytest.raises(handin.NotAZipError, match="over the 64 MiB"):
        handin.entry_count(big)


def run_unpacker(zip_bytes: bytes, dst: Path, *extra: str) -> subprocess.CompletedProcess:
    """The unpacking process as the launcher starts it: the zip a file on its stdin."""
    dst.mkdir(parents=True)
    (dst.parent / f"{dst.name}.zip").write_bytes(zip_bytes)
    argv = sandbox.python_argv(sys.executable, "analysis.grade.trust.handin", str(REPO))
    with open(dst.parent / f"{dst.name}.zip", "rb") as f:
        return subprocess.run([*argv, str(dst), str(1 << 20), *extra], stdin=f,
                              capture_output=True, cwd=dst, timeout=60)


def test_the_unpacking_process_answers_in_one_json_object(tmp_path):
    z = make_zip(tmp_path / "a.zip", {"alice/Makefile": b"all:\n", "alice/main": b"ELF",
                                      "alice/../x": b"y"})
    p = run_unpacker(z.read_bytes(), tmp_path / "out", "main,main1")
    r = json.loads(p.stdout)
    assert p.returncode == 0 and r["files"] == 1 and r["top"] == "alice", p.stderr
    assert list(r["set_aside"]) == ["main"] and "outside" in r["notes"][0]
    p = run_unpacker(b"garbage", tmp_path / "out2")
    assert p.returncode == 0 and json.loads(p.stdout) == {
        "error": "not a zip file (no end record)"}


@pytest.mark.parametrize("reply", [None, [], {"files": "1"}, {"error": "x" * 1000},
                                   {"files": 1, "bytes": 2, "notes": ["a"], "set_aside": {},
                                    "makefile": "yes"}])
def test_the_launcher_believes_no_malformed_answer_of_the_unpacking_process(reply):
    r = launcher._unpack_reply(reply, ["main"])
    assert r["bytes"] == 0 and r["makefile"] is False and r["set_aside"] == {}
    assert len(r["notes"]) == 1 and r["notes"][0].startswith("the zip was not unpacked: ")
    assert len(r["notes"][0]) < 400


def test_the_launcher_keeps_only_set_aside_names_it_asked_for_as_short_hex():
    r = launcher._unpack_reply({"files": 3, "bytes": 10, "notes": ["n"] * 50, "top": "bob",
                                "makefile": True, "set_aside": {"main": "7f454c46",
                                                                "evil": "00", "main1": "zz"}},
                               ["main", "main1"])
    assert r["set_aside"] == {"main": "7f454c46"} and len(r["notes"]) == 21
    assert r["unpacked"] == "unpacked the zip handed in: 3 files, 10 bytes, from its top " \
                            "folder 'bob'"


def test_a_folder_holding_only_a_zip_is_graded_as_that_zip(tmp_path):
    (tmp_path / "alice").mkdir()
    z = make_zip(tmp_path / "alice" / "lab2.zip", {"a.c": b"x"})
    (tmp_path / "alice" / ".hidden").write_text("")
    assert cli._one_zip(tmp_path / "alice") == z
    (tmp_path / "alice" / "notes.txt").write_text("")
    assert cli._one_zip(tmp_path / "alice") == tmp_path / "alice"


def test_grade_refuses_a_file_that_is_no_zip_in_one_line(tmp_path):
    (tmp_path / "alice.tar").write_bytes(b"not a zip")
    p = subprocess.run([sys.executable, "-m", "analysis", "grade", str(tmp_path / "alice.tar")],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].endswith(
        "alice.tar is neither a folder nor a zip file"), p.stderr


def test_similarity_reads_a_zip_as_the_grader_unpacks_it(tmp_path):
    z = make_zip(tmp_path / "a.zip", {"bob/server.c": b"int main(){}\n", "bob/build/x.c": b"y",
                                      "bob/../evil.c": b"z", "bob/notes.txt": b"t"})
    sources, notes = read_sources(z)
    assert [s.path for s in sources] == ["server.c"] and notes == []
    sources, notes = read_sources(make_zip(tmp_path / "b.zip", {}).with_name("b.zip"))
    assert sources == [] and notes == []
    (tmp_path / "c.zip").write_bytes(b"PK\x03\x04 broken")
    assert read_sources(tmp_path / "c.zip")[1][0].startswith("not a readable zip")


# ---- the folder to build in (grade/trust/folder.py, --folder) ------------------------------------

def course_layout(root: Path, code: tuple = ("Code",)) -> Path:
    """The course's hand-in as unpacked: the members file, Report/report.pdf, and each of
    `code` holding a Makefile and a source."""
    root.mkdir(parents=True)
    (root / "members.txt").write_text("Alice A\nBob B\n")
    (root / "Report").mkdir()
    (root / "Report" / "report.pdf").write_bytes(b"%PDF-1.4 dummy\n")
    for c in code:
        (root / c).mkdir(parents=True)
        (root / c / "Makefile").write_text("all:\n")
        (root / c / "main.c").write_text("int main(void) { return 0; }\n")
    return root


def test_the_one_folder_holding_a_makefile_is_built_in_and_said_so(tmp_path):
    from analysis.grade.trust import folder
    top = course_layout(tmp_path / "a")
    sub, lines = folder.choose(top)
    assert sub == "Code" and lines == ["built in `Code/`, the one folder holding a Makefile "
                                       "(the top folder holds neither a Makefile nor a server)"]
    deep = course_layout(tmp_path / "b", ("lab2/Code",))
    assert folder.choose(deep)[0] == "lab2/Code"
    # CMake's build trees hold generated Makefiles, not the student's
    for tree in ("cmake-build-debug", "lab2/out"):
        (deep / tree).mkdir(parents=True, exist_ok=True)
        (deep / tree / "Makefile").write_text("all:\n")
        (deep / tree / "CMakeCache.txt").write_text("")
    assert folder.choose(deep)[0] == "lab2/Code"
    # a Makefile at the top: the top, whatever its folders hold
    (top / "Makefile").write_text("all:\n")
    assert folder.choose(top) == ("", [])


def test_several_folders_with_a_makefile_are_listed_and_the_option_picks_one(tmp_path):
    from analysis.grade.trust import folder
    top = course_layout(tmp_path / "a", ("Code", "Old/Code"))
    sub, lines = folder.choose(top)
    assert sub == "" and len(lines) == 1 and "2 folders hold a Makefile: `Code/`, `Old/Code/`" \
        in lines[0] and "--folder Code" in lines[0]
    assert folder.choose(top, "Old/Code") == ("Old/Code", [
        "built in `Old/Code/`, the folder --folder names"])
    sub, lines = folder.choose(top, "Nope")
    assert sub == "" and lines[0].startswith("--folder Nope: no such folder in this submission")


def test_a_folder_of_binaries_is_found_and_no_link_is_followed(tmp_path):
    from analysis.grade.trust import folder
    top = tmp_path / "a"
    (top / "bin").mkdir(parents=True)
    for m in ("main1", "main2"):
        (top / "bin" / m).write_bytes(b"\x7fELF")
        (top / "bin" / m).chmod(0o755)
    (top / "notes").mkdir()
    assert folder.choose(top)[0] == "bin"
    elsewhere = course_layout(tmp_path / "elsewhere")
    (top / "link").symlink_to(elsewhere / "Code")
    assert folder.choose(top)[0] == "bin"   # the link's Makefile is not seen
    assert folder.choose(top, "link")[0] == "bin"


@pytest.mark.parametrize("bad", ["/abs", "../up", "Code/../..", "\\\\server\\share", "."])
def test_a_bad_folder_option_is_refused_with_one_line(tmp_path, bad):
    p = subprocess.run([sys.executable, "-m", "analysis", "grade", str(tmp_path),
                        f"--folder={bad}"], capture_output=True, text=True, cwd=REPO,
                       timeout=60)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith(
        "python -m analysis grade: error: argument --folder: "), p.stderr
    assert cli._folder("./Code/") == "Code" and cli._folder("a\\b") == "a/b"


def test_a_platform_bundle_keeps_the_folder_option_for_every_submission(tmp_path):
    """A course whose hand-ins all keep their Makefile in Code/ writes the bundle with
    --folder Code: bundle.json keeps it and the hosted grader passes it on."""
    from analysis.grade.platforms import hosted
    p = subprocess.run([sys.executable, "-m", "analysis", "grade", "--bundle", "prairielearn",
                        "--out", str(tmp_path), "--folder", "./Code/", "--lab", "2024"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    cfg = json.loads((tmp_path / "prairielearn" / "lockbench" / "bundle.json").read_text())
    assert cfg["folder"] == "Code" and cfg["lab"] == "2024+"
    argv = hosted.grader_argv(Path("/sub"), Path("/work"), cfg, 100.0)
    assert argv[argv.index("--folder") + 1] == "Code"
    assert argv[argv.index("--lab") + 1] == "2024+"
    assert "--folder" not in hosted.grader_argv(Path("/sub"), Path("/work"), {}, 100.0)


# ---- graded end to end: the course's layout, the older one-`main` lab, the 2017 lab -------

LAYOUT_SKIP = "speed,concurrency,probe,pause"


def course_src(root: Path, code: tuple = ("Code",)) -> Path:
    """The course's hand-in (tests/fixtures/course_layout: members, Report/report.pdf) with
    the honest four-server fixture's sources and Makefile in each folder of `code`."""
    from analysis.tests.helpers import KIT_FIXTURES, kit_fixture
    layout = KIT_FIXTURES / "course_layout"
    root.mkdir(parents=True)
    shutil.copy(layout / "members.txt", root)
    shutil.copytree(layout / "Report", root / "Report")
    for c in code:
        kit_fixture("correct", root, c)
    return root


def _grade(subs: list, out: Path, *extra: str) -> None:
    p = subprocess.run([sys.executable, "-m", "analysis", "grade", *map(str, subs), "--quick",
                        "--runs", "2", "--no-reference", "--jobs", "2", "--no-progress",
                        "--skip", LAYOUT_SKIP, "--out", str(out), *extra],
                       capture_output=True, text=True, cwd=REPO, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """Each way of handing in graded in two commands (the second with --folder)."""
    from analysis.tests.helpers import built_fixture, kit_fixture, zip_fixture
    why = sandbox.available()
    if why:
        pytest.skip(f"no sandbox: {why}")
    root, out = tmp_path_factory.mktemp("layouts"), tmp_path_factory.mktemp("grades")
    src = course_src(root / "src")
    flat = zip_fixture(src, root / "course_flat.zip")
    top = zip_fixture(src, root / "course_top" / "lab2.zip", top="group7").parent
    two = course_src(root / "two_folders", ("Code", "Old/Code"))
    picked = course_src(root / "two_picked", ("Code", "Old/Code"))
    bins = root / "bin_folder" / "Lab2" / "bin"
    bins.mkdir(parents=True)
    shutil.copy(src / "members.txt", root / "bin_folder")
    built = built_fixture("correct", root / "building")
    for m in ("main1", "main2", "main3", "main4"):
        shutil.copy(built / m, bins)
    extras = kit_fixture("lab2018_extras", root)
    own = root / "lab2017_own"
    shutil.copytree(REPO / "tests" / "fixtures" / "lab2017_own", own)
    _grade([flat, top, two, bins.parents[1], extras, own], out)
    _grade([picked], out / "picked", "--folder", "Old/Code")
    return out


TWO_FOLDERS = {"build": "skip", "binaries": "fail", "cmdline": "fail", "initial": "fail",
               "workload": "fail", "consistency": "fail", "idle": "fail", "speed": "fail",
               "design": "fail", "robustness": "fail", "timing": "fail"}


def _checks(out: Path, name: str) -> tuple:
    ev = json.loads((out / name / "evidence.json").read_text())
    return ev, {c["id"]: c for c in ev["checks"]}


def _honest(name: str, c: dict) -> None:
    from analysis.tests.helpers import honest_statuses_problems
    got = {k: x["status"] for k, x in c.items()}
    assert not honest_statuses_problems(got, LAYOUT_SKIP), (name, got)


@pytest.mark.slow
@pytest.mark.sandbox
@pytest.mark.parametrize("name", ["course_flat", "course_top"])
def test_the_course_layout_is_built_in_code_and_passes_every_check(layouts, name):
    from analysis.grade import score
    ev, c = _checks(layouts, name)
    lines = "\n".join(c["build"]["evidence"])
    assert ev["lab"]["name"] == "2019-2023", ev["lab"]
    assert "built in `Code/`, the one folder holding a Makefile" in lines, lines
    assert ("from its top folder 'group7'" in lines) == (name == "course_top"), lines
    assert c["build"]["status"] == "pass" and c["binaries"]["status"] == "pass"
    _honest(name, c)
    assert score.verdict(ev)[0] == "PASS"


@pytest.mark.slow
@pytest.mark.sandbox
def test_two_folders_with_a_makefile_are_listed_and_the_folder_option_picks_one(layouts):
    ev, c = _checks(layouts, "two_folders")
    lines = "\n".join(c["build"]["evidence"])
    assert "2 folders hold a Makefile: `Code/`, `Old/Code/`" in lines and \
        "--folder Code" in lines, lines
    assert c["build"]["status"] == "skip" and c["binaries"]["status"] == "fail"
    # nothing built until the option names the folder: each server's check fails for it
    assert {k: x["status"] for k, x in c.items()} == TWO_FOLDERS, c
    ev, c = _checks(layouts / "picked", "two_picked")
    assert "built in `Old/Code/`, the folder --folder names" in c["build"]["evidence"]
    _honest("two_picked", c)


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_folder_of_binaries_in_a_subfolder_is_graded_there(layouts):
    ev, c = _checks(layouts, "bin_folder")
    lines = "\n".join(c["build"]["evidence"])
    assert "graded in `Lab2/bin/`, the one folder holding the servers' executables" in lines
    assert "no Makefile: using the binaries as handed in" in lines
    assert c["build"]["status"] == "skip" and c["binaries"]["status"] == "pass"
    _honest("bin_folder", {k: x for k, x in c.items() if k != "build"})


@pytest.mark.slow
@pytest.mark.sandbox
def test_main_with_extras_is_the_one_server_lab_and_each_extra_is_named(layouts):
    from analysis.grade import score
    ev, c = _checks(layouts, "lab2018_extras")
    assert ev["lab"]["name"] == "2018" and ev["lab"]["servers"] == ["main"], ev["lab"]
    assert "main1, main2 and main3 beside it" in ev["lab"]["why"]
    assert "extra targets beside main: main1, main2, main3" in "\n".join(
        c["build"]["evidence"])
    design = c["design"]["evidence"]
    # the student's own order, named as traced and never judged against main1..main4
    for line in ("main1 (an extra target): one mutex", "main2 (an extra target): one rwlock",
                 "main3 (an extra target): a mutex per string"):
        assert line in design, design
    assert "an rwlock per string" in design[0]
    _honest("lab2018_extras", c)
    assert score.verdict(ev)[0] == "PASS"


@pytest.mark.slow
@pytest.mark.sandbox
def test_the_2017_lab_is_not_gradable_by_the_kit_on_every_page(layouts):
    from analysis.grade import score
    from analysis.grade.platforms import hosted
    ev, c = _checks(layouts, "lab2017_own")
    assert ev["lab"]["name"] == "2017" and set(c) == {"build", "binaries"}, c
    assert all(x["status"] == "undetermined" for x in c.values()), c
    lines = "\n".join(c["build"]["evidence"])
    assert "not gradable by the kit" in lines and "port first" in lines, lines
    assert "server and a client of its own" in lines and "built: server, client" in lines
    assert score.verdict(ev) == ("NOT GRADABLE BY THE KIT", [])
    page = layouts / "lab2017_own"
    assert "**Verdict: NOT GRADABLE BY THE KIT**" in (page / "verdict.md").read_text()
    assert "NOT GRADABLE BY THE KIT — 0 / 0" in (page / "verdict.html").read_text()
    gs = json.loads((page / "results.json").read_text())
    assert gs["score"] == 0 and gs["max_score"] == 0
    assert gs["output"].startswith("Verdict: NOT GRADABLE BY THE KIT; score 0 / 0")
    assert not hosted.to_prairielearn(gs, ev)["gradable"]
    with open(layouts / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["submission"]: r["verdict"] for r in rows}["lab2017_own"] == \
        "NOT GRADABLE BY THE KIT"
