"""The build check: the submission built with make in an inner sandbox as a TA builds it,
the lab version told apart from what was built (labs.detect), the --layout of a
submission whose servers have other names."""

import os
import subprocess
import time
from pathlib import Path

from analysis.grade import labs
from analysis.grade import records as C
from analysis.grade.context import Ctx, check
from analysis.grade.measure.sandboxed import spawn
from analysis.grade.trust import folder as F
from analysis.grade.trust import packaging as P
from analysis.grade.trust import safeio
from analysis.grade.trust import sandbox as S

SOURCES = (".c", ".cpp", ".cc")
OWN = ("server", "client")   # what a 2017-style hand-in builds (labs.own_protocol)


def _make(ctx: Ctx, bdir: Path, args: list, limits: dict, retries=()) -> tuple:
    """One make in an inner sandbox, with the compiler wrappers of `retries` (names of
    packaging.RETRIES) first on its PATH: (exit status or None on timeout, output, line)."""
    ro, env, flags = {}, None, []
    if retries:
        tools = ctx.launcher.call(op="tools", retries=list(retries))
        ro, env, flags = ({tools["dir"]: "/sub/tools"}, {"PATH": "/sub/tools:/usr/bin:/bin"},
                          tools["flags"])
    code, text, took = _run(ctx, bdir, ["make", *args], limits, ro, env)
    return code, text, took.replace(":", f" (with {' '.join(flags)}):", 1) if flags else took


def _run(ctx: Ctx, bdir: Path, argv: list, limits: dict, ro=None, env=None) -> tuple:
    """A build command in the copy: (exit status or None on timeout, output, one line)."""
    t0 = time.monotonic()
    proc, out = spawn(ctx, argv, ro or {}, {bdir: "/sub/src"}, "/sub/src", limits,
                      safeio.KEEP, env)
    try:
        code = proc.wait(ctx.cfg["build_timeout_s"])
    except subprocess.TimeoutExpired:
        proc.kill()
        code = None
    out.join()
    what = " ".join(argv)
    took = (f"{what}: did not finish within {ctx.cfg['build_timeout_s']:g} s"
            if code is None else f"{what}: exit status {code} after "
            f"{time.monotonic() - t0:.1f} s" + (
                f", {out.total} bytes of output (cut: only the first and last "
                f"{safeio.KEEP >> 10} KiB kept)" if out.total > 2 * safeio.KEEP else ""))
    return code, out.text(), took


def built(bdir: Path, names=labs.FOUR) -> list:
    """The executables of `names` in bdir."""
    return [m for m in names if (bdir / m).is_file() and os.access(bdir / m, os.X_OK)]


def _tell_lab(ctx, bdir: Path) -> None:
    """The lab version, once: its servers from --lab, else from what the first make built
    (or what was handed in), the Makefile's targets and --layout; its kit from the
    submission's own common.h. A `main` the version places as one of main1..main4 is
    linked there as --layout would (when the course gave none)."""
    if ctx.kit_told:
        return
    ctx.kit_told = True
    common, makefile = (_first_bytes(bdir / name) for name in ("common.h", "Makefile"))
    if makefile is None:
        makefile = _first_bytes(bdir / "makefile")
    if ctx.lab is None:
        server = next((src for ext in SOURCES if (src := _first_bytes(bdir / f"server{ext}"))),
                      None)
        ctx.lab, ctx.lab_why = labs.own_protocol(built(bdir, (*labs.CANDIDATES, *OWN)), common,
                                                 server)
    if ctx.lab is None:
        ctx.lab, ctx.lab_why = labs.detect(built(bdir, labs.CANDIDATES), common, makefile,
                                           ctx.cfg.get("layout"))
    else:
        ctx.lab, kit = labs.on_kit(ctx.lab, common)
        ctx.lab_why += f"; {kit}" if kit else ""
    if ctx.lab.place and not ctx.cfg.get("layout"):
        ctx.cfg["layout"] = dict(ctx.lab.place)


def _present(ctx, bdir: Path) -> list:
    """The lab's servers built, a server the version places under another name (`main` as
    main1) counted when that name is built."""
    place = dict(ctx.cfg.get("layout") or {})
    return [m for m in ctx.lab.servers
            if built(bdir, (m,)) or m in place and built(bdir, (place[m],))]


def _first_bytes(path: Path) -> bytes | None:
    """Up to 64 KiB of a file the submission wrote (never through a link), or None."""
    try:
        return safeio.read_bytes(path, 1 << 16)[0]
    except (FileNotFoundError, safeio.Unsafe):
        return None


