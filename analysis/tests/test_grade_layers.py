"""The grader's layers (docs/architecture.md, "The grader's parts"): each module of
analysis/grade imports only the layers below its own, the records at the bottom importing
nothing of the grader (as may any module that imports nothing of it, grade/measure/design.py's
names of the lock designs, say: it sits at the bottom too)."""

import ast
from pathlib import Path

GRADE = Path(__file__).resolve().parents[1] / "grade"
# Bottom to top; a module may import its own layer's and those before it.
LAYERS = (("records",), ("trust", "labs"), ("context",), ("measure",), ("checks",),
          ("worker",), ("score", "similarity"), ("pages",), ("platforms", "cli", "__main__"))


def pure(module: str) -> bool:
    """A module of the grader that imports nothing of it."""
    path = GRADE.parent.parent.joinpath(*module.split(".")).with_suffix(".py")
    return path.is_file() and not imports(path)


def layer(module: str) -> int:
    """The layer of a module of the grader (analysis.grade.worker: the worker's)."""
    if pure(module):
        return 0
    head = module.split(".")[2] if module.count(".") >= 2 else ""
    return next(i for i, names in enumerate(LAYERS) if head in names)


def imports(path: Path) -> set:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("analysis.grade"):
            base = GRADE.parent.parent.joinpath(*node.module.split("."))
            out |= {f"{node.module}.{a.name}" if (base / a.name).with_suffix(".py").is_file()
                    or (base / a.name).is_dir() else node.module for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("analysis.grade.")}
    return out


def test_no_module_of_the_grader_imports_a_layer_above_its_own():
    upward = []
    for path in sorted(GRADE.rglob("*.py")):
        rel = path.relative_to(GRADE.parent.parent).with_suffix("")
        me = ".".join(rel.parts)
        if me.endswith("__init__"):
            me = me.rsplit(".", 1)[0] + ".x" if me.count(".") > 2 else "analysis.grade.x"
            if me == "analysis.grade.x":
                continue
        for m in imports(path):
            if layer(m) > layer(me):
                upward.append(f"{rel}: {m}")
    assert upward == []


def test_the_records_import_nothing_of_the_grader():
    assert imports(GRADE / "records.py") == set()
