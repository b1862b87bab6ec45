"""lockprof.dump.read and lockprof.table.load against dumps a profiled program could forge (it
knows the dump folder from its $LOCKPROF_FILE): wrong shapes and types, nesting deeper than
the parser goes, an oversized file, a link, a FIFO, bytes that are not UTF-8, a file name
with control characters; and the profiler's symbol lookup on objects a dump names that are
not files. Each is one reason in words; the good dumps beside them are still read."""

import copy
import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from analysis.lockprof import dump as profile_dump
from analysis.lockprof import symbols as profile_symbols
from analysis.lockprof import table
from analysis.lockprof.dump import BadDumpError
from analysis.profile import stacks as profile_stacks
from analysis.profile import timeline as profile_timeline

GOOD = {"tool": "lockprof", "version": 1, "pid": 4242, "program": "/usr/bin/x",
        "reason": "exit", "clock": "tsc", "swap": {"mutex": "pthread", "rwlock": "pthread"},
        "untracked_ops": 0, "holds_lost": 0,
        "locks": [{"addr": "7f00", "kind": "mutex", "impl": "pthread",
                   "acquisitions": {"mutex": 10}, "contended": 2, "busy": 0,
                   "wait_ns": {"p50": 64, "p99": 512}, "hold_ns": {"p50": 32, "p99": 64},
                   "site": "0x1234 (x)", "site_object": "/usr/bin/x", "site_vaddr": "1234"},
                  {"addr": "7f40", "kind": "cond", "impl": "pthread",
                   "acquisitions": {"wait": 1, "signal": 1, "broadcast": 0}, "contended": 0,
                   "wait_ns": {"p50": 0, "p99": 0}, "site": "f+0x10 (x)"}]}


def forged(**change) -> dict:
    doc = copy.deepcopy(GOOD)
    for path, value in change.items():
        *parents, last = path.split("__")
        at = doc
        for p in parents:
            at = at[int(p)] if isinstance(at, list) else at[p]
        if value is KeyError:
            del at[last]
        else:
            at[last] = value
    return doc


def write(tmp_path, name: str, content) -> object:
    f = tmp_path / name
    f.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    return f


def test_a_dump_as_lockprof_writes_it_is_read(tmp_path):
    assert profile_dump.read(write(tmp_path, "lockprof.1.json", GOOD)) == GOOD


@pytest.mark.parametrize("doc,reason", [
    ([GOOD], "the dump is not an object"),
    (forged(locks=KeyError), "the dump has no locks"),
    (forged(pid="4242"), "pid is not a count"),
    (forged(pid=True), "pid is not a count"),
    (forged(swap=[]), "swap is not an object"),
    (forged(locks={"0": {}}), "locks is not a list"),
    (forged(locks=[[]]), "lock record 0 is not an object"),
    (forged(locks__0__kind="spin"), "lock record 0: kind is not one of"),
    (forged(locks__0__acquisitions={"read": 1, "write": 1}),
     "lock record 0: acquisitions has no mutex"),
    (forged(locks__0__acquisitions={"mutex": -1}), "acquisitions mutex is not a count"),
    (forged(locks__0__acquisitions={"mutex": 1.5}), "acquisitions mutex is not a count"),
    (forged(locks__0__hold_ns=KeyError), "lock record 0: hold_ns is not an object"),
    (forged(locks__0__wait_ns={"p50": 1}), "wait_ns has no p99"),
    (forged(locks__0__site=None), "lock record 0: site is not a text"),
    (forged(locks__0__site="x" * 5000), "lock record 0: site is not a text"),
    (forged(locks__0__site_vaddr="zz"), "site_vaddr is not a hexadecimal address"),
    (forged(locks__1__acquisitions={"mutex": 1}), "lock record 1: acquisitions has no wait"),
])
def test_a_forged_shape_or_type_is_named(tmp_path, doc, reason):
    with pytest.raises(BadDumpError, match=reason):
        profile_dump.read(write(tmp_path, "lockprof.1.json", doc))


def test_nesting_too_deep_for_the_parser_is_refused_not_a_recursion_error(tmp_path):
    with pytest.raises(BadDumpError, match="nested too deeply"):
        profile_dump.read(write(tmp_path, "lockprof.1.json", b"[" * 200_000))


def test_a_file_over_the_cap_is_refused_before_it_is_read(tmp_path):
    f = tmp_path / "lockprof.1.json"
    with open(f, "wb") as out:
        out.truncate(profile_dump.MAX_BYTES + 1)  # sparse: nothing written
    with pytest.raises(BadDumpError, match="MiB a dump can be"):
        profile_dump.read(f)