def _steps(ctx, bdir, extra, limits) -> tuple:
    """make as a TA would: plain make, then `make all`, then each missing server by name;
    a step that failed in a way a compiler flag undoes (packaging.RETRIES: a link on
    multiple definitions, a C compile on what gcc >= 14 made errors) is tried again with it.
    Returns (evidence lines, servers the plain make built, the retries needed, the first
    failing step's output)."""
    lines, first, retries, failure = [], None, [], []
    plan = [list(extra)]
    while plan:
        args = plan.pop(0)
        code, text, took = _make(ctx, bdir, args, limits, retries)
        while code not in (0, None) and (retry := _retry(text, retries)):
            r, why = retry
            lines += [took, r.fix.format(first=why)]
            retries.append(r.name)  # -B: objects the failed make compiled are up to date, not fixed
            code, text, took = _make(ctx, bdir, ["-B", *args], limits, retries)
        if first is None:
            _tell_lab(ctx, bdir)
        servers = ctx.lab.servers
        have = _present(ctx, bdir)
        lines.append(took + f"; built so far: {', '.join(have) or 'none'}")
        if code != 0 and not failure:  # the first failure says most
            failure = text.splitlines()[-15:]
        if first is None:
            first = have
            plan = [[*extra, *step] for step in P.make_steps([m for m in servers
                                                               if m not in have])]
        elif len(have) == len(servers):
            break
    return lines, first or [], retries, failure


def _retry(text: str, done: list):
    """The first retry not tried yet that a failed make's output calls for, with the line
    that calls for it, or None."""
    return next(((r, why) for r in P.RETRIES if r.name not in done
                 and (why := r.diagnosis(text))), None)


def _layout(ctx, tag: str, bdir: Path, extra: list, limits: dict) -> list:
    """The course's --layout (mainN=NAME: the server mainN is built as NAME): each missing
    mainN becomes a link to NAME, made with `make NAME` first if needed. Without a layout,
    a hint when another executable is there."""
    layout, lines = ctx.cfg.get("layout") or {}, []
    for server, name in layout.items():
        if (bdir / server).exists():
            continue
        if name.endswith(SOURCES) and (bdir / name).is_file():
            compiler = "cc" if name.endswith(".c") else "c++"
            _, text, took = _run(ctx, bdir, [compiler, "-O2", "-pthread", "-o", server, name,
                                             "-lpthread"], limits)
            lines += [took, *text.splitlines()[-5:]]
            continue
        if not (bdir / name).is_file():
            code, _, took = _make(ctx, bdir, [*extra, name], limits)
            lines.append(took)
        if (bdir / name).is_file():
            ctx.launcher.call(op="alias", tag=tag, name=server, target=name)
            lines.append(f"layout: {server} is {name}")
    servers = ctx.lab.servers
    missing = [m for m in servers if m not in built(bdir, servers)]
    others = sorted(p.name for p in bdir.iterdir() if p.is_file() and not p.is_symlink()
                    and (p.name.endswith(SOURCES) or os.access(p, os.X_OK)
                         and not P.describe_binary(_head(p)))
                    and p.name not in servers)[:8] if missing and not layout else []
    if others:
        lines.append(f"{', '.join(missing)} missing; executables and sources found: "
                     f"{', '.join(others)}. If they are the servers, grade with --layout "
                     + ",".join(f"{m}={P.layout_guess(m, others)}" for m in missing)
                     + " (a make target, a built file, or a .c/.cpp file compiled alone)")
    return lines


def _set_aside(ctx, tag: str, bdir: Path, sub: str) -> list:
    """With a Makefile in the folder built, the servers handed in there removed from the
    copy (make must build them), as the launcher sets them aside at the top."""
    notes = []
    for name in labs.CANDIDATES:
        path = bdir / name
        if path.is_file() and not path.is_symlink():
            what = P.describe_binary(_head(path)) or "a binary"
            ctx.launcher.call(op="unlink", path=f"{tag}/{name}")
            notes.append(f"handed-in {sub}/{name} ({what}) set aside: make must build it")
    return notes


def _extras(ctx, bdir: Path, extra: list, limits: dict) -> list:
    """The extra targets of a one-server lab (labs.Lab.extras: main1..main3 beside `main`),
    made by name when the plain make left them out; never part of the build's verdict."""
    if not ctx.lab.extras:
        return []
    lines, missing = [], [m for m in ctx.lab.extras if not built(bdir, (m,))]
    if missing:
        lines.append(_make(ctx, bdir, [*extra, *missing], limits)[2])
    have = built(bdir, ctx.lab.extras)
    return [*lines, "extra targets beside main: " + (", ".join(have) or "none built")
            + " (the student's other designs: named by their traced design in the design "
              "check, not graded)"]


def _head(path: Path) -> bytes:
    try:
        return safeio.read_bytes(path, 64)[0]
    except (OSError, safeio.Unsafe):
        return b""


