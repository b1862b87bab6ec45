"""analysis/elf.py, the one ELF reader of the grader and the profiler: a tiny file built here
read whole, each kind of hostile file (not ELF, a truncated header, tables past the end, a
huge symbol count, names outside their table, random damage) answered with Malformed and
nothing else, capped and uncapped; and a real program of the system (/bin/true) read as
its loader and nm see it."""

import os
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from analysis import elf
from analysis.tests.helpers import elf_file

SHSTRTAB = b"\0.symtab\0.strtab\0.shstrtab\0"


def tiny(names=(b"main",), name_at=None, sym_at=None, sym_size=None, link=2,
         shoff_delta=0, strtab_end=b"\0") -> bytes:
    """A 64-bit little-endian ELF file: header, .strtab, .shstrtab, .symtab (a null entry
    and one global function a name), the four section headers. The arguments break it."""
    strtab = b"\0" + b"\0".join(names) + strtab_end
    at_str = 64
    at_shstr = at_str + len(strtab)
    at_sym = (at_shstr + len(SHSTRTAB) + 7) // 8 * 8
    syms = bytes(24)
    offset = 1
    for i, name in enumerate(names):
        where = offset if name_at is None else name_at
        syms += struct.pack("<IBBHQQ", where, 0x12, 0, 1, 0x1000 + 0x20 * i, 0x10)
        offset += len(name) + 1
    at_sh = at_sym + len(syms)
    heads = bytes(64)
    symtab = (1, elf.SHT_SYMTAB, at_sym if sym_at is None else sym_at,
              len(syms) if sym_size is None else sym_size, link, 24)
    for name, kind, at, size, lnk, entsize in (symtab, (9, 3, at_str, len(strtab), 0, 0),
                                               (17, 3, at_shstr, len(SHSTRTAB), 0, 0)):
        heads += struct.pack("<IIQQQQIIQQ", name, kind, 0, 0, at, size, lnk, 0, 8, entsize)
    header = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01", 2, 62, 1, 0x1000, 0,
                         at_sh + shoff_delta, 0, 64, 56, 0, 64, 4, 3)
    body = header + strtab + SHSTRTAB
    return body + bytes(at_sym - len(body)) + syms + heads


def read_all(data: bytes, **caps) -> dict:
    """Everything the module reads, in one dict (each symbol table's named entries)."""
    image = elf.Elf(data, **caps)
    tables = image.symbol_tables(elf.SHT_SYMTAB, elf.SHT_DYNSYM)
    return {"loader": image.loader(), "symtab": image.section(".symtab"),
            "symbols": [[(name, s.value, s.size, s.bind, s.type) for name, s in
                         image.symbols(t, lambda s: bool(s.name))] for t in tables],
            "build_id": image.build_id(), "debuglink": image.debuglink()}


def answer(data: bytes, **caps) -> str:
    try:
        read_all(data, **caps)
    except elf.Malformed as e:
        return f"malformed: {e}"
    return "read"


def test_the_tiny_file_reads_whole():
    found = read_all(tiny((b"main", b"helper")))
    assert found["symbols"] == [[("main", 0x1000, 0x10, 1, elf.STT_FUNC),
                                 ("helper", 0x1020, 0x10, 1, elf.STT_FUNC)]]
    assert found["symtab"].type == elf.SHT_SYMTAB
    assert found["loader"] == elf.Loader("", [], [], [], None)
    assert (found["build_id"], found["debuglink"]) == ("", None)


@pytest.mark.parametrize("data, why", [
    pytest.param(b"", "not an ELF file", id="empty"),
    pytest.param(b"#!/bin/sh\nexit 0\n", "not an ELF file", id="script"),
    pytest.param(b"\x7fELF", "not an ELF file", id="magic-only"),
    pytest.param(b"\x7fELF\x03\x01" + bytes(58),
                 "an ELF class or byte order that does not exist", id="class-3"),
    pytest.param(tiny()[:12], "not an ELF file", id="ident-cut"),
    pytest.param(tiny()[:19], "a table runs past the end of the file (offset 18)",
                 id="header-cut-at-machine"),
    pytest.param(tiny()[:36], "a table runs past the end of the file (offset 32)",
                 id="header-cut-at-phoff"),
    pytest.param(tiny()[:60], "a table runs past the end of the file (offset 54)",
                 id="header-cut-at-counts"),
    pytest.param(elf_file([elf.PT_INTERP], phoff=1 << 62),
                 f"a table runs past the end of the file (offset {1 << 62})",
                 id="program-headers-past-end"),
    pytest.param(elf_file([elf.PT_INTERP], phentsize=8), "program headers too small",
                 id="program-headers-too-small"),
    pytest.param(tiny(shoff_delta=10_000), "a table runs past the end of the file",
                 id="sections-past-end"),
    pytest.param(tiny(shoff_delta=1 << 62), "a table runs past the end of the file",
                 id="sections-far-past-end"),
    pytest.param(tiny(sym_size=24 << 30), "a symbol table of 1073741824 entries of 24 bytes",
                 id="symbol-count-huge"),
    pytest.param(tiny(sym_at=1 << 40),
                 "a table runs past the end of the file (offset 1099511627776)",
                 id="symbols-past-end"),
    pytest.param(tiny(name_at=10_000), "a name outside its string table",
                 id="name-out-of-range"),
    pytest.param(tiny(link=99), "a symbol table without its string table",
                 id="string-table-out-of-range"),
])
def test_a_hostile_file_is_malformed_and_says_why(data, why):
    assert answer(data).startswith(f"malformed: {why}")


