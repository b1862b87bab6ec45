"""What a sanitized build links with, from its ELF symbol tables alone (standard library
only; the binary is the submission's, so every offset and count in it is checked and a
malformed file is an answer, never a crash): whether the program overrides a sanitizer's
hooks (its compiled-in options and suppressions, the weak callbacks a report goes through)
or calls the functions that redirect reports or annotate accesses, whether the runtime is
really linked, and whether the program brings libraries or a loader of its own.

A hook counts against a check only when a sanitizer runtime the binary links with (read
from the system's own copy) exports its name: the one place the runtime's calls can reach
the program's code. A program's `__asan_default_options` changes nothing ThreadSanitizer
sees, so the race check names it as unread and judges the run; the memory check, whose
runtime calls it, fails it. When a runtime cannot be read, every hook counts.

The names are the ones gcc 12's runtimes (libtsan.so.2, libasan.so.8, libubsan.so.1,
liblsan.so.0) export as weak definitions a program may replace, or as functions that
send reports elsewhere. A program that defines one of them decides, from inside, what the
grader would otherwise read from its output: that is tampering, whatever it returns."""

import functools
import itertools
import os
import re

from analysis import elf
from analysis.elf import Malformed
from analysis.grade.trust import safeio

READ_CAP = 64 << 20        # bytes of a binary read at most: a kit server is well under 1 MiB

# Defined by the program: the runtime then takes its options, suppressions or report
# handling from the program. `__<tool>_default_options` / `_suppressions` for every tool.
_DEFAULTS = re.compile(r"__\w+_default_(options|suppressions)")
HOOKS = {
    "__tsan_on_report": "called with each ThreadSanitizer report",
    "_ZN6__tsan8OnReportEPKNS_10ReportDescEb": "__tsan::OnReport, which can suppress a "
                                               "ThreadSanitizer report",
    "_ZN6__tsan10OnFinalizeEb": "__tsan::OnFinalize, which decides ThreadSanitizer's "
                                "exit status",
    "_ZN6__tsan12OnInitializeEv": "__tsan::OnInitialize, run inside ThreadSanitizer's start",
    "__tsan_symbolize_external": "writes the frames of ThreadSanitizer's reports",
    "__tsan_symbolize_external_ex": "writes the frames of ThreadSanitizer's reports",
    "__asan_on_error": "called with each AddressSanitizer report",
    "__ubsan_on_report": "called with each UBSan report",
    "__sanitizer_report_error_summary": "receives each report's summary line",
    "__sanitizer_on_print": "receives every line a sanitizer prints",
}
# Referenced (or defined) by the program: called, they send reports, or the end of the
# process after one, where the program says.
REDIRECTS = {
    "__sanitizer_set_report_path": "sends the reports to a file of the program's choice",
    "__sanitizer_set_report_fd": "sends the reports to a descriptor of the program's choice",
    "__sanitizer_set_death_callback": "runs the program's code when a sanitizer ends it",
    "__asan_set_death_callback": "runs the program's code when AddressSanitizer ends it",
    "__asan_set_error_report_callback": "hands each AddressSanitizer report to the program",
}
# Referenced: the program tells the sanitizer what to ignore or what synchronises (a race
# or an overflow silenced from inside), through the runtime's annotation interface.
ANNOTATIONS = {
    "__tsan_acquire": "invents synchronisation ThreadSanitizer believes",
    "__tsan_release": "invents synchronisation ThreadSanitizer believes",
    "__tsan_ignore_thread_begin": "has ThreadSanitizer ignore a thread's accesses",
    "__asan_unpoison_memory_region": "has AddressSanitizer accept accesses it would report",
}
ANNOTATION_PREFIXES = {"Annotate": "a ThreadSanitizer annotation (ignore, benign race, "
                                   "happens-before)",
                       "__tsan_mutex_": "tells ThreadSanitizer a lock is taken or released"}
RUNTIMES = {"tsan": "__tsan_init", "asan": "__asan_init"}
SYSTEM_DIRS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/libexec/")
# A sanitizer runtime among a binary's DT_NEEDED, by its soname; looked up where the
# system's loader looks (the multiarch folders first), never where the binary says.
RUNTIME_SONAME = re.compile(r"lib(tsan|asan|ubsan|lsan|hwasan|msan)\.so(\.\d+)*")
LIBRARY_DIRS = tuple(f"{d}{os.uname().machine}-linux-gnu/" for d in ("/lib/", "/usr/lib/")) + (
    "/lib64/", "/usr/lib64/", "/lib/", "/usr/lib/")


