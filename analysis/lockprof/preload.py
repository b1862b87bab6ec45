"""The interposer's side every lock tool shares (lockbench profile, lockbench compare): the
locks liblockprof.so can swap in (its one list, common/swap_locks.h), the program and the
interposer checked before anything starts (found, executable, dynamically linked, of the
interposer's machine), the one-line errors and the command line's shape (options, '--',
the program). Standard library only (the ELF reader, analysis/elf.py, is too): --help
answers with any Python 3.11."""

import argparse
import contextlib
import os
import re
import shutil
import signal
from pathlib import Path

from analysis import elf

REPO = Path(__file__).resolve().parents[2]
SWAP_LOCK_LIST = REPO / "common" / "swap_locks.h"


def read_swap_locks(path: Path = SWAP_LOCK_LIST) -> tuple[dict, dict]:
    """What the interposer can swap in, from its one list (common/swap_locks.h, which
    `lockserver --list-locks` prints and liblockprof.so is built on): the mutex locks and the
    rwlock-only ones, name -> what it is. Read as text, so that --help needs no build."""
    mutex, rw_only = {}, {}
    for m in re.finditer(r'^\s*\{"([a-z0-9-]+)", (true|false), "((?:[^"\\]|\\.)*)"\},\s*$',
                         path.read_text(), re.M):
        (rw_only if m[2] == "true" else mutex)[m[1]] = m[3]
    return mutex, rw_only


MUTEX_LOCK_TEXT, RW_ONLY_LOCK_TEXT = read_swap_locks()
MUTEX_LOCKS = tuple(MUTEX_LOCK_TEXT)
RW_ONLY_LOCKS = tuple(RW_ONLY_LOCK_TEXT)
SWAP_LOCKS = (*MUTEX_LOCKS, *RW_ONLY_LOCKS)
# the names these locks had before they took their strategy names
RENAMED = {"ticket": "ticketlock", "ttas": "ttas-backoff", "futex": "futex-mutex",
           "phase-fair": "pflock", "bravo": "bravo-pflock"}
RW_LOCKS = (*RW_ONLY_LOCKS, *MUTEX_LOCKS, "pthread")
NOT_A_LOCK = {"flat-combining": "flat combining cannot replace a pthread lock: a combiner "
              "runs the critical sections it is handed, but the one between a pthread lock "
              "and unlock call is the caller's own code, which cannot be handed over"}
# the trace's variables outside the LOCKPROF_ family, which the interposer ignores
RENAMED_ENV = {f"LOCKTRACE_{v}": f"LOCKPROF_TRACE_{v}" for v in ("FD", "FILE", "MAX")}


class RefusedError(Exception):
    """Bad input found before the program starts (exit 2, one line)."""


class FailedError(Exception):
    """A failure after the program started (exit 1, one line)."""


