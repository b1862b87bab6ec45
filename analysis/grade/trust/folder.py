"""The folder of a submission to build in: its top folder, or the one subfolder that holds
the Makefile (the course's hand-in zip keeps the sources and the Makefile in `Code/`, beside
the members and `Report/`), or the one that holds the servers' executables when no folder
has a Makefile; --folder names it when several do.

The copy it searches is the submission's: a bounded walk (depth, entries), no link followed,
names shown only as the grader's evidence lines quote them (code spans on the pages)."""

import os
from pathlib import Path

from analysis.grade.trust import names as N

BUILD_FILES = ("Makefile", "makefile", "GNUmakefile")
# What the servers' executables are called, in every version of the lab (labs.CANDIDATES,
# and the 2017 lab's own server and client)
SERVERS = ("main1", "main2", "main3", "main4", "main", "server")
MAX_DEPTH = 3          # folders below the top looked into
MAX_ENTRIES = 2000     # entries looked at in all
MAX_SHOWN = 8          # candidates listed on the page
# tool folders, and CMake's build trees (cmake-build-*, CMakeFiles: generated Makefiles)
LEFT_OUT = frozenset({"__MACOSX", ".git", ".svn", ".hg", ".vscode", ".idea", "node_modules",
                      "CMakeFiles"})


def _file(d: Path, name: str) -> bool:
    path = d / name
    return path.is_file() and not path.is_symlink()


def has_build_file(d: Path) -> bool:
    """A Makefile of the student's (a CMake build tree's generated one is not)."""
    return any(_file(d, m) for m in BUILD_FILES) and not _file(d, "CMakeCache.txt")


def has_servers(d: Path) -> bool:
    """Executables named as a version's servers (not links) in d."""
    return any(_file(d, m) and os.access(d / m, os.X_OK) for m in SERVERS)


def search(top: Path, want) -> list:
    """The folders under `top` (relative paths, sorted, at most MAX_DEPTH below it) for which
    want(folder) holds, none looked into below one that does; no link is followed."""
    found, seen = [], [0]

    def walk(d: Path, rel: str, depth: int) -> None:
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            seen[0] += 1
            if seen[0] > MAX_ENTRIES or len(found) > MAX_SHOWN:
                return
            if (e.name in LEFT_OUT or e.name.startswith("cmake-build")
                    or not e.is_dir(follow_symlinks=False)):
                continue
            r = f"{rel}{e.name}"
            if want(Path(e.path)):
                found.append(r)
            elif depth < MAX_DEPTH:
                walk(Path(e.path), r + "/", depth + 1)

    walk(top, "", 1)
    return found


def _named(top: Path, asked: str) -> bool:
    """The folder --folder names is a folder of the copy, reached through no link."""
    d = top
    for part in asked.split("/"):
        d = d / part
        if d.is_symlink() or not d.is_dir():
            return False
    return True


def choose(top: Path, asked: str = "") -> tuple:
    """(the folder to build in, relative to `top`, '' for the top itself; the lines that say
    why, for the build check's evidence). `asked`: --folder's (checked by the command line:
    relative, no '..'); when this submission has no such folder, the search decides."""
    lines = []
    if asked:
        if _named(top, asked):
            return asked, [f"built in `{asked}/`, the folder --folder names"]
        lines.append(f"--folder {asked}: no such folder in this submission (a link is not "
                     "followed): the folder was chosen as without it")
    if has_build_file(top) or has_servers(top):
        return "", lines
    for what, want in (("a Makefile", has_build_file), ("the servers' executables", has_servers)):
        found = search(top, want)
        if len(found) == 1:
            verb = "built" if want is has_build_file else "graded"
            return found[0], [*lines, f"{verb} in `{N.visible(found[0])}/`, the one folder "
                                      f"holding {what} (the top folder holds neither a "
                                      "Makefile nor a server)"]
        if found:
            shown = ", ".join(f"`{N.visible(f)}/`" for f in found[:MAX_SHOWN])
            return "", [*lines, f"no Makefile at the top; {len(found)} folders hold {what}: "
                                f"{shown}{', ...' if len(found) > MAX_SHOWN else ''}. Grade "
                                f"again with --folder FOLDER to build in one of them (e.g. "
                                f"--folder {N.visible(found[0])})"]
    return "", lines
