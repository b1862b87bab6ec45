"""One ELF file read from its bytes, standard library only: the header, the program headers
and the dynamic segment the loader reads (the loader asked for, the libraries needed, the
library paths, the audit libraries, the dynamic symbols), the section headers and their
names, the symbol tables (.symtab, .dynsym) with their string tables, the build-ID note and
the .gnu_debuglink. The file may be anyone's (a submission's binary, an object a forged
profile dump names), so every offset, count and name is checked against the bytes, and
whatever they hold a call answers or raises Malformed, saying why, never another error.
Reading the file, and how far its path is trusted, is the caller's: the grader reads
through its safe reader, the profiler only regular files."""

import functools
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

# Caps on what a hostile file can make a reader do; a caller that reads only trusted
# objects passes None, and the file's own size is the bound.
MAX_SECTIONS = 1 << 16
MAX_SYMBOLS = 1 << 21      # entries of one symbol table, buckets of a hash table
MAX_NAME = 4096            # bytes of one name

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
SHT_SYMTAB, SHT_DYNSYM = 2, 11
STT_FUNC = 2
SHN_XINDEX = 0xFFFF
NT_GNU_BUILD_ID = 3
DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 1, 4, 5, 6, 10, 11
DT_RPATH, DT_RUNPATH, DT_GNU_HASH = 15, 29, 0x6FFFFEF5
DT_AUDIT, DT_DEPAUDIT = 0x6FFFFEFC, 0x6FFFFEFB
_DT_STRINGS = (DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_AUDIT, DT_DEPAUDIT)


class Malformed(Exception):  # noqa: N818 - reads as "elf.Malformed"
    """The bytes are not an ELF file that can be read so; the message says why."""


class Segment(NamedTuple):
    type: int
    offset: int
    vaddr: int
    filesz: int


class Section(NamedTuple):
    name: int       # where its name starts in the section-name table
    type: int
    offset: int
    size: int
    link: int
    entsize: int


class SymbolTable(NamedTuple):
    offset: int
    count: int
    entsize: int
    strings: int        # the string table's offset and size
    strings_size: int


class Symbol(NamedTuple):
    name: int       # where its name starts in its string table
    value: int
    size: int
    info: int
    shndx: int

    @property
    def bind(self) -> int:
        """0 local, 1 global, 2 weak."""
        return self.info >> 4

    @property
    def type(self) -> int:
        return self.info & 0xF

    @property
    def defined(self) -> bool:
        return self.shndx != 0


class Loader(NamedTuple):
    """What the loader reads (the program headers and the dynamic segment): interp, the
    loader asked for ('' when none); needed (DT_NEEDED), paths (DT_RPATH, DT_RUNPATH),
    audit (DT_AUDIT, DT_DEPAUDIT); symbols, the dynamic symbol table (None when none)."""
    interp: str
    needed: list
    paths: list
    audit: list
    symbols: SymbolTable | None


