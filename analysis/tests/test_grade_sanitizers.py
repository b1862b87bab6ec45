"""The sanitized checks (--race, --memory) against a submission that silences its own
sanitizer: the options every run sets, the binary's symbols read for hooks (a stdlib ELF
reader that a hostile file never crashes), the memory check's line placed in the
submission's own sources; and one grading of the hostile fixtures
(tests/fixtures/hostile/tsan_*, asan_*) beside an honest server."""

import json
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.grade import records as C
from analysis.grade.checks import memory, races
from analysis.grade.measure import symbols
from analysis.grade.trust import sandbox
from analysis.tests.helpers import KIT_HEADER, kit_fixture

REPO = Path(__file__).resolve().parents[2]

# ---- the memory check's line -----------------------------------------------------------

SOURCES = {"server.c", "common.h", "src/util.c"}
STRTOL = """\
==7==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000 (pc 0x7f12 bp 0x1 T3)
==7==The signal is caused by a READ memory access.
    #0 0x7f1234 in __GI_____strtol_l_internal ../stdlib/strtol_l.c:291
    #1 0x7f1240 in __interceptor_strtol ../../../../src/libsanitizer/asan/asan_interceptors.cpp:512
    #2 0x55aa10 in parse /usr/include/stdlib.h:364
    #3 0x55aa20 in handle /sub/src/server.c:57
    #4 0x55aa30 in main /sub/src/server.c:140
"""


def test_an_error_inside_glibc_is_placed_at_the_students_call():
    assert memory.first_error(STRTOL, SOURCES) == "SEGV in handle server.c:57"


def test_only_files_of_the_submission_count_as_its_own():
    # a file the copy does not hold (here: not listed) is not the submission's, whatever
    # its folder; a relative path and a subfolder of the copy are
    log = STRTOL.replace("/sub/src/server.c:57", "/sub/src/gone.c:57")
    assert memory.first_error(log, SOURCES) == "SEGV in main server.c:140"
    log = STRTOL.replace("/sub/src/server.c:57", "src/./util.c:9")
    assert memory.first_error(log, SOURCES) == "SEGV in handle src/util.c:9"
    log = STRTOL.replace("/sub/src/server.c:57", "/sub/src/../src/server.c:57")
    assert memory.first_error(log, SOURCES) == "SEGV in main server.c:140"
    assert memory.first_error(STRTOL, set()) == "SEGV"


UBSAN = """\
/sub/src/server.c:88:14: runtime error: signed integer overflow: 2147483647 + 1 cannot be \
represented in type 'int'
    #0 0x55aa10 in handle /sub/src/server.c:88
    #1 0x7f1234 in start_thread nptl/pthread_create.c:442
"""


def test_the_ubsan_form_keeps_its_line_with_or_without_frames():
    assert memory.first_error(UBSAN, SOURCES) == (
        "undefined behaviour: signed integer overflow: 2147483647 + 1 cannot be represented "
        "in type 'int' in handle server.c:88")
    bare = UBSAN.split("\n")[0] + "\n"
    assert memory.first_error(bare, SOURCES).endswith(" at server.c:88")
    assert memory.first_error("nothing to see\n", SOURCES) == ""


def test_own_sources_lists_the_copy_without_following_links(tmp_path):
    (tmp_path / "src").mkdir()
    for f in ("server.c", "common.h", "src/util.c", "notes.txt"):
        (tmp_path / f).write_text("x")
    (tmp_path / "include").symlink_to("/usr/include")
    (tmp_path / "stdlib.c").symlink_to("/usr/include/stdlib.h")
    assert memory.own_sources(tmp_path) == SOURCES


# ---- the options every run sets --------------------------------------------------------

def test_every_sanitized_run_sets_reports_on_a_log_of_the_graders_and_no_suppressions():
    env = dict(races.ENV + memory.ENV)
    assert set(env) == {"TSAN_OPTIONS", "ASAN_OPTIONS", "UBSAN_OPTIONS"}
    for value in env.values():
        opts = dict(o.split("=", 1) for o in value.split(":"))
        assert opts["log_path"] == f"/sub/run/{races.LOG}" and opts["suppressions"] == ""
    assert "report_bugs=1" in env["TSAN_OPTIONS"]
    assert "halt_on_error=1" in env["ASAN_OPTIONS"] and "detect_leaks=0" in env["ASAN_OPTIONS"]
    # container mode runs without bubblewrap: the log path becomes the host's run folder
    got = sandbox._translate_arg(f"TSAN_OPTIONS={env['TSAN_OPTIONS']}",
                                 [("/sub/run", "/scratch/runs/main1_tsan")])
    assert got.endswith(f":log_path=/scratch/runs/main1_tsan/{races.LOG}"), got


# ---- the symbols -----------------------------------------------------------------------

