"""Shared test helpers: fixture paths, the real build, running the CLI."""

import html.parser
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options as CmarkOptions

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
REPO = HERE.parents[1]
# The student-like kit servers: each main.c includes kitserver.h (analysis/grade/kitserver.h,
# linked from tests/fixtures/common/).
KIT_FIXTURES = REPO / "tests" / "fixtures"
KIT_HEADER = REPO / "analysis" / "grade" / "kitserver.h"   # tests/fixtures/common links to it
KIT_MAKEFILE = KIT_FIXTURES / "common" / "Makefile"   # for fixtures without their own
KIT_NAMES = ("correct", "crash_after_batch", "crash_on_empty", "design_swap", "garbage_timing",
             "handmade_rwlock", "hangs", "no_init", "no_lock", "serialised", "static_build")
# The real build; LOCKBENCH_BIN_DIR points the end-to-end tests at another build tree.
RELEASE = Path(os.environ.get("LOCKBENCH_BIN_DIR", REPO / "build" / "release")).absolute()
PY = sys.executable
BINARIES = ("main1", "main2", "main3", "main4", "lockserver", "client")


def cli(*args, env=None, timeout=600, cwd=REPO):
    """Runs `python -m analysis ARGS`; returns the CompletedProcess (text)."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([PY, "-m", "analysis", *map(str, args)], cwd=cwd, env=e, text=True,
                          capture_output=True, timeout=timeout)


def real_binaries_missing() -> str | None:
    from analysis.runner.binaries import find_binary
    missing = [n for n in BINARIES if not find_binary(RELEASE, n).is_file()]
    if missing:
        return (f"real binaries not built ({', '.join(missing)} missing in {RELEASE}); "
                "build first: cmake --preset release && cmake --build --preset release")
    return None


def skip_unless_built() -> None:
    """Skips the calling test or fixture when the real binaries are not built."""
    missing = real_binaries_missing()
    if missing:
        import pytest
        pytest.skip(missing)


def link_real_binaries(d: Path) -> Path:
    """d (created) holding symlinks to the real main1..main4, lockserver and client of the
    build, and to its CMakeCache.txt for the metadata; skips when the build is missing."""
    skip_unless_built()
    from analysis.runner.binaries import find_binary
    d.mkdir()
    for name in BINARIES:
        (d / name).symlink_to(find_binary(RELEASE, name).resolve())
    if (RELEASE / "CMakeCache.txt").is_file():
        (d / "CMakeCache.txt").symlink_to((RELEASE / "CMakeCache.txt").resolve())
    return d


def preload_library(lib: Path) -> Path:
    """An LD_PRELOAD library of the build (the tracer, the profiler), skipping the test
    when it is not built or the student-like fixtures cannot be (no make or gcc)."""
    if not lib.is_file():
        pytest.skip(f"{lib} is not built (cmake --preset release && cmake --build --preset "
                    "release)")
    if shutil.which("make") is None or shutil.which("gcc") is None:
        pytest.skip("make and gcc are needed to build the fixtures")
    return lib


# The design check times overlapping readers, and the concurrency check a one-lock main
# against the grader's one-mutex server: a busy machine (these tests grade two submissions
# at a time on two cores) can leave either unclear: undetermined, not scored.
BUSY_UNDETERMINED = ("design", "concurrency")


def honest_statuses_problems(statuses: dict, skipped: str = "") -> list:
    """What keeps an honest submission's {check: status} from passing: every check passes,
    except that those of BUSY_UNDETERMINED, and those the grading left out (`skipped`,
    --skip's value), may be undetermined (never failed)."""
    may = (*BUSY_UNDETERMINED, *skipped.split(","))
    return [f"{k}: {v}" for k, v in statuses.items()
            if v != "pass" and not (k in may and v == "undetermined")]


def kit_fixture(name: str, into: Path, folder: str | None = None) -> Path:
    """A copy of tests/fixtures/<name> ("correct", "hostile/daemon") at into/<folder> (the
    name's last part by default) with kitserver.h beside main.c, and the common student
    Makefile where the fixture has none of its own, as a student hands it in: the grader
    sees only the submission's folder. Binaries and timing files of a build in place are
    left out."""
    d = into / (folder or Path(name).name)
    shutil.copytree(KIT_FIXTURES / name, d, ignore=shutil.ignore_patterns(
        "main", "main1", "main2", "main3", "main4", "server_output_time_aggregated"))
    shutil.copy(KIT_HEADER, d)
    if not (d / "Makefile").exists():
        shutil.copy(KIT_MAKEFILE, d)
    return d


def lab2024(root: Path, name: str, design: int = 4, defects: str = "") -> Path:
    """A copy of the 2024+ fixture `lab2024_main` at root/name, its Makefile's DESIGN (1..4)
    and DEFECT (server.c's list) set."""
    d = kit_fixture("lab2024_main", root, name)
    mk = d / "Makefile"
    mk.write_text(mk.read_text().replace("DESIGN ?= 4", f"DESIGN ?= {design}")
                  .replace("DEFECT ?=", f"DEFECT ?= {defects}"))
    return d


def graded_2024(tmp_path_factory, subs: dict, skip: str) -> Path:
    """The folder of one `grade --quick --runs 2` of 2024+ hand-ins (lab2024: {name: (design,
    defects)}), the checks in `skip` left out; skips the test where grading cannot run."""
    from analysis.grade.trust import sandbox
    no_sandbox = sandbox.available()
    if no_sandbox:
        pytest.skip(f"no sandbox: {no_sandbox} (./lockbench setup installs bubblewrap)")
    if not (REPO / "build" / "release" / "kitref4").is_file():
        pytest.skip("the grader's kit-style servers are not built (./lockbench setup)")
    root = tmp_path_factory.mktemp("subs")
    folders = [lab2024(root, name, k, d) for name, (k, d) in subs.items()]
    out = tmp_path_factory.mktemp("grades")
    p = subprocess.run([PY, "-m", "analysis", "grade", *map(str, folders), "--quick", "--runs",
                        "2", "--jobs", "2", "--no-reference", "--no-progress", "--skip", skip,
                        "--out", str(out)], capture_output=True, text=True, cwd=REPO,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return out


def built_fixture(fixture: str, into: Path) -> Path:
    """A copy of tests/fixtures/<fixture> in `into` (kit_fixture), built with its Makefile."""
    d = kit_fixture(fixture, into)
    p = subprocess.run(["make", "-s", "CC=gcc"], cwd=d, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return d


# ---- Markdown as GitHub renders it ------------------------------------------------------

class Shown(html.parser.HTMLParser):
    """A rendered fragment as (tags, text): every start tag with its attributes, and the
    text a reader sees, entities decoded."""

    def __init__(self, fragment: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.parts = [], []
        self.feed(fragment)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.parts.append(data)

    def handle_comment(self, data):
        self.tags.append(("!--", {}))


def gfm(md: str) -> str:
    """GitHub's own renderer (cmark-gfm, every extension), raw HTML let through, so that any
    markup the text made shows as a tag."""
    return cmarkgfm.github_flavored_markdown_to_html(md, options=CmarkOptions.CMARK_OPT_UNSAFE)


def md_tags(md: str) -> list:
    """The HTML tags GitHub's renderer makes of a Markdown page, in order: (tag, attributes)."""
    return Shown(gfm(md)).tags



# ---- hand-ins as zips -------------------------------------------------------------------------

# Members a hostile zip adds beside the sources: a path out of its folder, a link to a file
# of the grader's machine, Mac OS's litter.
HOSTILE_MEMBERS = {"../escaped.c": b"int pwned;\n", "link_to_passwd": b"/etc/passwd",
                   "__MACOSX/._main.c": b"\0"}


def zip_fixture(folder: Path, zip_path: Path, top: str = "", hostile: bool = False) -> Path:
    """The files of `folder` as a student zips them: under one `top` folder (or flat), with
    their execute bits; with `hostile`, HOSTILE_MEMBERS too (the link as a symbolic link)."""
    import stat
    import zipfile

    zip_path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f"{top}/" if top else ""
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file() and not p.is_symlink():
                z.write(p, prefix + str(p.relative_to(folder)))
        for name, data in (HOSTILE_MEMBERS.items() if hostile else ()):
            info = zipfile.ZipInfo(name if name.startswith(("..", "__")) else prefix + name)
            mode = stat.S_IFLNK | 0o777 if name.startswith("link") else stat.S_IFREG | 0o644
            info.external_attr = mode << 16
            z.writestr(info, data)
    return zip_path


def assert_hostile_zip_unpacked_inside(build: dict) -> None:
    """A zip_fixture(hostile=True) graded: built, and its page says what was unpacked and
    what was not (the path out of its folder, the link)."""
    lines = "\n".join(build["evidence"])
    assert build["status"] == "pass", lines
    assert "unpacked the zip handed in: " in lines, lines
    assert "'../escaped.c': a path outside the hand-in, not unpacked" in lines, lines
    assert "link_to_passwd': a symbolic link, not unpacked" in lines, lines


def elf_file(types=(), ident=b"\x7fELF\x02\x01\x01", machine=62, phoff=64,
             phentsize=56) -> bytes:
    """An ELF header laid out as a 64-bit one (the class and byte order are ident's) and
    program headers of those types right after it when phoff is 64 (elsewhere they are
    not in the file)."""
    end = ">" if ident[5:6] == b"\x02" else "<"
    header = struct.pack(end + "16sHHIQQQIHHHHHH", ident, 2, machine, 1, 0, phoff, 0, 0, 64,
                         phentsize, len(types), 64, 0, 0)
    heads = b"".join(struct.pack(end + "IIQQQQQQ", kind, 4, 0, 0, 0, 0, 0, 0)[:phentsize]
                     .ljust(phentsize, b"\0") for kind in types)
    return header + heads if phoff == 64 else header