def test_links_fifos_and_other_bytes_are_refused(tmp_path):
    secret = write(tmp_path, "secret", GOOD)
    (tmp_path / "lockprof.2.json").symlink_to(secret)
    os.mkfifo(tmp_path / "lockprof.3.json")  # nobody writes it: reading would block
    for name, reason in (("lockprof.2.json", "cannot be opened"),
                         ("lockprof.3.json", "is not a regular file")):
        with pytest.raises(BadDumpError, match=reason):
            profile_dump.read(tmp_path / name)
    with pytest.raises(BadDumpError, match="is not UTF-8"):
        profile_dump.read(write(tmp_path, "lockprof.4.json", b'{"pid": "\xff"}'))
    with pytest.raises(BadDumpError, match="is not JSON"):
        profile_dump.read(write(tmp_path, "lockprof.5.json", b'{"pid": '))


def test_load_keeps_the_good_dumps_and_gives_one_line_per_bad_one(tmp_path):
    write(tmp_path, "lockprof.4242.json", GOOD)
    write(tmp_path, "lockprof.1.json", forged(locks=KeyError))
    write(tmp_path, "lockprof.\x1b[31mred.json", [])
    docs, bad = table.load(tmp_path)
    assert [d["pid"] for d in docs] == [4242]
    assert len(bad) == 2 and all("\n" not in b and "\x1b" not in b for b in bad), bad
    assert any("lockprof.1.json the dump has no locks: left out" in b for b in bad), bad
    assert any("\\x1b[31mred.json" in b for b in bad), bad


