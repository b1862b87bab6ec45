"""The layers of analysis/ (docs/architecture.md, "The Python side's packages"): a package per
program (runner, report, grade, profile, compare) over one bottom layer (every other module
and package of analysis/). No program's module imports another program's package, the
bottom layer imports no program, and only the dispatcher (analysis/__main__.py) sits above
them all. Read from the source (ast), every import counted, those inside functions too."""

import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[1]
PROGRAMS = ("runner", "report", "grade", "profile", "compare")
DISPATCHER = "analysis.__main__"
# Known exceptions to the rule: none.
GRADE_EXCEPTIONS: set = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(ANALYSIS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set:
    """Every analysis module `path` imports, relative imports resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            found |= {f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base
                      for a in node.names}
    return {m for m in found if m == "analysis" or m.startswith("analysis.")}


def is_module(name: str) -> bool:
    path = ANALYSIS.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def program_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PROGRAMS else None


def sources() -> list:
    return [p for p in sorted(ANALYSIS.rglob("*.py")) if "tests" not in p.parts]


def test_no_program_imports_another_and_the_bottom_imports_none():
    wrong = []
    for path in sources():
        me = module_name(path)
        if me == DISPATCHER:
            continue
        for other in imported(path):
            theirs = program_of(other)
            if theirs and theirs != program_of(me) and (me, other) not in GRADE_EXCEPTIONS:
                wrong.append(f"{me} imports {other}")
    assert not wrong, "\n".join(wrong)


def test_the_exceptions_are_still_there():
    """An exception that no longer happens is taken off the list, not kept as a pass."""
    seen = {(module_name(p), m) for p in sources() for m in imported(p)}
    assert seen >= GRADE_EXCEPTIONS, GRADE_EXCEPTIONS - seen


def test_imports_are_absolute_outside_the_grader():
    relative = []
    for path in sources():
        if program_of(module_name(path)) == "grade":
            continue
        tree = ast.parse(path.read_text(), str(path))
        relative += [f"{path.relative_to(ANALYSIS.parent)}:{n.lineno}" for n in ast.walk(tree)
                     if isinstance(n, ast.ImportFrom) and n.level]
    assert not relative, relative


def test_the_rule_sees_a_crossing():
    """The walk finds what it is meant to refuse: the profiler reaching into the grader."""
    assert "analysis.grade.trust.names" not in imported(ANALYSIS / "profile" / "cli.py")
    assert program_of("analysis.grade.trust.names") == "grade"
    assert program_of("analysis.stats") is None
    assert {"analysis.lockprof.preload", "analysis.stats"} <= (
        imported(ANALYSIS / "compare" / "cli.py") | imported(ANALYSIS / "compare" / "report.py"))