def test_the_header_names_the_machine_and_how_far_the_program_headers_reach():
    data = elf_file([elf.PT_LOAD, elf.PT_INTERP])
    image = elf.Elf(data)
    assert image.machine == 62 and image.segments_end() == len(data) == 64 + 2 * 56
    start = elf.Elf(data[:image.segments_end()])
    assert [s.type for s in start.segments()] == [elf.PT_LOAD, elf.PT_INTERP]
    assert elf.Elf(tiny()).segments_end() == 64   # no program headers: the header alone
    narrow = struct.pack(">16sHHIIIIIHHHHHH", b"\x7fELF\x01\x02\x01", 2, 8, 1, 0, 0, 0, 0,
                         52, 32, 0, 40, 0, 0)
    assert (elf.Elf(narrow).machine, elf.Elf(narrow).segments_end()) == (8, 52)
    # a hostile header may say any end: the caller caps its read by the file's size
    assert elf.Elf(elf_file([elf.PT_INTERP], phoff=1 << 62)).segments_end() == (1 << 62) + 56


def test_uncapped_the_file_itself_bounds_the_tables():
    # the profiler reads without the caps: no table holds more entries than the file has
    # bytes, and a long name is read to its NUL where the capped reader stops
    uncapped = {"max_symbols": None, "max_name": None}
    for size in (24 << 30, 24 * 100):
        assert answer(tiny(sym_size=size), **uncapped).startswith("malformed: ")
    long = b"_Z" + b"x" * 5000
    assert answer(tiny((long,))) == "malformed: an unterminated name"
    assert read_all(tiny((long,)), **uncapped)["symbols"][0][0][0] == long.decode()


def test_an_unterminated_string_table_is_malformed():
    data = tiny((b"main",), strtab_end=b"")   # the table ends in the middle of "main"
    assert answer(data, max_name=None) == "malformed: an unterminated name"


def test_random_damage_is_an_answer_never_a_crash():
    good = tiny((b"main", b"helper", b"worker"))
    rng = random.Random(2024)
    answers = set()
    for i in range(3000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if i % 4 == 0:
            data = data[:rng.randrange(len(data))]
        for caps in ({}, {"max_symbols": None, "max_name": None}):
            answers.add(answer(bytes(data), **caps).split(":")[0])
    assert answers == {"read", "malformed"}


TRUE = Path("/bin/true")


@pytest.mark.skipif(not TRUE.is_file(), reason="no /bin/true on this system")
def test_a_real_program_reads_as_its_loader_and_nm_see_it():
    image = elf.Elf(TRUE.read_bytes())
    loader = image.loader()
    assert "libc.so.6" in loader.needed and loader.interp.startswith("/lib")
    # the start of the file alone holds the segments
    assert elf.Elf(TRUE.read_bytes()[:image.segments_end()]).segments() == image.segments()
    assert image.machine == {"x86_64": 62, "aarch64": 183}.get(os.uname().machine,
                                                               image.machine)
    assert loader.symbols is not None

    def names(table):
        return {n.split("@")[0] for n, _ in image.symbols(table, lambda s: bool(s.name))}

    # the loader's view (DT_SYMTAB, counted from the hash table) is the .dynsym section
    dynsym = names(next(image.symbol_tables(elf.SHT_DYNSYM)))
    assert dynsym == names(loader.symbols)
    assert "__libc_start_main" in dynsym
    if shutil.which("nm"):
        nm = subprocess.run(["nm", "-D", str(TRUE)], capture_output=True, text=True).stdout
        assert dynsym == {line.split()[-1].split("@")[0] for line in nm.splitlines()}
    build_id = image.build_id()
    if shutil.which("readelf") and build_id:
        notes = subprocess.run(["readelf", "-n", str(TRUE)], capture_output=True,
                               text=True).stdout
        assert f"Build ID: {build_id}" in notes