def test_symbols_of_an_object_that_is_not_a_file_are_none_at_once(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    syms = profile_symbols.Symbols()  # reading /dev/zero would fill the memory, the FIFO block
    for path in ("/dev/zero", str(tmp_path / "fifo"), str(tmp_path / "missing")):
        assert syms.table(path) == ([], [])


STRIPPED_SOURCE = r"""
#include <pthread.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int n;
static __attribute__((noinline)) void bump(void) {
  pthread_mutex_lock(&m);
  n++;
  pthread_mutex_unlock(&m);
}
int main(void) { for (int i = 0; i < 10; i++) bump(); return n != 10; }
"""


def test_a_stripped_program_is_named_from_its_debug_file_or_said_to_be_stripped(tmp_path):
    """The same program three ways: with its symbols, stripped with a .gnu_debuglink to the
    debug file beside it (as a -dbgsym package installs one), stripped bare."""
    (tmp_path / "s.c").write_text(STRIPPED_SOURCE)
    steps = [["gcc", "-g", "-O1", "-pthread", "-o", "full", "s.c"], ["cp", "full", "linked"],
             ["objcopy", "--only-keep-debug", "linked", "linked.debug"],
             ["strip", "--strip-all", "linked"],
             ["objcopy", "--add-gnu-debuglink=linked.debug", "linked"], ["cp", "full", "bare"],
             ["strip", "--strip-all", "-R", ".gnu_debuglink", "bare"]]
    for step in steps:
        subprocess.run(step, cwd=tmp_path, check=True, capture_output=True)
    nm = subprocess.run(["nm", "full"], cwd=tmp_path, capture_output=True, text=True).stdout
    bump = int(next(line.split()[0] for line in nm.splitlines() if line.endswith(" bump")), 16)
    recs = [{"site": f"0x{bump + 16:x} ({name})", "site_object": str(tmp_path / name),
             "site_vaddr": f"{bump + 16:x}"} for name in ("full", "linked", "bare")]
    profile_symbols.name_sites(recs)
    assert [r["site"] for r in recs] == [
        "bump+0x10 (full)", "bump+0x10 (linked)",
        f"0x{bump + 16:x} (bare, stripped; no debug symbols installed)"]
    (tmp_path / "linked.debug").write_bytes(b"\x7fELF not the one the link's CRC names")
    assert profile_symbols.debug_file(str(tmp_path / "linked"),
                                      (tmp_path / "linked").read_bytes()) is None


SEEING = {**GOOD, "stacks": {"depth": 8, "lost": 1, "lost_wait_ns": 70, "list": [
              {"call": "pthread_mutex_lock", "count": 2, "wait_ns": 600,
               "frames": ["1010", "2020"]}]},
          "objects": [{"path": "/usr/bin/x", "base": "0", "text": [["1000", "3000"]]}],
          "timeline": {"capacity": 262144, "lost": 0, "events": [
              ["w", "m", "7f00", 7, 5000, 2000], ["h", "m", "7f00", 7, 7000, 1500]]}}


def test_the_stacks_and_the_timeline_as_lockprof_writes_them_are_read(tmp_path):
    assert profile_dump.read(write(tmp_path, "lockprof.1.json", SEEING)) == SEEING


@pytest.mark.parametrize("change,reason", [
    ({"stacks": {"depth": 8}}, "stacks has no lost"),
    ({"stacks": {**SEEING["stacks"], "list": [{**SEEING["stacks"]["list"][0], "call": "f"}]}},
     "stack 0: call is not a pthread function that waits"),
    ({"stacks": {**SEEING["stacks"], "list": [{**SEEING["stacks"]["list"][0],
                                               "frames": ["zz"]}]}},
     "stack 0: a frame is not a hexadecimal address"),
    ({"stacks": {**SEEING["stacks"], "list": [{**SEEING["stacks"]["list"][0],
                                               "frames": ["10"] * 65}]}},
     "stack 0: frames are more than 64"),
    ({"objects": [{"path": "/x", "base": "0", "text": [["1"]]}]}, "object 0: text is not"),
    ({"objects": None}, "objects is not a list"),
    ({"timeline": {"lost": 0, "events": [["x", "m", "7f00", 1, 2, 3]]}},
     "timeline event 0 is not"),
    ({"timeline": {"lost": 0, "events": [["h", "m", "7f00", 1, 2, -3]]}},
     "timeline event 0: duration is not a count"),
])
def test_forged_stacks_and_timelines_are_named(tmp_path, change, reason):
    with pytest.raises(BadDumpError, match=reason):
        profile_dump.read(write(tmp_path, "lockprof.1.json", {**SEEING, **change}))


def build_named_and_bare(tmp_path) -> int:
    """`full` (symbols) and `bare` (stripped) of STRIPPED_SOURCE; bump's address in both."""
    (tmp_path / "s.c").write_text(STRIPPED_SOURCE)
    for step in (["gcc", "-O1", "-pthread", "-o", "full", "s.c"], ["cp", "full", "bare"],
                 ["strip", "--strip-all", "bare"]):
        subprocess.run(step, cwd=tmp_path, check=True, capture_output=True)
    nm = subprocess.run(["nm", "full"], cwd=tmp_path, capture_output=True, text=True).stdout
    return int(next(line.split()[0] for line in nm.splitlines() if line.endswith(" bump")), 16)


def test_frames_are_named_as_sites_or_by_offset_where_stripped_and_the_same_stacks_add(
        tmp_path):
    """Two processes, the same stack: a frame of the program with symbols (named, the offset
    dropped so that a function is one frame), its caller in a stripped copy loaded at
    another base (object+0xoffset), an address in no object; the weights add up."""
    bump = build_named_and_bare(tmp_path)
    objects = [{"path": str(tmp_path / "full"), "base": "100000",
                "text": [["100000", "200000"]]},
               {"path": str(tmp_path / "bare"), "base": "400000",
                "text": [["400000", "500000"]]}]
    stack = {"call": "pthread_mutex_timedlock", "count": 1, "wait_ns": 500,
             "frames": [f"{0x100000 + bump + 16:x}", f"{0x400000 + bump + 16:x}", "9"]}
    docs = [{"pid": pid, "objects": objects,
             "stacks": {"depth": 8, "lost": 0, "lost_wait_ns": 0, "list": [stack]}}
            for pid in (1, 2)]
    stacks = profile_stacks.folded(docs)
    assert stacks == {f"0x9;bare+0x{bump + 16:x};bump;pthread_mutex_timedlock": 1000}
    assert profile_stacks.folded_text(stacks).endswith(" 1000\n")
    svg = ET.fromstring(profile_stacks.flame_svg(stacks, "waits <&>"))
    titles = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert titles[0] == "all (1,000 ns waited, 100.00%)" and len(titles) == 5, titles
    assert profile_stacks.totals(docs)["waits"] == 2
    empty = ET.fromstring(profile_stacks.flame_svg({}, "waits"))  # nothing waited: said
    assert [t.text for t in empty.iter("{http://www.w3.org/2000/svg}text")] == [
        "waits: no acquisition waited"]


def test_the_timeline_is_in_microseconds_from_the_first_interval_named_by_site():
    docs = [{"pid": 1, "program": "/bin/a", "locks": [],
             "timeline": {"lost": 3, "events": [["h", "w", "7f00", 11, 9000, 1500]]}},
            {"pid": 2, "program": "/bin/b", "locks": [],
             "timeline": {"lost": 0, "events": [["w", "m", "50", 12, 4000, 2000]]}}]
    recs = [{"pid": 1, "addr": "7f00", "kind": "rwlock", "site": "f+0x1 (a)"}]
    evs = profile_timeline.events(docs, profile_timeline.lock_names(recs))
    assert [(e["pid"], e["tid"], e["ts"], e["dur"], e["cat"], e["name"]) for e in evs] == [
        (2, 12, 0.0, 2.0, "wait", "mutex 0x50"), (1, 11, 5.0, 1.5, "hold", "f+0x1 (a)")]
    assert evs[1]["args"] == {"lock": "0x7f00", "kind": "rwlock", "mode": "write"}
    assert profile_timeline.totals(docs, evs) == {"events": 2, "threads": 2, "lost": 3}
