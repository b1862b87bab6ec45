"""Names for the addresses a lock profile holds (the sites of lock objects, the frames of
contended call stacks): ELF function symbols from an object's .symtab, its separate debug
file, or its .dynsym, read by analysis/elf.py; C++ names demangled by c++filt when it is
installed. The objects are named by a dump the profiled program could forge, so only
regular files of a sane size are read, and a file that is not ELF as it claims has no
names."""

import bisect
import os
import shutil
import stat
import subprocess
import zlib
from pathlib import Path

from analysis import elf


class Symbols:
    """Function names from an ELF object's .symtab, or from its separate debug file when one
    is installed (by build ID or .gnu_debuglink, where gdb looks), or from its .dynsym: names
    the sites dladdr could not (static functions, a program that exports nothing). An
    object with none of them is `stripped`."""

    def __init__(self):
        self.cache: dict = {}
        self.stripped: set = set()

    def table(self, path: str) -> tuple:
        """The dump names the object: only a regular file of a sane size is read (a forged
        dump could name a FIFO or /dev/zero), and so is a debug file."""
        if path not in self.cache:
            try:
                data = read_object(path)
                found = _functions(data, symtab_only=True)
                if not found[0]:
                    debug = debug_file(path, data)
                    found = _functions(read_object(debug), True) if debug else ([], [])
                if not found[0]:
                    found = _functions(data)
                    self.stripped.add(path)
                self.cache[path] = found
            except (OSError, elf.Malformed):
                self.cache[path] = ([], [])
        return self.cache[path]

    def name(self, path: str, vaddr: int) -> str | None:
        """'function+0xoff' of the function holding the return address vaddr."""
        starts, funcs = self.table(path)
        i = bisect.bisect_right(starts, vaddr - 1) - 1
        if i >= 0 and vaddr - 1 < funcs[i][0] + funcs[i][1]:
            return f"{funcs[i][2]}+{vaddr - funcs[i][0]:#x}"
        return None


MAX_OBJECT = 1 << 30  # bytes of an ELF object read for its symbols
DEBUG_ROOT = Path("/usr/lib/debug")


def read_object(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_OBJECT:
            return b""
        return f.read(MAX_OBJECT)


def _image(data: bytes) -> elf.Elf:
    """The object's bytes as ELF, uncapped: any object a program loads is read whole, a
    long C++ name or a large table included."""
    return elf.Elf(data, max_symbols=None, max_name=None)


def debug_file(path: str, data: bytes) -> str | None:
    """The separate debug file installed for the object: by its build ID
    (/usr/lib/debug/.build-id/ab/cdef.debug), else by its .gnu_debuglink name beside it,
    in .debug/ there or under /usr/lib/debug, with the link's CRC matching. Malformed
    when the object cannot be read as ELF."""
    image = _image(data)
    hexid = image.build_id()
    if len(hexid) > 2:
        cand = DEBUG_ROOT / ".build-id" / hexid[:2] / f"{hexid[2:]}.debug"
        if cand.is_file():
            return str(cand)
    link = image.debuglink()
    if not link:
        return None
    name, crc = link
    here = Path(path).resolve().parent
    for cand in (here / name, here / ".debug" / name, DEBUG_ROOT / here.relative_to("/") / name):
        if "/" not in name and cand.is_file() and zlib.crc32(read_object(str(cand))) == crc:
            return str(cand)
    return None


def _is_function(sym: elf.Symbol) -> bool:
    return sym.type == elf.STT_FUNC and bool(sym.value and sym.size)


def _functions(data: bytes, symtab_only: bool = False) -> tuple:
    """(sorted starts, [(start, size, name)]) of the FUNC symbols of an ELF image: its
    .symtab, or its .dynsym where it has none (unless symtab_only)."""
    image = _image(data)
    tabs = list(image.symbol_tables(elf.SHT_SYMTAB)) or (
        [] if symtab_only else list(image.symbol_tables(elf.SHT_DYNSYM)))
    funcs = sorted((sym.value, sym.size, name) for tab in tabs
                   for name, sym in image.symbols(tab, _is_function))
    return [f[0] for f in funcs], funcs


def demangle(names: list) -> dict:
    """C++ names made readable by c++filt when it is installed; others as they are."""
    mangled = sorted({n for n in names if n.startswith("_Z")})
    tool = shutil.which("c++filt")
    if not mangled or tool is None:
        return {}
    try:
        p = subprocess.run([tool], input="\n".join(mangled), capture_output=True, text=True,
                           timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    plain = p.stdout.splitlines()
    return dict(zip(mangled, plain)) if len(plain) == len(mangled) else {}


def name_sites(recs: list) -> None:
    """Each record's site as 'function+0xoff (object)', looked up in .symtab where the
    interposer's dladdr had no name, C++ names demangled."""
    syms = Symbols()
    for r in recs:
        obj, vaddr = r.get("site_object"), r.get("site_vaddr")
        if obj and vaddr and r["site"].startswith("0x"):
            found = syms.name(obj, int(vaddr, 16))
            if found:
                r["site"] = f"{found} ({Path(obj).name})"
            elif obj in syms.stripped:
                r["site"] = (f"0x{int(vaddr, 16):x} ({Path(obj).name}, stripped; no debug "
                             "symbols installed)")
    funcs = [r["site"].split("+", 1)[0] for r in recs]
    plain = demangle(funcs)
    for r, f in zip(recs, funcs):
        if f in plain:
            r["site"] = plain[f] + r["site"][len(f):]