class Parser(argparse.ArgumentParser):
    """argparse with one line on a bad command line (--help shows the usage)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def lock_name(name: str) -> str:
    """A swap lock's name; a lock that cannot stand in for a pthread one says why, and an
    old name gives the new one."""
    if name in NOT_A_LOCK:
        raise argparse.ArgumentTypeError(NOT_A_LOCK[name])
    if name in RENAMED:
        raise argparse.ArgumentTypeError(f"{name!r} is now called {RENAMED[name]!r} "
                                         "(the name of its lockserver strategies)")
    return name


def parse_command(ap: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """ap's options before '--' (or before the first word that is not one), and in
    `command` the program and its arguments after it; exit 2 on anything wrong."""
    if "--" in argv:
        cut = argv.index("--")
        a = ap.parse_args(argv[:cut])
        if a.command:
            ap.error(f"unexpected {a.command[0]!r} before '--'")
        a.command = argv[cut + 1:]
        return a
    return ap.parse_args(argv)


def find_program(name: str) -> Path:
    """The executable `name` names (a path, or a command on PATH)."""
    found = name if "/" in name else shutil.which(name)
    if found is None:
        raise RefusedError(f"program {name!r} not found on PATH")
    path = Path(found)
    if not path.is_file():
        raise RefusedError(f"program {name} not found")
    if not os.access(path, os.X_OK):
        raise RefusedError(f"program {name} is not executable")
    return path.resolve()


def elf_header(path: Path, head: bytes) -> tuple:
    """(class, machine, has PT_INTERP) of a 64- or 32-bit ELF file whose first bytes are
    head, read by analysis/elf.py (elf.Malformed when they cannot be read so); a program
    with no PT_INTERP is linked statically (a static PIE too)."""
    header = elf.Elf(head)
    if not header.wide:
        return 1, header.machine, True
    with path.open("rb") as f:   # its start only: a program can be large
        start = f.read(min(header.segments_end(), os.fstat(f.fileno()).st_size))
    segments = elf.Elf(start).segments()
    return 2, header.machine, any(s.type == elf.PT_INTERP for s in segments)


def lib_machine(lib: Path) -> int | None:
    """The interposer's machine (e_machine); None when it is not an ELF file, which no
    program matches."""
    with lib.open("rb") as f:
        head = f.read(64)
    try:
        return elf.Elf(head).machine
    except elf.Malformed:
        return None


def check_linkage(program: Path, lib: Path) -> None:
    """RefusedError unless the preloaded library can see the program's lock calls: a script (its
    interpreter is checked when it runs), or a dynamically linked ELF program of the
    library's class and machine. A program whose header or program headers cannot be read
    is no ELF program: the kernel would not run it either."""
    try:
        with program.open("rb") as f:
            head = f.read(64)
        if head[:2] == b"#!":
            return
        try:
            if len(head) < 64:   # no 64-bit header: nothing the interposer can join
                raise elf.Malformed("shorter than a 64-bit ELF header")
            cls, machine, dynamic = elf_header(program, head)
        except elf.Malformed:
            raise RefusedError(f"{program} is neither an ELF program nor a script") from None
        wanted = lib_machine(lib)
    except OSError as e:
        raise RefusedError(f"cannot read {program}: {e.strerror or e}") from None
    if cls != 2 or machine != wanted:
        raise RefusedError(f"{program} is built for another architecture than the interposer "
                      f"{lib.name}; it cannot be preloaded")
    if not dynamic:
        raise RefusedError(f"{program} is statically linked: an LD_PRELOAD interposer cannot see "
                      "its locks (link it dynamically to profile it)")


def refuse_renamed_env() -> None:
    """RefusedError when the caller's environment sets a trace variable by its old name."""
    for old, new in RENAMED_ENV.items():
        if os.environ.get(old):
            raise RefusedError(f"${old} is now called ${new}; set that instead (the "
                               "interposer ignores the old name)")


TOOLS = ("client", "lockserver", "main1")  # installed beside liblockprof.so (CMakeLists.txt)


def installed_libs() -> list:
    """Where an install (cmake --install ... --prefix P) put liblockprof.so, found from its
    tools on PATH: P/bin/client -> P/lib (or P/lib64, P/lib/<multiarch>, as GNUInstallDirs
    names the folder)."""
    out = []
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            prefix = Path(found).resolve().parent.parent
            out += [prefix / "lib" / "liblockprof.so", prefix / "lib64" / "liblockprof.so",
                    *sorted(prefix.glob("lib/*-linux-gnu*/liblockprof.so"))]
    return out


def find_lib() -> Path:
    """The interposer: $LOCKPROF_LIB; else the build's ($LOCKBENCH_BIN_DIR, default
    build/release); else an installed one, beside the first of TOOLS on PATH."""
    refuse_renamed_env()
    given = os.environ.get("LOCKPROF_LIB")
    if given:
        if not Path(given).is_file():
            raise RefusedError(f"the interposer {given} ($LOCKPROF_LIB) is not a file")
        return Path(given).resolve()
    built = Path(os.environ.get("LOCKBENCH_BIN_DIR", REPO / "build" / "release"))
    for lib in (built / "liblockprof.so", *installed_libs()):
        if lib.is_file():
            return lib.resolve()
    raise RefusedError(f"the interposer {built / 'liblockprof.so'} is not built (cmake --preset "
                       "release && cmake --build --preset release), and no installed one is "
                       f"beside {' or '.join(TOOLS)} on PATH")


def describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with status {code}"
