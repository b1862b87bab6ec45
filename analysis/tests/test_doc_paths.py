"""Every repository path the docs name exists: in docs/*.md and README.md, and in the
comments and docstrings of analysis/, common/, client/, profile/, bench/, fuzz/ and tests/.
A path is a word with a slash that starts at one of the repository's folders
(`analysis/grade/score.py`, `common/mutex.h`, `docs/grading.md`) or ends in a file
extension (`grade/measure/bursts.py`, relative to the file's own folder or one above it),
and a module named with dots (`analysis.grade.trust.names`). `<case>` and `*` are wildcards;
what a run generates (build/, results/<UTC time>/, a report's tables/) and the files of
other projects a comment cites are allowed by name below."""

import io
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXT = r"(?:py|h|hpp|inc|c|cc|cpp|md|toml|json|sh|txt|csv|ini|html|svg|cmake|zip|so|yml|yaml)"
TOP = r"(?:analysis|common|client|profile|bench|fuzz|tests|docs|report|results|build|\.ci)"
SEG = r"(?:[\w.*-]|<[^<>\n]{1,30}>)"
PATH = re.compile(r"(?<![\w./<>$-])((?:" + TOP + r"/(?:" + SEG + r"|/)*[\w*>/])"
                  r"|(?:" + SEG + r"+/)+" + SEG + r"+\." + EXT + r")(?![\w/])")
MODULE = re.compile(r"(?<![\w./-])analysis(?:\.[A-Za-z_]\w*)+")
# What a run, a build or a bundle writes (not in the repository), by its first folder.
GENERATED = ("build/", "results/", "traces/", "figures/", "tables/", "bundle/", "grades/",
             "lockbench/")
# Other projects' files a comment cites (LevelDB, glibc, Linux, Redis).
ELSEWHERE = {"port/port_stdcxx.h", "util/mutexlock.h", "port/thread_annotations.h",
             "nptl/pthread_rwlock_common.c", "include/net/tcp_states.h",
             "tests/unit/limits.tcl", "tests/support/server.tcl"}
# docs/grading.md's example check, which test_grade_adding_a_check.py adds to a copy.
EXAMPLES = {"analysis/grade/checks/closes.py"}
# Where a doc's relative path may start: the repository, and the packages the docs describe.
DOC_BASES = ("", "analysis", "analysis/grade", "analysis/report", "analysis/tests", "report")
PLACEHOLDER = re.compile(r"^(?:[A-Z]+|dir|out)/")   # DIR/autograder.zip, R/results, out/x


def c_comments(text: str) -> str:
    """The comments of C or C++, the rest blanked (line numbers kept)."""
    return re.sub(r"//[^\n]*|/\*.*?\*/|(\"(?:\\.|[^\"\\\n])*\")|[^\n]",
                  lambda m: m.group(0) if m.group(0).startswith(("//", "/*")) else "",
                  text, flags=re.S)


def py_comments(text: str) -> str:
    """The comments and docstrings of Python, the rest blanked (line numbers kept)."""
    lines = [""] * (text.count("\n") + 1)
    prev = None
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        doc = t.type == tokenize.STRING and (prev is None or prev.type in (
            tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE))
        if t.type == tokenize.COMMENT or doc:
            for i, part in enumerate(t.string.split("\n")):
                lines[t.start[0] - 1 + i] += " " + part
        if t.type not in (tokenize.NL, tokenize.COMMENT):
            prev = t
    return "\n".join(lines)


def sources() -> list:
    out = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for top in ("analysis", "common", "client", "profile", "bench", "fuzz", "tests"):
        out += [p for p in sorted((REPO / top).rglob("*")) if p.is_file()
                and p.suffix in (".py", ".h", ".hpp", ".inc", ".c", ".cc", ".cpp")
                and "__pycache__" not in p.parts and "corpus" not in p.parts]
    return out


def bases(f: Path) -> list:
    if f.suffix == ".md":
        return [REPO / b for b in DOC_BASES]
    return [f.parent, *(p for p in f.parent.parents if p.is_relative_to(REPO))]


def exists(f: Path, path: str) -> bool:
    path = path.removeprefix("./")
    if "." in path.split("/")[0][1:]:   # a web address's host (clang.llvm.org/docs/...)
        return True
    if path.startswith(GENERATED) or path.rstrip("/") in ELSEWHERE | EXAMPLES or \
            PLACEHOLDER.match(path):
        return True
    q = re.sub(r"<[^<>]*>", "*", path).rstrip("/")
    for b in bases(f):
        if "*" in q and any(b.glob(q)) or "*" not in q and (b / q).exists():
            return True
        if "." not in q.rsplit("/", 1)[-1] and any(b.glob(q + ".*")):  # common/net: .h, .cpp
            return True
    return False


def module_exists(name: str) -> bool:
    """analysis.grade.score.of: a module or package, then a name defined in it."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:i])
        found = base.with_suffix(".py") if base.with_suffix(".py").is_file() else \
            base / "__init__.py" if base.is_dir() else None
        if found is None:
            continue
        rest = parts[i:]
        if not rest:
            return True
        text = found.read_text() if found.is_file() else ""
        return re.search(rf"^\s*(?:def |class |async def )?{rest[0]}\b", text, re.M) is not None
    return False


def missing() -> list:
    out = []
    for f in sources():
        text = f.read_text(errors="replace")
        body = text if f.suffix == ".md" else \
            py_comments(text) if f.suffix == ".py" else c_comments(text)
        rel = f.relative_to(REPO)
        for m in PATH.finditer(body):
            if not exists(f, m.group(1)):
                out.append(f"{rel}:{body.count(chr(10), 0, m.start()) + 1}: {m.group(1)}")
        for m in MODULE.finditer(body):
            if m.group(0).rsplit(".", 1)[-1] in ("md", "py"):   # docs/analysis.md
                continue
            if not module_exists(m.group(0)):
                out.append(f"{rel}:{body.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    return out


def test_every_path_the_docs_and_comments_name_exists():
    assert missing() == []


def test_the_rule_finds_a_stale_path_and_leaves_generated_and_relative_ones(tmp_path):
    doc = REPO / "docs" / "x.md"
    assert not exists(doc, "analysis/grade/closes.py")
    assert not exists(REPO / "analysis/grade/worker.py", "pages/score.py")
    assert exists(REPO / "analysis/grade/worker.py", "measure/bursts.py")
    assert exists(doc, "results/<UTC time>/") and exists(doc, "build/release/client")
    assert exists(doc, "tests/fixtures/<case>/main.c") and exists(doc, "profile/lockprof*.cpp")
    assert not module_exists("analysis.grade.names")
    assert module_exists("analysis.grade.trust.names") and module_exists("analysis.grade.score.of")
    found = [m.group(1) for m in PATH.finditer("see `analysis/grade/x.py`, docs/y.md and "
                                               "mainN n ip port, 1/2 of them")]
    assert found == ["analysis/grade/x.py", "docs/y.md"]
