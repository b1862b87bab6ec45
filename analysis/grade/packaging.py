"""How submissions really arrive, told apart: what a handed-in binary is, which build step
to try next, and what a failed link means. Pure functions of bytes and text; the worker
runs the steps (docs/grading.md, "build").
"""

import os

ELF_MACHINES = {"x86_64": 62, "aarch64": 183, "i686": 3, "riscv64": 243}
MACHO = (b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe",
         b"\xca\xfe\xba\xbe")


def describe_binary(head: bytes, machine: str | None = None) -> str:
    """'' when `head` (the first 64 bytes of a file) starts an executable this machine runs,
    else what it is instead."""
    machine = machine or os.uname().machine
    if head[:4] in MACHO:
        return "a Mach-O binary (macOS), which Linux cannot run"
    if head[:2] == b"#!":
        return "a script, not a compiled server"
    if head[:4] != b"\x7fELF":
        return "not an executable (no ELF header)"
    want = ELF_MACHINES.get(machine)
    got = int.from_bytes(head[18:20], "little" if head[5:6] == b"\x01" else "big")
    if head[4:5] != b"\x02" or (want is not None and got != want):
        return f"an ELF binary for another machine (e_machine {got}, this is {machine})"
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


def multiple_definitions(output: str) -> bool:
    """A link that failed because globals are defined in a header included twice: gcc >= 10
    defaults to -fno-common."""
    return "multiple definition of" in output


FCOMMON_FIX = ("the link failed with 'multiple definition of ...' (globals defined in a header "
               "that several files include; gcc >= 10 refuses that): built again from "
               "scratch (make -B) with -fcommon. Fix: declare the globals `extern` in the "
               "header and define them once in one .c file")