def build(ctx: Ctx, tag: str, extra_make: list, limits: dict) -> tuple:
    """The submission copied into scratch/`tag` by the launcher, or unpacked there when it
    is a zip (links that leave it and anything over the size caps are not copied, and said
    so; with a Makefile the handed-in servers are set aside so make must build them), then
    make as a TA would. Returns (status, evidence lines, bin_dir, fraction)."""
    copied = ctx.launcher.call(op="copy", dst=tag, set_aside=list(labs.CANDIDATES))
    unpacked = copied.get("unpacked")  # a zip handed in: its notes say what was left out
    notes = [*([unpacked] if unpacked else []),
             *(n if unpacked is not None else f"not copied: {n}" for n in copied["notes"])]
    for name, head in copied["set_aside"].items():
        what = P.describe_binary(bytes.fromhex(head)) or "a binary"
        notes.append(f"handed-in {name} ({what}) set aside: make must build it")
    sub, said = F.choose(Path(S.SCRATCH) / tag, ctx.cfg.get("folder") or "")
    bdir, tag = (Path(S.SCRATCH) / tag / sub, f"{tag}/{sub}") if sub else \
        (Path(S.SCRATCH) / tag, tag)
    makefile = copied["makefile"] if not sub else F.has_build_file(bdir)
    if sub and makefile:
        notes += _set_aside(ctx, tag, bdir, sub)
    if not makefile:
        for m in labs.CANDIDATES:
            try:
                head, _ = safeio.read_bytes(bdir / m, 64)
            except (FileNotFoundError, safeio.Unsafe):
                continue
            what = P.describe_binary(head)
            if what:
                notes.append(f"handed-in {m} is {what}: not used")
                ctx.launcher.call(op="unlink", path=f"{tag}/{m}")
        _tell_lab(ctx, bdir)
        layout = _layout(ctx, tag, bdir, [], limits)
        return "skip", [*said, "no Makefile: using the binaries as handed in", *layout,
                        *notes], bdir, 0.0
    lines, first, retries, failure = _steps(ctx, bdir, extra_make, limits)
    lines[:0] = said
    lines += _layout(ctx, tag, bdir, extra_make, limits)
    lines += _extras(ctx, bdir, extra_make, limits)
    servers = ctx.lab.servers
    have = built(bdir, servers)
    lines += notes
    if len(first) == len(servers) and not retries:
        return "pass", lines, bdir, 1.0
    placed = dict(ctx.lab.place)
    if (placed and not ctx.lab.delay and len(have) == len(servers) and set(placed) <= set(first)
            and not retries):
        # the older kit's four-server way: plain make builds `main`, the others by name
        lines.append(f"plain `make` built main ({', '.join(placed)}), and the others are make "
                     "targets of their own, as the four-server hand-ins of the older kit have "
                     "them")
        return "pass", lines, bdir, 1.0
    if len(have) < len(servers):
        lines.append(f"not built by any step: {', '.join(m for m in servers if m not in have)}"
                     "; the first make that failed said:")
        lines += failure
    elif len(first) < len(servers):
        lines.append("plain `make` built " + (f"only {', '.join(first)}" if first else
                                              f"none of {ctx.lab.names()}")
                     + f": make the first target (or `all`) build {' '.join(servers)}")
    return "fail", lines, bdir, len(first) / len(servers) if not retries else 0.0


def check_build(ctx: Ctx, _bin_dir, _present) -> dict:
    """The build check's runner: the submission built as a TA would (build()); the folder
    built and the lab's servers found there are the grading's from here on (ctx.bin_dir,
    ctx.present), and the version told apart on the way (ctx.lab). A lab the kit cannot
    grade (the 2017 one) is said so, not scored: nothing of the kit's is checked."""
    status, lines, ctx.bin_dir, frac = build(ctx, "build", [], ctx.limits)
    ctx.present = built(ctx.bin_dir, ctx.lab.servers)
    if ctx.lab.gradable:
        return check("build", C.title("build", ctx.lab), "undetermined",
                     [f"{labs.NOT_GRADABLE.lower()}: {ctx.lab.gradable}; found: {ctx.lab_why}"
                      "; none of the kit's checks applies, so none is run nor scored",
                      *lines, "built: " + (", ".join(built(ctx.bin_dir, OWN)) or "nothing")])
    return check("build", C.title("build", ctx.lab), status, lines, fraction=frac,
                 judged=len(ctx.present))


def check_binaries(ctx: Ctx, _bin_dir, present: list) -> dict:
    if ctx.lab.gradable:
        return check("binaries", C.title("binaries", ctx.lab), "undetermined",
                     "not checked: the kit's servers (main1..main4, or main) are not what this "
                     f"lab hands in ({', '.join(built(ctx.bin_dir, OWN))} of its own instead)")
    missing = [m for m in ctx.lab.servers if m not in present]
    return check("binaries", C.title("binaries", ctx.lab), "fail" if missing else "pass",
                 f"missing: {', '.join(missing)}" if missing else f"{ctx.lab.names()} present",
                 judged=len(present))
