"""The build check's retries (analysis/grade/trust/packaging.py RETRIES, docs/grading.md "build"):
which failed make output calls for which compiler flag, and, graded end to end, the
fixture tests/fixtures/implicit_decl, whose C only a compiler older than gcc 14 accepts;
and what the check calls a handed-in binary (packaging.describe_binary), hostile ones too."""

import json
import random
import subprocess
import sys

import pytest

from analysis.grade.trust import packaging as P
from analysis.grade.trust import sandbox
from analysis.tests.helpers import REPO, elf_file, kit_fixture

# gcc's own lines (LANG=C), of gcc 12 with the fixture's -Werror=... and of gcc 14 itself
INCOMPATIBLE = ("main.c:11:50: error: passing argument 3 of 'pthread_create' from "
                "incompatible pointer type [-Werror=incompatible-pointer-types]")
IMPLICIT = ("main.c:12:20: error: implicit declaration of function 'serve_here' "
            "[-Wimplicit-function-declaration]")
IMPLICIT_INT = "old.c:3:1: error: return type defaults to 'int' [-Wimplicit-int]"
MAKE_TAIL = "cc1: some warnings being treated as errors\nmake: *** [Makefile:10: main1] Error 1"


@pytest.mark.parametrize("output, first", [
    (f"{INCOMPATIBLE}\n  note: expected 'void * (*)(void *)'\n{IMPLICIT}\n{MAKE_TAIL}",
     INCOMPATIBLE),
    (f"{IMPLICIT_INT}\n{MAKE_TAIL}", IMPLICIT_INT),
    # another error beside them: no flag builds that, so no retry
    (f"{IMPLICIT}\nmain.c:20:1: error: expected ';' before '}}' token\n{MAKE_TAIL}", ""),
    ("main.o: in function `bump':\nother.c:(.text+0x0): multiple definition of `counter'\n"
     "collect2: error: ld returned 1 exit status", ""),
    ("main.c:2:10: fatal error: kitserver.h: No such file or directory", ""),
])
def test_only_the_errors_gcc14_made_call_for_the_permissive_retry(output, first):
    assert P.gcc14_errors(output) == first


def test_the_retry_flags_are_the_c_compilers_and_fpermissive_only_from_gcc14():
    wno = [f"-Wno-error={w}" for w in P.GCC14_ERRORS]
    assert P.retry_flags(["permissive"], "cc", 12) == wno
    assert P.retry_flags(["permissive"], "gcc", 14) == [*wno, "-fpermissive"]
    assert P.retry_flags(["permissive"], "clang", None) == wno
    assert P.retry_flags(["permissive"], "g++", 14) == []
    assert P.retry_flags(["fcommon", "permissive"], "g++", 14) == ["-fcommon"]


NO_ELF = "not an executable (no ELF header)"
BIG_ENDIAN, NARROW, NO_CLASS = (b"\x7fELF\x02\x02\x01", b"\x7fELF\x01\x01\x01",
                                b"\x7fELF\x03\x01\x01")


@pytest.mark.parametrize("head, machine, said", [
    (elf_file(), "x86_64", ""),
    (elf_file(machine=183), "aarch64", ""),
    (elf_file(ident=BIG_ENDIAN), "x86_64", ""),
    (elf_file(machine=999), "sparc", ""),    # a machine it does not know: the class alone
    (elf_file(machine=183), "x86_64",
     "an ELF binary for another machine (e_machine 183, this is x86_64)"),
    (elf_file(ident=NARROW, machine=3), "x86_64",
     "an ELF binary for another machine (e_machine 3, this is x86_64)"),
    (b"\xcf\xfa\xed\xfe" + bytes(60), "x86_64", "a Mach-O binary (macOS), which Linux cannot run"),
    (b"#!/bin/sh\n", "x86_64", "a script, not a compiled server"),
    (b"", "x86_64", NO_ELF),
    (b"MZ" + bytes(62), "x86_64", NO_ELF),
    (elf_file()[:40], "x86_64", NO_ELF),
    (elf_file(ident=NO_CLASS), "x86_64", NO_ELF),
])
def test_a_handed_in_binary_is_described_from_its_elf_header(head, machine, said):
    assert P.describe_binary(head, machine) == said


def test_a_damaged_header_is_described_never_an_error():
    rng = random.Random(2024)
    kinds = ("", NO_ELF, "an ELF binary for another machine (e_machine ")
    said = set()
    for i in range(2000):
        head = bytearray(elf_file())
        for _ in range(rng.randint(1, 4)):
            head[rng.randrange(20)] = rng.randrange(256)
        got = P.describe_binary(bytes(head[:rng.randrange(65)] if i % 4 == 0 else head),
                                "x86_64")
        said.add(next((k for k in kinds[1:] if got.startswith(k)), got))
    assert said == set(kinds), said


@pytest.mark.slow
@pytest.mark.sandbox
def test_c_for_an_older_gcc_is_built_with_the_retry_named_and_then_graded(tmp_path):
    why = sandbox.available()
    if why:
        pytest.skip(f"no sandbox: {why}")
    sub = kit_fixture("implicit_decl", tmp_path)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "analysis", "grade", str(sub), "--quick",
                        "--runs", "2", "--no-reference", "--no-progress", "--skip",
                        "consistency,idle,speed,design,probe,pause", "--out", str(out)],
                       capture_output=True, text=True, cwd=REPO, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    ev = json.loads((out / "implicit_decl" / "evidence.json").read_text())
    c = {x["id"]: x for x in ev["checks"]}
    build = "\n".join(c["build"]["evidence"])
    assert c["build"]["status"] == "fail" and c["build"]["fraction"] == 0.0
    assert "(with -Wno-error=implicit-function-declaration" in build
    assert "passing argument 3 of 'pthread_create' from incompatible pointer type" in build
    assert "built so far: main1, main2, main3, main4" in build
    for cid in ("binaries", "cmdline", "workload"):
        assert c[cid]["status"] == "pass", (cid, c[cid])