class Elf:
    """symbols: {name: defined?} (global and weak, from .symtab, .dynsym and the dynamic
    segment the loader reads); needed, paths (RPATH/RUNPATH), audit: the dynamic
    section's; interp: the loader asked for ('' when none). Malformed when the bytes
    cannot be read so (analysis/elf.py, with its caps for a hostile file)."""

    def __init__(self, data: bytes):
        image = elf.Elf(data)
        loader = image.loader()
        self.symbols: dict = {}
        self.needed, self.paths, self.audit = loader.needed, loader.paths, loader.audit
        self.interp = loader.interp
        own = image.symbol_tables(elf.SHT_SYMTAB, elf.SHT_DYNSYM)
        for table in itertools.chain([loader.symbols] if loader.symbols else [], own):
            for name, sym in image.symbols(table, _seen_by_loader):
                name = name.split("@")[0]
                self.symbols[name] = self.symbols.get(name, False) or sym.defined


def _seen_by_loader(sym: elf.Symbol) -> bool:
    """Named, and global or weak: a local symbol binds nothing outside its object."""
    return bool(sym.name and sym.bind)


def read(path) -> Elf:
    """The binary at path (never through a link, at most READ_CAP bytes); Malformed when it
    cannot be read as ELF."""
    try:
        data, size = safeio.read_bytes(path, READ_CAP)
    except (OSError, safeio.Unsafe) as e:
        raise Malformed(f"not readable: {e}") from None
    if size > len(data):
        raise Malformed(f"{size} bytes, over the {READ_CAP >> 20} MiB read")
    return Elf(data)


@functools.lru_cache(maxsize=16)
def _exports(soname: str) -> frozenset | None:
    """The names the system's copy of a library exports (defined or weak, read as the
    loader reads them), or None when it cannot be found or read. A soname is a link to the
    library's file: followed, but only to a file in the system's folders."""
    for folder in LIBRARY_DIRS:
        path = os.path.realpath(folder + soname)
        if not path.startswith(SYSTEM_DIRS):
            continue
        try:
            return frozenset(n for n, defined in read(path).symbols.items() if defined)
        except Malformed:
            continue
    return None


def runtime_exports(elf: Elf) -> frozenset | None:
    """Every name the sanitizer runtimes `elf` needs export: the hooks those runtimes can
    call or take; None when it needs none or one cannot be read (then every hook counts)."""
    libs = [n for n in elf.needed if RUNTIME_SONAME.fullmatch(n)]
    names = [_exports(n) for n in libs]
    if not libs or None in names:
        return None
    return frozenset().union(*names)


def _hooks(elf: Elf) -> list:
    """(NAME, 'defines NAME (what it does)') for each hook the program overrides, (NAME,
    'calls NAME (...)') for each report redirection and annotation it calls, in name order."""
    found = []
    for name, defined in sorted(elf.symbols.items()):
        if defined and (_DEFAULTS.fullmatch(name) or name in HOOKS):
            what = HOOKS.get(name) or ("compiled-in options" if name.endswith("options")
                                       else "compiled-in suppressions")
            found.append((name, f"defines {name} ({what})"))
        elif name in REDIRECTS:
            found.append((name, f"{'defines' if defined else 'calls'} {name} "
                                f"({REDIRECTS[name]})"))
        elif not defined and (what := ANNOTATIONS.get(name) or next(
                (w for p, w in ANNOTATION_PREFIXES.items() if name.startswith(p)), "")):
            found.append((name, f"calls {name} ({what})"))
    return found


def tampering(elf: Elf) -> list:
    """Every hook line of the program (_hooks), whichever runtime reads it."""
    return [line for _, line in _hooks(elf)]


def unchecked(elf: Elf, runtime: str) -> str:
    """'' when the binary's hooks are all in its own symbol tables and it uses the system's
    sanitizer runtime (`runtime`: tsan, asan); else why its symbols cannot settle it."""
    init = RUNTIMES[runtime]
    if init not in elf.symbols:
        return (f"not built with the sanitizer (no reference to {init}: does its Makefile "
                "pass CFLAGS and LDFLAGS on?)")
    if elf.symbols[init]:
        return ("the sanitizer runtime is linked into the binary: its hooks cannot be told "
                "from the program's")
    own = [f"library path {p}" for p in elf.paths]
    if elf.interp and not elf.interp.startswith(SYSTEM_DIRS):
        own.insert(0, f"loader {elf.interp}")
    own += [f"audit library {a}" for a in elf.audit]
    own += [f"library {n}" for n in elf.needed if "/" in n]
    if own:
        return "it loads code of its own choosing (" + ", ".join(own[:3]) + ")"
    return ""


def inspect(path, runtime: str) -> tuple:
    """(tampering lines, '' or why the symbols cannot clear the binary, the hooks it has
    that its runtimes do not read) for the sanitized binary at path; `runtime`: tsan or
    asan. Never raises on what the file holds."""
    try:
        elf = read(path)
    except Malformed as e:
        return [], f"could not read its symbols: {e}", []
    why = unchecked(elf, runtime)
    if elf.symbols.get(RUNTIMES[runtime]):   # the runtime's own weak hooks are in it too
        return [], why, []
    reached = runtime_exports(elf)
    hooks = _hooks(elf)
    counted = [line for name, line in hooks if reached is None or name in reached]
    unread = [line for name, line in hooks if reached is not None and name not in reached]
    return counted, why, unread