def _gcc(tmp_path: Path, name: str, code: str, *flags) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the binaries read here")
    src = tmp_path / f"{name}.c"
    src.write_text(code)
    out = tmp_path / name
    p = subprocess.run(["gcc", "-O1", *flags, "-o", str(out), str(src), "-lpthread"],
                       capture_output=True, text=True)
    if p.returncode:
        pytest.skip(f"gcc {' '.join(flags)} failed here: {p.stderr[-300:]}")
    return out


PLAIN = "int main(void) { return 0; }\n"
HOOKED = """\
const char *__tsan_default_options(void) { return "report_bugs=0"; }
extern void __sanitizer_set_report_path(const char *) __attribute__((weak));
extern void AnnotateIgnoreWritesBegin(const char *, int);
int main(void) {
  if (__sanitizer_set_report_path) __sanitizer_set_report_path("/tmp/x");
  AnnotateIgnoreWritesBegin("", 0);
  return 0;
}
"""
TSAN = "-fsanitize=thread"


def test_an_honest_sanitized_binary_has_no_hooks_and_is_checked(tmp_path):
    t = _gcc(tmp_path, "t", f'#include "{KIT_HEADER}"\n', TSAN, "-DVARIANT=1")
    assert symbols.inspect(t, "tsan") == ([], "", [])
    a = _gcc(tmp_path, "a", PLAIN, "-fsanitize=address,undefined")
    assert symbols.inspect(a, "asan") == ([], "", [])


def test_hooks_and_redirections_are_named_from_the_symbols_not_the_bytes(tmp_path):
    b = _gcc(tmp_path, "hooked", HOOKED, TSAN)
    hooks, why, unread = symbols.inspect(b, "tsan")
    assert why == "" and unread == []
    assert [h.split(" (")[0] for h in hooks] == [
        "calls AnnotateIgnoreWritesBegin", "calls __sanitizer_set_report_path",
        "defines __tsan_default_options"], hooks
    # the names in a string are not symbols
    quoted = _gcc(tmp_path, "quoted", 'const char *s = "__tsan_default_options '
                  '__sanitizer_set_report_path";\nint main(void) { return !s; }\n', TSAN)
    assert symbols.inspect(quoted, "tsan") == ([], "", [])


# Every sanitizer's compiled-in defaults and report callback in one program.
EVERY_TOOL = "".join(
    f'const char *__{t}_default_options(void) {{ return ""; }}\n'
    for t in ("tsan", "asan", "ubsan", "lsan")) + """\
void __tsan_on_report(void *r) { (void)r; }
void __asan_on_error(void) {}
void __ubsan_on_report(void) {}
void __sanitizer_on_print(const char *s) { (void)s; }
int main(void) { return 0; }
"""


def test_a_hook_counts_only_where_a_runtime_of_the_build_reads_it(tmp_path):
    """Each sanitized build is held to the hooks its own runtimes export (libtsan for the
    race check; libasan and libubsan for the memory check): another sanitizer's hook is
    named as unread, never as tampering."""
    def names(lines):
        return sorted(h.split(" ")[1] for h in lines)
    t = _gcc(tmp_path, "t", EVERY_TOOL, TSAN)
    hooks, why, unread = symbols.inspect(t, "tsan")
    assert why == ""
    assert names(hooks) == ["__sanitizer_on_print", "__tsan_default_options",
                            "__tsan_on_report"], hooks
    assert names(unread) == ["__asan_default_options", "__asan_on_error",
                             "__lsan_default_options", "__ubsan_default_options",
                             "__ubsan_on_report"], unread
    a = _gcc(tmp_path, "a", EVERY_TOOL, "-fsanitize=address,undefined")
    hooks, why, unread = symbols.inspect(a, "asan")
    assert why == ""
    assert names(hooks) == ["__asan_default_options", "__asan_on_error",
                            "__lsan_default_options", "__sanitizer_on_print",
                            "__ubsan_default_options", "__ubsan_on_report"], hooks
    assert names(unread) == ["__tsan_default_options", "__tsan_on_report"], unread


def test_a_runtime_that_cannot_be_read_leaves_every_hook_counted(tmp_path, monkeypatch):
    """Where the system's copy of a runtime is missing, nothing is let off."""
    t = _gcc(tmp_path, "t", EVERY_TOOL, TSAN)
    symbols._exports.cache_clear()
    monkeypatch.setattr(symbols, "LIBRARY_DIRS", (str(tmp_path / "nowhere") + "/",))
    try:
        hooks, _, unread = symbols.inspect(t, "tsan")
    finally:
        symbols._exports.cache_clear()
    assert unread == [] and len(hooks) == 8, hooks


def test_without_section_headers_the_loaders_view_still_shows_the_hooks(tmp_path):
    # the loader reads the dynamic segment alone: a binary stripped of its section
    # headers runs as before, and its hooks must still be seen
    data = bytearray(_gcc(tmp_path, "hooked", HOOKED, TSAN).read_bytes())
    struct.pack_into("<Q", data, 40, 0)
    struct.pack_into("<H", data, 60, 0)
    elf = symbols.Elf(bytes(data))
    assert {"__tsan_default_options", "__sanitizer_set_report_path"} <= {
        h.split(" ")[1] for h in symbols.tampering(elf)}


