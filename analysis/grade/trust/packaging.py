"""How submissions really arrive, told apart: what a handed-in binary is, which build step
to try next, what a failed build means and which compiler flag undoes it. Pure functions
of bytes and text; the worker runs the steps (docs/grading.md, "build").
"""

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from analysis import elf

ELF_MACHINES = {"x86_64": 62, "aarch64": 183, "i686": 3, "riscv64": 243}
MACHO = (b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe",
         b"\xca\xfe\xba\xbe")


def describe_binary(head: bytes, machine: str | None = None) -> str:
    """'' when `head` (the first 64 bytes of a file) starts an executable this machine runs,
    else what it is instead; its ELF header read by analysis/elf.py."""
    machine = machine or os.uname().machine
    if head[:4] in MACHO:
        return "a Mach-O binary (macOS), which Linux cannot run"
    if head[:2] == b"#!":
        return "a script, not a compiled server"
    try:
        header = elf.Elf(head)
    except elf.Malformed:   # a header cut short or of no class that exists: none the kernel runs
        return "not an executable (no ELF header)"
    want = ELF_MACHINES.get(machine)
    if not header.wide or (want is not None and header.machine != want):
        return (f"an ELF binary for another machine (e_machine {header.machine}, this is "
                f"{machine})")
    return ""


def make_steps(missing: list) -> list:
    """The make command lines a TA tries, in order, after a plain `make` left `missing`
    servers unbuilt: the `all` target, then each missing server by name."""
    if not missing:
        return []
    return [["all"], list(missing)]


def layout_guess(server: str, found: list) -> str:
    """What --layout should name for a missing `server` among the files `found`: `main`
    for main1 when an executable or target of that name was built beside the others (a
    Makefile whose first server is `main`), else NAME for the course to fill in."""
    return "main" if server == "main1" and "main" in found else "NAME"


def multiple_definitions(output: str) -> str:
    """The first line of a link that failed because globals are defined in a header included
    twice (gcc >= 10 defaults to -fno-common), else ''."""
    return next((line.strip() for line in output.splitlines()
                 if "multiple definition of" in line), "")


# What gcc >= 14 refuses in C that gcc 13 let through with a warning (its porting notes),
# by warning option, and its messages where an older compiler does not name the option.
GCC14_ERRORS = ("implicit-function-declaration", "implicit-int", "int-conversion",
                "incompatible-pointer-types")
_GCC14 = re.compile(r"\[-W(?:error=)?(?:" + "|".join(GCC14_ERRORS) + r")\]"
                    r"|implicit declaration of function|return type defaults to")
_ERROR = re.compile(r"\berror:")


def gcc14_errors(output: str) -> str:
    """The first error of a failed compile when every error is one of GCC14_ERRORS (code
    written for an older gcc, or a Makefile asking for them with -Werror=...), else ''."""
    errors = [line.strip() for line in output.splitlines() if _ERROR.search(line)]
    return errors[0] if errors and all(_GCC14.search(e) for e in errors) else ""


FCOMMON_FIX = ("the link failed with 'multiple definition of ...' (globals defined in a header "
               "that several files include; gcc >= 10 refuses that): built again from "
               "scratch (make -B) with -fcommon. Fix: declare the globals `extern` in the "
               "header and define them once in one .c file")
PERMISSIVE_FIX = ("the compile failed only on what gcc >= 14 makes errors in C (implicit "
                  "function declarations, implicit int, int-pointer conversions, incompatible "
                  "pointer types), the first: {first}. Built again from scratch (make -B) with "
                  "them as warnings. Fix: include the header of every function called (or "
                  "declare it before its use) and give every pointer its right type")


@dataclass(frozen=True)
class Retry:
    """A build that failed in a way a compiler flag undoes, tried again with it: the
    compiler wrappers of the retries needed so far come first on make's PATH, for a Makefile
    that names gcc itself too, and add their flags last, after the Makefile's own."""
    name: str
    diagnosis: Callable[[str], str]  # a failed make's output -> the line calling for it, or ''
    fix: str                         # the evidence line; {first}: that line
    flags: tuple                     # for every compiler
    c_flags: tuple = ()              # for the C compilers (gcc, cc, clang) only
    gcc14_c_flags: tuple = ()        # for gcc >= 14 as C compiler too


RETRIES = (
    Retry("fcommon", multiple_definitions, FCOMMON_FIX, ("-fcommon",)),
    # -Wno-error=: older compilers, and a Makefile's -Werror=..., since the last flag wins
    Retry("permissive", gcc14_errors, PERMISSIVE_FIX, (),
          tuple(f"-Wno-error={w}" for w in GCC14_ERRORS), ("-fpermissive",)),
)


def retry_flags(names, compiler: str, gcc_major: int | None) -> list:
    """The flags a wrapper of `compiler` ("gcc", "cc", "g++", "c++", "clang") adds for the
    retries `names`; gcc_major: the version of gcc it runs, None for clang."""
    flags = []
    for r in RETRIES:
        if r.name in names:
            flags += r.flags
            if compiler in ("gcc", "cc", "clang"):
                flags += r.c_flags + (r.gcc14_c_flags if (gcc_major or 0) >= 14 else ())
    return flags
