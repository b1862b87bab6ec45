"""Names for the addresses a lock profile holds (the sites of lock objects, the frames of
contended call stacks): ELF function symbols from an object's .symtab, its separate debug
file, or its .dynsym, read with the standard library only; C++ names demangled by c++filt
when it is installed. The objects are named by a dump the profiled program could forge, so
only regular files of a sane size are read."""

import bisect
import os
import shutil
import stat
import struct
import subprocess
import zlib
from pathlib import Path


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
                    if data[:4] == b"\x7fELF":
                        self.stripped.add(path)
                self.cache[path] = found
            except (OSError, struct.error, IndexError, ValueError):
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


def _sections(data: bytes) -> tuple:
    """(byte order, [section header tuples], {name: header}) of a 64-bit ELF image."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return "<", [], {}
    end = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(end + "Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
    secs = [struct.unpack_from(end + "IIQQQQIIQQ", data, shoff + i * shentsize)
            for i in range(shnum)]
    names = {}
    if shstrndx < len(secs):
        base = secs[shstrndx][4]
        for sec in secs:
            names[data[base + sec[0]:data.index(b"\0", base + sec[0])].decode("latin-1")] = sec
    return end, secs, names


def debug_file(path: str, data: bytes) -> str | None:
    """The separate debug file installed for the object: by its build ID
    (/usr/lib/debug/.build-id/ab/cdef.debug), else by its .gnu_debuglink name beside it,
    in .debug/ there or under /usr/lib/debug, with the link's CRC matching."""
    end, _, names = _sections(data)
    note = names.get(".note.gnu.build-id")
    if note:
        namesz, descsz, kind = struct.unpack_from(end + "III", data, note[4])
        if kind == 3:
            at = note[4] + 12 + (namesz + 3) // 4 * 4
            hexid = data[at:at + descsz].hex()
            cand = DEBUG_ROOT / ".build-id" / hexid[:2] / f"{hexid[2:]}.debug"
            if len(hexid) > 2 and cand.is_file():
                return str(cand)
    link = names.get(".gnu_debuglink")
    if not link:
        return None
    raw = data[link[4]:link[4] + link[5]]
    name = raw[:raw.index(b"\0")].decode("utf-8", "replace")
    crc, = struct.unpack_from(end + "I", raw, (raw.index(b"\0") + 4) // 4 * 4)
    here = Path(path).resolve().parent
    for cand in (here / name, here / ".debug" / name, DEBUG_ROOT / here.relative_to("/") / name):
        if "/" not in name and cand.is_file() and zlib.crc32(read_object(str(cand))) == crc:
            return str(cand)
    return None


def _functions(data: bytes, symtab_only: bool = False) -> tuple:
    """(sorted starts, [(start, size, name)]) of the FUNC symbols of a 64-bit ELF image:
    its .symtab, or its .dynsym where it has none (unless symtab_only)."""
    end, secs, _ = _sections(data)
    tabs = [s for s in secs if s[1] == 2] or ([] if symtab_only else
                                              [s for s in secs if s[1] == 11])
    funcs = []
    for s in tabs:
        strtab = secs[s[6]]
        for st_name, info, _, _, value, size in struct.iter_unpack(
                end + "IBBHQQ", data[s[4]:s[4] + s[5] - s[5] % 24]):
            if info & 0xF == 2 and value and size:
                at = strtab[4] + st_name
                name = data[at:data.index(b"\0", at)].decode("utf-8", "replace")
                funcs.append((value, size, name))
    funcs.sort()
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
