"""What a sanitized build links with, from its ELF symbol tables alone (standard library
only; the binary is the submission's, so every offset and count in it is checked and a
malformed file is an answer, never a crash): whether the program overrides a sanitizer's
hooks (its compiled-in options and suppressions, the weak callbacks a report goes through)
or calls the functions that redirect reports or annotate accesses, whether the runtime is
really linked, and whether the program brings libraries or a loader of its own.

The names are the ones gcc 12's runtimes (libtsan.so.2, libasan.so.8, libubsan.so.1,
liblsan.so.0) export as weak definitions a program may replace, or as functions that
send reports elsewhere. A program that defines one of them decides, from inside, what the
grader would otherwise read from its output: that is tampering, whatever it returns."""

import re
import struct

from analysis.grade.trust import safeio

READ_CAP = 64 << 20        # bytes of a binary read at most: a kit server is well under 1 MiB
MAX_SECTIONS = 1 << 16
MAX_SYMBOLS = 1 << 21
MAX_NAME = 4096

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

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
SHT_SYMTAB, SHT_DYNSYM = 2, 11
DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 1, 4, 5, 6, 10, 11
DT_RPATH, DT_RUNPATH, DT_GNU_HASH = 15, 29, 0x6FFFFEF5
DT_AUDIT, DT_DEPAUDIT = 0x6FFFFEFC, 0x6FFFFEFB


class Malformed(Exception):  # noqa: N818 - reads as "symbols.Malformed"
    """The file is not an ELF file we can read symbols from; the message says why."""