def test_a_binary_the_symbols_cannot_clear_is_not_checked(tmp_path):
    plain = _gcc(tmp_path, "plain", PLAIN)
    assert "not built with the sanitizer" in symbols.inspect(plain, "tsan")[1]
    static = _gcc(tmp_path, "static", HOOKED, TSAN, "-static-libtsan")
    assert symbols.inspect(static, "tsan") == (
        [], "the sanitizer runtime is linked into the binary: its hooks cannot be told from "
            "the program's", [])
    rpath = _gcc(tmp_path, "rpath", PLAIN, TSAN, "-Wl,-rpath,/sub/bin")
    assert "library path /sub/bin" in symbols.inspect(rpath, "tsan")[1]
    (tmp_path / "link").symlink_to(plain)
    hooks, why, _ = symbols.inspect(tmp_path / "link", "tsan")
    assert hooks == [] and why.startswith("could not read its symbols: not readable")


def test_a_malformed_file_is_an_answer_never_a_crash(tmp_path):
    good = _gcc(tmp_path, "hooked", HOOKED, TSAN).read_bytes()
    rng = random.Random(420)
    answers = set()
    for i in range(1500):
        data = bytearray(good)
        for _ in range(rng.randint(1, 12)):
            at = rng.randrange(min(len(data), rng.choice((64, 4096, len(data)))))
            data[at] = rng.randrange(256)
        if i % 5 == 0:
            data = data[:rng.randrange(len(data))]
        try:
            symbols.Elf(bytes(data))
            answers.add("read")
        except symbols.Malformed:
            answers.add("malformed")
    assert answers == {"read", "malformed"}
    for junk in (b"", b"\x7fELF", b"\x7fELF\x02\x01" + b"\xff" * 80, b"#!/bin/sh\n"):
        with pytest.raises(symbols.Malformed):
            symbols.Elf(junk)
    (tmp_path / "junk").write_bytes(b"\x7fELF\x02\x01" + b"\xff" * 80)
    assert symbols.inspect(tmp_path / "junk", "asan")[1].startswith(
        "could not read its symbols")


# ---- one grading -----------------------------------------------------------------------

HOSTILE = {  # case: (the checks it silences, what must be named)
    "tsan_silencer": (("races",), "defines __tsan_default_options"),
    "tsan_suppressor": (("races",), "defines __tsan_default_suppressions"),
    "asan_logpath": (("memory",), "defines __asan_default_options"),
    # every runtime takes a report path: both checks
    "asan_redirect": (("races", "memory"), "calls __sanitizer_set_report_path"),
}


@pytest.mark.slow
@pytest.mark.sandbox
def test_a_submission_that_silences_its_sanitizer_fails_and_an_honest_one_passes(tmp_path):
    if sandbox.available():
        pytest.skip(f"no sandbox: {sandbox.available()}")
    subs = [kit_fixture("correct", tmp_path)]
    subs += [kit_fixture(f"hostile/{case}", tmp_path) for case in HOSTILE]
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "analysis", "grade", *map(str, subs), "--quick",
                        "--runs", "2", "--no-progress", "--jobs", "2", "--no-reference",
                        "--race", "--memory", "--skip", ",".join(C.SKIPPABLE), "--out",
                        str(out)], capture_output=True, text=True, cwd=REPO, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]

    def got(name: str) -> dict:
        ev = json.loads((out / name / "evidence.json").read_text())
        return {c["id"]: c for c in ev["checks"] if c["id"] in ("races", "memory")}

    honest = got("correct")
    assert {k: c["status"] for k, c in honest.items()} == {"races": "pass", "memory": "pass"}
    for case, (cids, named) in HOSTILE.items():
        for cid, c in got(case).items():
            text = "\n".join(c["evidence"])
            if cid not in cids:  # the other runtime never reads it: its run is judged
                assert "tampering" not in text, (case, cid, text[:800])
                assert f"main1: not held against it, as no runtime of this build reads it: "\
                       f"{named} (" in text, (case, cid, text[:800])
                continue
            assert c["status"] == "fail", (case, c)
            assert c["evidence"][0].startswith("FAIL for tampering"), (case, c["evidence"][:2])
            for server in ("main1", "main2", "main3", "main4"):
                assert f"{server}: tampering: {named} (" in text, (case, server, text[:800])
    # the grader's options are the ones the runtime used: the race report switched off by
    # the binary's defaults, and the overflow report sent to its own file, are on the page
    silenced = "\n".join(got("tsan_silencer")["races"]["evidence"])
    assert "main1: " in silenced and "data race report(s)" in silenced, silenced[:800]
    logpath = "\n".join(got("asan_logpath")["memory"]["evidence"])
    assert "main1: heap-buffer-overflow in on_start main.c:" in logpath, logpath[:800]