def _answers(method: Callable) -> Callable:
    """An error of struct or of arithmetic on a value the file holds is the file's fault:
    it leaves as Malformed."""
    @functools.wraps(method)
    def checked(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except (struct.error, ValueError, OverflowError, IndexError) as e:
            raise Malformed(f"malformed ({type(e).__name__})") from None
    return checked


class Elf:
    """An ELF file's bytes (32- or 64-bit, either byte order), read on demand; Malformed
    at once when its identification or header cannot be read. max_symbols, max_name: the
    caps above, or None for none but the file's size. machine: the header's e_machine."""

    def __init__(self, data: bytes, max_symbols: int | None = MAX_SYMBOLS,
                 max_name: int | None = MAX_NAME):
        self.data = data
        if len(data) < 16 or data[:4] != b"\x7fELF":
            raise Malformed("not an ELF file")
        if data[4] not in (1, 2) or data[5] not in (1, 2):
            raise Malformed("an ELF class or byte order that does not exist")
        self.wide = data[4] == 2
        self.end = "<" if data[5] == 1 else ">"
        self.max_symbols = len(data) if max_symbols is None else max_symbols
        self.max_name = len(data) if max_name is None else max_name
        self._sections: list | None = None
        self._names: dict | None = None
        self._header()

    @_answers
    def _header(self) -> None:
        self.machine = self.u("H", 18)[0]
        if self.wide:
            self.phoff, self.shoff = self.u("Q", 32)[0], self.u("Q", 40)[0]
            self.phentsize, self.phnum, self.shentsize, self.shnum = self.u("HHHH", 54)
        else:
            self.phoff, self.shoff = self.u("I", 28)[0], self.u("I", 32)[0]
            self.phentsize, self.phnum, self.shentsize, self.shnum = self.u("HHHH", 42)

    # -- reading, bounds-checked ------------------------------------------------------------
    def u(self, fmt: str, off: int) -> tuple:
        """struct.unpack of fmt (in the file's byte order) at off, inside the file."""
        if off < 0 or off + struct.calcsize(self.end + fmt) > len(self.data):
            raise Malformed(f"a table runs past the end of the file (offset {off})")
        return struct.unpack_from(self.end + fmt, self.data, off)

    def string(self, table: int, size: int, off: int) -> str:
        """The NUL-terminated name at off in the string table at table (size bytes)."""
        if off >= size or table + off >= len(self.data):
            raise Malformed("a name outside its string table")
        stop = self.data.find(b"\0", table + off, min(table + size, len(self.data),
                                                       table + off + self.max_name))
        if stop < 0:
            raise Malformed("an unterminated name")
        return self.data[table + off:stop].decode("utf-8", "replace")

    # -- the loader's view: program headers, the dynamic segment ----------------------------
    def segments_end(self) -> int:
        """How many bytes from the file's start hold its header and program headers, all
        that segments() reads: a caller can read only that much of a large file (capped
        by the file's size, since a hostile header may point anywhere)."""
        header = 64 if self.wide else 52
        return max(header, self.phoff + self.phnum * self.phentsize) if self.phnum else header

    @_answers
    def segments(self) -> list:
        """Each program header, in order."""
        if not self.phnum:
            return []
        if self.phentsize < (56 if self.wide else 32):
            raise Malformed("program headers too small")
        found = []
        for i in range(self.phnum):
            p = self.phoff + i * self.phentsize
            if self.wide:
                kind, _, offset, vaddr, _, filesz = self.u("IIQQQQ", p)
            else:
                kind, offset, vaddr, _, filesz = self.u("IIIII", p)
            found.append(Segment(kind, offset, vaddr, filesz))
        return found

    @_answers
    def loader(self) -> Loader:
        """What the loader reads: the segments, PT_INTERP's name, the last PT_DYNAMIC's
        entries (their names in DT_STRTAB, through the loaded segments)."""
        interp, loads, dynamic = "", [], None
        for seg in self.segments():
            if seg.type == PT_LOAD:
                loads.append(seg)
            elif seg.type == PT_INTERP:
                interp = self.data[seg.offset:seg.offset + min(seg.filesz, self.max_name)]
                interp = interp.split(b"\0")[0].decode("utf-8", "replace")
            elif seg.type == PT_DYNAMIC:
                dynamic = seg
        found = Loader(interp, [], [], [], None)
        return self._dynamic(found, dynamic, loads) if dynamic else found

    def _at(self, vaddr: int, loads: list) -> int:
        """The file offset of a virtual address, through the loaded segments."""
        for seg in loads:
            if seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                return seg.offset + (vaddr - seg.vaddr)
        raise Malformed(f"address {vaddr:#x} is in no loaded segment")

    def _dynamic(self, found: Loader, dynamic: Segment, loads: list) -> Loader:
        step = 16 if self.wide else 8
        tags: dict = {}
        strings: list = []
        for p in range(dynamic.offset, dynamic.offset + min(dynamic.filesz, len(self.data)),
                       step):
            tag, val = self.u("qQ" if self.wide else "iI", p)
            if tag == 0:
                break
            if tag in _DT_STRINGS:
                strings.append((tag, val))
            else:
                tags.setdefault(tag, val)
        if DT_STRTAB not in tags:
            return found
        table = self._at(tags[DT_STRTAB], loads)
        tsize = tags.get(DT_STRSZ) or len(self.data) - table
        for tag, val in strings:
            text = self.string(table, tsize, val)
            {DT_NEEDED: found.needed, DT_RPATH: found.paths, DT_RUNPATH: found.paths}.get(
                tag, found.audit).append(text)
        if DT_SYMTAB not in tags:
            return found
        count = self._dynamic_count(tags, loads)
        return found._replace(symbols=SymbolTable(
            self._at(tags[DT_SYMTAB], loads), count,
            tags.get(DT_SYMENT, 24 if self.wide else 16), table, tsize))

    def _dynamic_count(self, tags: dict, loads: list) -> int:
        """How many dynamic symbols there are: the loader's hash tables say (DT_HASH's
        chain count; DT_GNU_HASH's last chain's end)."""
        if DT_HASH in tags:
            return self.u("II", self._at(tags[DT_HASH], loads))[1]
        if DT_GNU_HASH not in tags:
            return 0
        h = self._at(tags[DT_GNU_HASH], loads)
        nbuckets, symoffset, bloom, _ = self.u("IIII", h)
        if nbuckets > self.max_symbols or bloom > self.max_symbols:
            raise Malformed("a hash table too large")
        buckets = h + 16 + bloom * (8 if self.wide else 4)
        last = max((self.u("I", buckets + 4 * i)[0] for i in range(nbuckets)), default=0)
        if last < symoffset:
            return symoffset
        chain = buckets + 4 * nbuckets
        for i in range(last - symoffset, self.max_symbols):
            if self.u("I", chain + 4 * i)[0] & 1:
                return symoffset + i + 1
        raise Malformed("a hash chain that does not end")

    # -- sections ---------------------------------------------------------------------------
    @_answers
    def sections(self) -> list:
        """Each section header, in order ([] when the file has none)."""
        if self._sections is None:
            self._sections = self._read_sections()
        return self._sections

    def _read_sections(self) -> list:
        if not self.shoff:
            return []
        size = self.shentsize
        if size < (64 if self.wide else 40):
            raise Malformed("section headers too small")
        num = self.shnum
        if num == 0:   # more sections than the header's field holds: section 0 says
            num = self._section(self.shoff).size
        if num > MAX_SECTIONS:
            raise Malformed(f"{num} sections")
        return [self._section(self.shoff + i * size) for i in range(num)]

    def _section(self, p: int) -> Section:
        if self.wide:
            name, kind, _, _, offset, size, link, _, _, entsize = self.u("IIQQQQIIQQ", p)
        else:
            name, kind, _, _, offset, size, link, _, _, entsize = self.u("IIIIIIIIII", p)
        return Section(name, kind, offset, size, link, entsize)

    @_answers
    def section(self, name: str) -> Section | None:
        """The section of that name (the last, should two share it); None when none."""
        if self._names is None:
            heads = self.sections()
            index = self.u("H", 62 if self.wide else 50)[0]
            if index == SHN_XINDEX and heads:   # too large for the field: section 0 says
                index = heads[0].link
            names = heads[index] if index < len(heads) else None
            self._names = {self.string(names.offset, names.size, s.name): s
                           for s in heads} if names else {}
        return self._names.get(name)

    def symbol_tables(self, *types: int) -> Iterator[SymbolTable]:
        """The sections of those types (SHT_SYMTAB, SHT_DYNSYM) as symbol tables, in
        section order, each with the string table its link names."""
        heads = self.sections()
        for sec in heads:
            if sec.type in types and sec.entsize:
                if sec.link >= len(heads):
                    raise Malformed("a symbol table without its string table")
                strings = heads[sec.link]
                yield SymbolTable(sec.offset, sec.size // sec.entsize, sec.entsize,
                                  strings.offset, strings.size)

    def symbols(self, table: SymbolTable,
                keep: Callable[[Symbol], bool]) -> Iterator[tuple]:
        """(name, Symbol) of each entry of the table that keep accepts, in table order; a
        name is read only for those (a malformed one is Malformed)."""
        size = 24 if self.wide else 16
        if table.count > self.max_symbols or table.entsize < size:
            raise Malformed(f"a symbol table of {table.count} entries of {table.entsize} "
                            "bytes")
        entry = struct.Struct(self.end + ("IBBHQQ" if self.wide else "IIIBBH"))
        for p in range(table.offset, table.offset + table.count * table.entsize,
                       table.entsize):
            if p + size > len(self.data):
                raise Malformed(f"a table runs past the end of the file (offset {p})")
            if self.wide:
                name, info, _, shndx, value, sz = entry.unpack_from(self.data, p)
            else:
                name, value, sz, info, _, shndx = entry.unpack_from(self.data, p)
            sym = Symbol(name, value, sz, info, shndx)
            if keep(sym):
                yield self.string(table.strings, table.strings_size, name), sym

    # -- where the debug symbols are --------------------------------------------------------
    @_answers
    def build_id(self) -> str:
        """The build ID (hex) that .note.gnu.build-id's note holds; '' when there is none
        or it does not fit its section."""
        note = self.section(".note.gnu.build-id")
        if note is None:
            return ""
        namesz, descsz, kind = self.u("III", note.offset)
        at = note.offset + 12 + (namesz + 3) // 4 * 4
        if kind != NT_GNU_BUILD_ID or at + descsz > min(note.offset + note.size,
                                                        len(self.data)):
            return ""
        return self.data[at:at + descsz].hex()

    @_answers
    def debuglink(self) -> tuple | None:
        """(file name, CRC-32) that .gnu_debuglink names; None when there is no such
        section."""
        link = self.section(".gnu_debuglink")
        if link is None:
            return None
        stop = self.data.find(b"\0", link.offset, min(link.offset + link.size,
                                                     len(self.data)))
        if stop < 0:
            raise Malformed("an unterminated debug link")
        at = link.offset + (stop - link.offset + 4) // 4 * 4   # the CRC, 4-byte aligned
        if at + 4 > link.offset + link.size:
            raise Malformed("a debug link without its CRC")
        return self.data[link.offset:stop].decode("utf-8", "replace"), self.u("I", at)[0]