class Elf:
    """symbols: {name: defined?} (global and weak, from .symtab, .dynsym and the dynamic
    segment the loader reads); needed, paths (RPATH/RUNPATH), audit: the dynamic
    section's; interp: the loader asked for ('' when none)."""

    def __init__(self, data: bytes):
        self.data = data
        if len(data) < 16 or data[:4] != b"\x7fELF":
            raise Malformed("not an ELF file")
        if data[4] not in (1, 2) or data[5] not in (1, 2):
            raise Malformed("an ELF class or byte order that does not exist")
        self.wide = data[4] == 2
        self.end = "<" if data[5] == 1 else ">"
        self.symbols: dict = {}
        self.needed, self.paths, self.audit, self.interp = [], [], [], ""
        try:
            self._read()
        except (struct.error, ValueError, OverflowError, IndexError) as e:
            raise Malformed(f"malformed ({type(e).__name__})") from None

    # -- reading, bounds-checked ------------------------------------------------------------
    def _u(self, fmt: str, off: int) -> tuple:
        if off < 0 or off + struct.calcsize(self.end + fmt) > len(self.data):
            raise Malformed(f"a table runs past the end of the file (offset {off})")
        return struct.unpack_from(self.end + fmt, self.data, off)

    def _str(self, table: int, size: int, off: int) -> str:
        if off >= size or table + off >= len(self.data):
            raise Malformed("a name outside its string table")
        stop = self.data.find(b"\0", table + off, min(table + size, len(self.data),
                                                       table + off + MAX_NAME))
        if stop < 0:
            raise Malformed("an unterminated name")
        return self.data[table + off:stop].decode("utf-8", "replace")

    def _read(self) -> None:
        if self.wide:
            phoff, shoff = self._u("Q", 32)[0], self._u("Q", 40)[0]
            phentsize, phnum, shentsize, shnum = self._u("HHHH", 54)
        else:
            phoff, shoff = self._u("I", 28)[0], self._u("I", 32)[0]
            phentsize, phnum, shentsize, shnum = self._u("HHHH", 42)
        self._segments(phoff, phentsize, phnum)
        self._sections(shoff, shentsize, shnum)

    def _segments(self, off: int, size: int, num: int) -> None:
        if not num:
            return
        if size < (56 if self.wide else 32):
            raise Malformed("program headers too small")
        loads, dynamic = [], None
        for i in range(num):
            p = off + i * size
            if self.wide:
                kind, _, offset, vaddr, _, filesz = self._u("IIQQQQ", p)
            else:
                kind, offset, vaddr, _, filesz = self._u("IIIII", p)
            if kind == PT_LOAD:
                loads.append((vaddr, offset, filesz))
            elif kind == PT_INTERP:
                self.interp = self.data[offset:offset + min(filesz, MAX_NAME)].split(
                    b"\0")[0].decode("utf-8", "replace")
            elif kind == PT_DYNAMIC:
                dynamic = (offset, filesz)
        if dynamic:
            self._dynamic(*dynamic, loads)

    def _at(self, vaddr: int, loads: list) -> int:
        """The file offset of a virtual address, through the loaded segments."""
        for start, offset, filesz in loads:
            if start <= vaddr < start + filesz:
                return offset + (vaddr - start)
        raise Malformed(f"address {vaddr:#x} is in no loaded segment")

    def _dynamic(self, off: int, size: int, loads: list) -> None:
        step = 16 if self.wide else 8
        tags: dict = {}
        strings: list = []
        for p in range(off, off + min(size, len(self.data)), step):
            tag, val = self._u("qQ" if self.wide else "iI", p)
            if tag == 0:
                break
            if tag in (DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_AUDIT, DT_DEPAUDIT):
                strings.append((tag, val))
            else:
                tags.setdefault(tag, val)
        if DT_STRTAB not in tags:
            return
        table = self._at(tags[DT_STRTAB], loads)
        tsize = tags.get(DT_STRSZ) or len(self.data) - table
        for tag, val in strings:
            text = self._str(table, tsize, val)
            {DT_NEEDED: self.needed, DT_RPATH: self.paths, DT_RUNPATH: self.paths}.get(
                tag, self.audit).append(text)
        if DT_SYMTAB in tags:
            count = self._dynamic_count(tags, loads)
            self._symbols(self._at(tags[DT_SYMTAB], loads), count,
                          tags.get(DT_SYMENT, 24 if self.wide else 16), table, tsize)

    def _dynamic_count(self, tags: dict, loads: list) -> int:
        """How many dynamic symbols there are: the loader's hash tables say (DT_HASH's
        chain count; DT_GNU_HASH's last chain's end)."""
        if DT_HASH in tags:
            return self._u("II", self._at(tags[DT_HASH], loads))[1]
        if DT_GNU_HASH not in tags:
            return 0
        h = self._at(tags[DT_GNU_HASH], loads)
        nbuckets, symoffset, bloom, _ = self._u("IIII", h)
        if nbuckets > MAX_SYMBOLS or bloom > MAX_SYMBOLS:
            raise Malformed("a hash table too large")
        buckets = h + 16 + bloom * (8 if self.wide else 4)
        last = max((self._u("I", buckets + 4 * i)[0] for i in range(nbuckets)), default=0)
        if last < symoffset:
            return symoffset
        chain = buckets + 4 * nbuckets
        for i in range(last - symoffset, MAX_SYMBOLS):
            if self._u("I", chain + 4 * i)[0] & 1:
                return symoffset + i + 1
        raise Malformed("a hash chain that does not end")

    def _sections(self, off: int, size: int, num: int) -> None:
        if not off:
            return
        if size < (64 if self.wide else 40):
            raise Malformed("section headers too small")
        if num == 0:   # more sections than the header's field holds: section 0 says
            num = self._section(off)[5]
        if num > MAX_SECTIONS:
            raise Malformed(f"{num} sections")
        heads = [self._section(off + i * size) for i in range(num)]
        for kind, offset, sz, link, entsize, _ in heads:
            if kind in (SHT_SYMTAB, SHT_DYNSYM) and entsize:
                if link >= num:
                    raise Malformed("a symbol table without its string table")
                _, soff, ssize, _, _, _ = heads[link]
                self._symbols(offset, sz // entsize, entsize, soff, ssize)

    def _section(self, p: int) -> tuple:
        """(type, offset, size, link, entsize, size of section 0's kind: the count)."""
        if self.wide:
            _, kind, _, _, offset, size, link, _, _, entsize = self._u("IIQQQQIIQQ", p)
        else:
            _, kind, _, _, offset, size, link, _, _, entsize = self._u("IIIIIIIIII", p)
        return kind, offset, size, link, entsize, size

    def _symbols(self, off: int, count: int, entsize: int, table: int, tsize: int) -> None:
        if count > MAX_SYMBOLS or entsize < (24 if self.wide else 16):
            raise Malformed(f"a symbol table of {count} entries of {entsize} bytes")
        for i in range(count):
            p = off + i * entsize
            if self.wide:
                name, info, _, shndx = self._u("IBBH", p)
            else:
                name, _, _, info, _, shndx = self._u("IIIBBH", p)
            if not name or info >> 4 == 0:   # unnamed or local: not seen by the loader
                continue
            sym = self._str(table, tsize, name).split("@")[0]
            self.symbols[sym] = self.symbols.get(sym, False) or shndx != 0


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


def tampering(elf: Elf) -> list:
    """'defines NAME (what it does)' for each hook the program overrides, 'calls NAME (...)'
    for each report redirection and annotation it calls, in name order."""
    found = []
    for name, defined in sorted(elf.symbols.items()):
        if defined and (_DEFAULTS.fullmatch(name) or name in HOOKS):
            what = HOOKS.get(name) or ("compiled-in options" if name.endswith("options")
                                       else "compiled-in suppressions")
            found.append(f"defines {name} ({what})")
        elif name in REDIRECTS:
            found.append(f"{'defines' if defined else 'calls'} {name} ({REDIRECTS[name]})")
        elif not defined and (what := ANNOTATIONS.get(name) or next(
                (w for p, w in ANNOTATION_PREFIXES.items() if name.startswith(p)), "")):
            found.append(f"calls {name} ({what})")
    return found


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
    """(tampering lines, '' or why the symbols cannot clear the binary) for the sanitized
    binary at path; `runtime`: tsan or asan. Never raises on what the file holds."""
    try:
        elf = read(path)
    except Malformed as e:
        return [], f"could not read its symbols: {e}"
    why = unchecked(elf, runtime)
    if elf.symbols.get(RUNTIMES[runtime]):   # the runtime's own weak hooks are in it too
        return [], why
    return tampering(elf), why
