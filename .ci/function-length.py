#!/usr/bin/env python3
"""No Python function over 60 lines in the given folders (tests excepted), the rule
clang-tidy's readability-function-size enforces for the C++: long functions are split into
named steps. Prints one line per offender and exits 1; exits 0 when none.

    .ci/function-length.py analysis bench
"""

import ast
import sys
from pathlib import Path

LIMIT = 60


def offenders(folder: Path) -> list:
    found = []
    for path in sorted(folder.rglob("*.py")):
        if "tests" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LIMIT:
                    found.append(f"{path}:{node.lineno}: {node.name} is {lines} lines "
                                 f"(limit {LIMIT})")
    return found


def main(folders: list) -> int:
    if not folders:
        print("usage: .ci/function-length.py FOLDER...", file=sys.stderr)
        return 2
    found = [line for f in folders for line in offenders(Path(f))]
    print("\n".join(found) if found else f"no function over {LIMIT} lines in "
          f"{', '.join(folders)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
