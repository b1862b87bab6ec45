"""`python -m analysis grade SUBMISSION...` (and `lockbench grade`): grade Lab 2 submissions,
each in its own sandbox, write per-submission pages and, for several, a class summary.

Exit status: 0 graded (whatever the verdicts); 1 grading itself could not run (one line);
2 bad command line; 130 interrupted (finished submissions are kept: run again to resume).
"""

import argparse
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from analysis.grade import labs, records, score
from analysis.grade.pages import dashboard, render
from analysis.grade.platforms import bundle
from analysis.grade.trust import handin, isolation, names, outer, sandbox
from analysis.numbers import float_above, float_in, int_in, list_of
from analysis.progress import Progress

PROG = "python -m analysis grade"
REPO = Path(__file__).resolve().parents[2]
QUICK = {"runs": 3, "sizes": [10, 1000], "init_n": 20, "attack_rounds": 1, "attack_requests": 256,
         "request_timeout_s": 3.0, "idle_timeout_s": 3.0}
DEFAULT = {"runs": 100, "sizes": [10, 100, 1000], "init_n": 100, "attack_rounds": 3,
           "attack_requests": 1000,
           "request_timeout_s": 5.0, "idle_timeout_s": 5.0}




class GradeError(Exception):
    """Grading cannot run at all (exit 1, one line)."""


_runs = int_in(1, 1000)
_sizes = list_of(int_in(4, 100_000), distinct_sorted=True)
_seconds = float_above(0, 1e6)
_pause = float_in(0, 600)


def _layout(t):
    """mainN=NAME,...: where a submission's servers are (a make target or built file)."""
    out = {}
    for part in t.split(","):
        server, eq, name = part.strip().partition("=")
        if server not in labs.CANDIDATES or not eq:
            raise argparse.ArgumentTypeError(f"expected mainN=NAME or main=NAME, got {part!r}")
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", name) or name.startswith((".", "-")):
            raise argparse.ArgumentTypeError(f"{name!r} is not a plain file name")
        out[server] = name
    return out


def _skip(t):
    """--skip CHECK,...: checks the grader leaves out (records.SKIPPABLE), distinct."""
    out = []
    for part in t.split(","):
        cid = part.strip()
        if cid not in records.SKIPPABLE:
            raise argparse.ArgumentTypeError(
                f"{cid!r} cannot be skipped (one of: {', '.join(records.SKIPPABLE)})")
        if cid not in out:
            out.append(cid)
    return out


def _folder(t):
    """--folder PATH: the submission's folder to build in, relative to it (the course's
    hand-in zip keeps the Makefile in `Code/`)."""
    parts = [p for p in t.replace("\\", "/").split("/") if p not in ("", ".")]
    if t.startswith(("/", "\\")) or not parts or ".." in parts or any(
            not p.isprintable() or p.startswith("-") for p in parts):
        raise argparse.ArgumentTypeError(f"{names.console(t)!s}: a folder inside the "
                                         "submission, relative to it, without '..' "
                                         "(e.g. Code)")
    return "/".join(parts)


def _lab(t):
    """--lab NAME: the version of the lab (labs.LABS, or a year)."""
    try:
        return labs.by_name(t).name
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG, description="Grade ECE 420 Lab 2 submissions, each built and run in a "
        "bubblewrap sandbox (own loopback, read-only system, an unprivileged uid of its own, "
        "rlimits, a cgroup).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               f"  {PROG} submissions/alice              one submission, pages in grades/alice/\n"
               f"  {PROG} submissions/* --out grades     a class: grades/index.html, summary.csv\n"
               f"  {PROG} submissions/* --quick          a quick look (3 runs, n=10,1000)\n"
               f"  {PROG} subs/* --similarity --boilerplate kit   and who copied whom\n"
               f"  {PROG} --bundle gradescope --out bundle  bundle/autograder.zip for "
               "Gradescope\n"
               "docs: docs/grading.md")
    ap.add_argument("submissions", nargs="*", type=Path, metavar="SUBMISSION",
                    help="a folder with the sources and a Makefile (or with the built "
                         "servers), a .zip of one, or a folder holding only such a zip")
    ap.add_argument("--out", type=Path, default=Path("grades"),
                    help="output folder (default: %(default)s); one subfolder per submission")
    ap.add_argument("--quick", action="store_true",
                    help="3 runs per server and n = 10, 1000, fewer probes (about 20 s each)")
    ap.add_argument("--runs", type=_runs, help="kit runs per server and n (default 100; 3 quick)")
    ap.add_argument("--sizes", type=_sizes, help="comma list of n (default 10,100,1000)")
    ap.add_argument("--weights", type=Path, default=score.DEFAULT_WEIGHTS,
                    help="points per check, TOML (default: %(default)s)")
    ap.add_argument("--bin-dir", type=Path, default=None,
                    help="lockbench's reference main1..main4, and the grader's own programs "
                         "(the lock tracer liblockprof.so, the kit-style kitref1 and kitref4) "
                         "(default: build/release of this repository)")
    ap.add_argument("--no-reference", action="store_true",
                    help="do not measure the reference servers beside the submissions")
    _what_options(ap)
    ap.add_argument("--timeout", type=_seconds, metavar="S",
                    help="wall-clock limit for one submission (default 3600; 600 quick)")
    ap.add_argument("--budget", type=_seconds, metavar="S",
                    help="wall-clock budget for one submission: the kit runs per setting "
                         "are cut (never below 3) and a later check that no longer fits is "
                         "undetermined, not scored, so results are always written in time "
                         "(default: none; the bundles' default fits the platform's limit)")
    ap.add_argument("--build-timeout", type=_seconds, default=120.0, metavar="S",
                    help="wall-clock limit for make (default: %(default)s)")
    ap.add_argument("--jobs", type=_runs, default=1, metavar="J",
                    help="grade J submissions at a time (default 1: timings of one "
                         "submission are not disturbed by another)")
    ap.add_argument("--force", action="store_true",
                    help="grade again submissions that already have a results.json in --out")
    ap.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    _platform_options(ap)
    return ap


def _what_options(ap) -> None:
    """The options that say what a submission is graded as, and on which checks."""
    versions = "; ".join(f"{name}: {lab.what}" for name, lab in labs.LABS.items())
    ap.add_argument("--lab", type=_lab, metavar="VERSION",
                    help=f"the version of the lab ({versions}); a year names its version "
                         "(default: told apart from what the submission builds and its "
                         "common.h)")
    ap.add_argument("--layout", type=_layout, metavar="mainN=NAME,...",
                    help="where the servers are when a submission names them otherwise, e.g. "
                         "main1=main (a make target or a built file)")
    ap.add_argument("--folder", type=_folder, metavar="PATH",
                    help="build in this folder of each submission (relative to it, e.g. Code) "
                         "when its top folder holds no Makefile and several of its folders "
                         "do (default: the top folder, or the one folder holding a Makefile, "
                         "or the servers)")
    ap.add_argument("--skip", type=_skip, metavar="CHECK,...",
                    help="leave these checks out, each undetermined and not scored: "
                         f"{', '.join(records.SKIPPABLE)} (probe: the timing lines are judged "
                         "without the grader's clock probe; pause: the workload without its "
                         "idle pause); for a faster look, never for final grades")
    ap.add_argument("--race", action="store_true",
                    help="also rebuild with -fsanitize=thread (CC/CFLAGS/LDFLAGS) and report races")
    ap.add_argument("--memory", action="store_true",
                    help="also rebuild with -fsanitize=address,undefined (CC/CFLAGS/LDFLAGS) "
                         "and report each server's first memory error and its source line")
    ap.add_argument("--idle-pause", type=_pause, default=12.0, metavar="S",
                    help="how long each server is left idle between two kit runs, longer than "
                         "a self-exit timeout (default 12; 0 leaves the pause out)")


def _platform_options(ap) -> None:
    """The options for grading on a course platform and across a class."""
    ap.add_argument("--bundle", choices=("gradescope", "prairielearn"),
                    help="instead of grading, write the grader for a course platform into "
                         "--out: gradescope (autograder.zip) or prairielearn (an external "
                         "grader image's folder); --weights, --budget and --quick go with it")
    ap.add_argument("--similarity", action="store_true",
                    help="also compare every pair of submissions' C sources (copydetect, "
                         "MOSS's winnowing): similarity.html and similarity.csv in --out")
    ap.add_argument("--boilerplate", type=Path, metavar="DIR",
                    help="with --similarity: code every student was given (the kit's "
                         "files), left out of the comparison")
    ap.add_argument("--sandbox", choices=("bubblewrap", "container", "auto"),
                    default="bubblewrap",
                    help="bubblewrap (default): refuse to grade where it cannot start; "
                         "container: inside a disposable container where bubblewrap cannot "
                         "start (Gradescope, PrairieLearn), the container is the outer "
                         "boundary; auto: bubblewrap when it starts, else container")


def config(a) -> dict:
    base = dict(QUICK if a.quick else DEFAULT)
    if a.runs:
        base["runs"] = a.runs
    if a.sizes:
        base["sizes"] = a.sizes
    weights = score.load_weights(a.weights)
    base.update({"quick": a.quick, "race": a.race, "memory": a.memory,
                 "idle_pause_s": a.idle_pause, "layout": a.layout or {}, "lab": a.lab,
                 "folder": a.folder or "",
                 "skip": a.skip or [],
                 "build_timeout_s": a.build_timeout,
                 "ready_timeout_s": 15.0, "pause_s": 0.0, "timing_wait_s": 3.0,
                 "max_states": 200_000,
                 "speed_ratio": float(weights["thresholds"].get("speed_ratio", 1.5)),
                 "speed_ratio_serial": float(weights["thresholds"].get("speed_ratio_serial",
                                                                       1.25)),
                 "burst_rounds": 11 if a.quick else 21,
                 # a one-server version's designs that earn the design check, by version
                 "designs": {k: t["designs"] for k, t in weights["labs"].items()
                             if t["designs"] is not None},
                 "cpus": isolation.effective_cpus(),
                 "timeout_s": a.timeout or (600.0 if a.quick else 3600.0)})
    if a.budget:
        # The worker plans for 85 % of it (sandboxed.PLAN_SHARE); the outer limit is the
        # budget itself.
        base.update({"budget_s": a.budget,
                     "timeout_s": min(base["timeout_s"], a.budget),
                     "build_timeout_s": min(a.build_timeout, 0.25 * a.budget)})
    return base


RELEASE = Path(__file__).with_name("release.txt")  # `git archive` fills it (.gitattributes)


def grader_version() -> str:
    """This checkout's commit (and '+changes' when it has uncommitted ones), a bundle's
    VERSION file, or for a copy without .git (a release unpacked from `git archive` or a
    forge's download) the commit and date release.txt was filled with; 'unknown' only
    when the copy carries none of them."""
    stamp = REPO / "VERSION"
    if stamp.is_file():
        return stamp.read_text().strip()[:80] or "unknown"
    try:
        head = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty=+changes"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode == 0 and head.stdout.strip():
            return head.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    return release_version(RELEASE)


def release_version(path: Path) -> str:
    """'1a2b3c4 (released 2026-12-01)' from a filled release.txt, else 'unknown'."""
    try:
        text = path.read_text()[:200].strip()
    except OSError:
        return "unknown"
    parts = text.split()
    if len(parts) != 2 or "$" in text:
        return "unknown"
    return f"{parts[0]} (released {parts[1]})"


def grade_one(cfg, sub: Path, out: Path, ref: dict | None, weights: dict) -> tuple:
    """(evidence, its Score): the submission graded, its pages written from one Score."""
    ev = outer.run_worker(cfg, out, submission=sub)
    ev["grader"] = {**cfg["grader"], "date": time.strftime("%Y-%m-%d %H:%M %Z")}
    (out / "evidence.json").write_text(json.dumps(ev, indent=1))
    return ev, render.write_pages(out, out.name, ev, ref, weights)


def reference(cfg, out: Path, a) -> dict | None:
    if a.no_reference:
        return None
    missing = [m for m in labs.FOUR if not (a.bin_dir / m).is_file()]
    if missing:
        raise GradeError(f"reference servers missing in {a.bin_dir}: {', '.join(missing)} "
                         "(build them: cmake --preset release && cmake --build --preset release,"
                         " or pass --no-reference)")
    rdir = out / "reference"
    key = {k: cfg[k] for k in ("runs", "sizes")}
    stored = rdir / "evidence.json"
    if stored.is_file() and not a.force:
        ev = json.loads(stored.read_text())
        if ev.get("key") == key:
            return ev
    print("measuring the reference servers (same sitting)", file=sys.stderr)
    ev = outer.run_worker({**cfg, "mode": "reference"}, rdir, refbin=a.bin_dir)
    if ev.get("error"):
        raise GradeError(f"reference measurement failed: {ev['error']}")
    ev["key"] = key
    stored.write_text(json.dumps(ev))
    return ev


CONTAINER_NOTE = ("container mode (bubblewrap unavailable: {why}): the container is the "
                  "outer boundary; the submission runs as an unprivileged uid of its own "
                  "without capabilities, under process, address-space, file-size and CPU-time "
                  "limits")


def choose_sandbox(cfg: dict, wanted: str) -> str:
    """Sets cfg['sandbox'] (bubblewrap or container) and cfg['sandbox_note'] (what the
    pages say); returns '' or why grading cannot run here."""
    why = sandbox.available() if wanted != "container" else "--sandbox container"
    if not why:
        cfg["sandbox"], cfg["sandbox_note"] = "bubblewrap", "bubblewrap"
        return ""
    if wanted == "bubblewrap":
        return (f"bubblewrap sandbox unavailable: {why} (inside a disposable container such "
                "as Gradescope's or PrairieLearn's, --sandbox auto grades with the container "
                "as the outer boundary)")
    cant = sandbox.container_ready()
    if cant:
        return f"cannot grade: bubblewrap unavailable ({why}) and {cant}"
    cfg["sandbox"], cfg["sandbox_note"] = "container", CONTAINER_NOTE.format(why=why)
    return ""


def _bundle(a, ap) -> int:
    if a.submissions:
        ap.error("--bundle writes the grader for a platform: give no SUBMISSION")
    if a.skip:
        ap.error("--skip is for a faster look on this machine: a course platform's grades "
                 "run every check")
    try:
        path = bundle.write(a.bundle, a.out, a.weights, a.budget, a.quick,
                            "auto" if a.sandbox == "bubblewrap" else a.sandbox,
                            grader_version(), a.lab, a.folder)
    except score.WeightsError as e:
        ap.error(str(e))
    except OSError as e:
        print(f"{PROG}: error: cannot write the bundle: {e}", file=sys.stderr)
        return 1
    print(f"{a.bundle} bundle: {path} (steps: docs/grading.md, 'Grading on "
          f"{'Gradescope' if a.bundle == 'gradescope' else 'PrairieLearn'}')", file=sys.stderr)
    return 0


def _similarity(a, out: Path, out_names: list) -> dict | None:
    """The similarity check over the class (its flags per submission), or None."""
    if not a.similarity:
        return None
    # copydetect and numpy: imported only when asked for (the grader alone is stdlib only)
    from analysis.grade.pages import similarity as page
    from analysis.grade.similarity import compare as similarity

    print(f"comparing the submissions' sources (similarity: at most "
          f"{similarity.PER_SUBMISSION_S:.0f} s a submission, {similarity.PHASE_S:.0f} s in all)",
          file=sys.stderr)
    result = similarity.compare(dict(zip(out_names, a.submissions)), a.boilerplate)
    page.write(out, result)
    return similarity.flagged(result)


def _one_zip(folder: Path) -> Path:
    """The zip a folder holds when it holds nothing else (a course site's download of one
    student's hand-in), else the folder itself."""
    if not folder.is_dir():
        return folder
    try:
        entries = [e for e in folder.iterdir() if not e.name.startswith(".")][:2]
    except OSError:
        return folder
    if (len(entries) == 1 and not entries[0].is_symlink() and entries[0].is_file()
            and handin.is_zip(entries[0])):
        return entries[0]
    return folder


def _checked(ap, argv) -> argparse.Namespace:
    """The command line, every value refused here (exit 2) before anything starts."""
    a = ap.parse_args(argv)
    if a.boilerplate is not None and not (a.similarity and a.boilerplate.is_dir()):
        ap.error(f"--boilerplate {names.console(str(a.boilerplate))}: needs --similarity and "
                 "a folder")
    if a.bundle:
        return a
    if not a.submissions:
        ap.error("give at least one SUBMISSION folder (or --bundle PLATFORM)")
    for s in a.submissions:
        if not (s.is_dir() or (s.is_file() and handin.is_zip(s))):
            ap.error(f"submission {names.console(str(s))} is neither a folder nor a zip file")
    # a page's name: the folder's, or the zip's without .zip
    a.named = [s.with_suffix("") if s.is_file() else s for s in a.submissions]
    a.submissions = [_one_zip(s) for s in a.submissions]
    if a.bin_dir is not None and not a.bin_dir.is_dir():
        ap.error(f"--bin-dir {names.console(str(a.bin_dir))} is not a folder")
    a.bin_dir = a.bin_dir or REPO / "build" / "release"
    return a


def _one(a, cfg, ref, weights, sub: Path, name: str) -> tuple:
    """Grades one submission into --out/NAME, or keeps an earlier grading of the same
    settings (resuming); (name, evidence, its Score, what happened)."""
    sdir = a.out / name
    stamp = sdir / "grade-key.json"
    key = {k: cfg[k] for k in ("runs", "sizes", "race", "memory", "idle_pause_s", "layout",
                               "lab", "skip", "folder")}
    if ((sdir / "results.json").is_file() and stamp.is_file() and not a.force
            and json.loads(stamp.read_text()) == key):
        ev = json.loads((sdir / "evidence.json").read_text())
        sc = render.write_pages(sdir, name, ev, ref, weights)
        return name, ev, sc, "kept from an earlier run"
    ev, sc = grade_one(cfg, sub, sdir, ref, weights)
    stamp.write_text(json.dumps(key))
    return name, ev, sc, sc.verdict


def _grade_all(a, cfg, weights) -> list:
    """Every submission (J at a time), then the class pages; the class's summary rows."""
    a.out.mkdir(parents=True, exist_ok=True)
    ref = reference(cfg, a.out, a)
    out_names = names.assign(a.named)
    source = dict(zip(out_names, a.submissions))
    per = a.budget or (40.0 if a.quick else 600.0)
    prog = Progress(per * len(out_names), len(out_names), enabled=not a.no_progress)
    rows: dict = {}
    with ThreadPoolExecutor(a.jobs) as pool:
        futures = [pool.submit(_one, a, cfg, ref, weights, s, n)
                   for s, n in zip(a.submissions, out_names)]
        try:
            for f in as_completed(futures):
                name, ev, sc, what = f.result()
                rows[name] = render.summary_row(name, source[name], ev, sc)
                prog.advance(per, f"{name}: {what}")
        except KeyboardInterrupt:
            for f in futures:
                f.cancel()
            for p in list(outer.RUNNING):  # --die-with-parent takes the inner sandboxes along
                p.kill()
            raise
    rows = [rows[n] for n in out_names]
    meta = {"date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "settings": {k: cfg[k] for k in ("runs", "sizes", "quick", "race", "memory",
                                             "skip")},
            "grader": cfg["grader"]}
    # The class pages before the similarity phase (bounded, but it reads what students
    # wrote); written again with its flags once it is done.
    dashboard.write_class(a.out, rows, meta)
    flags = _similarity(a, a.out, out_names)
    if flags is not None:
        dashboard.write_class(a.out, rows, meta, similarity=flags,
                           similarity_page="similarity.html")
    return rows


def main(argv=None) -> int:
    ap = build_parser()
    a = _checked(ap, argv)
    if a.bundle:
        return _bundle(a, ap)
    try:
        cfg = config(a)
        cfg["tools_dir"] = str(a.bin_dir.resolve())
        cfg["grader"] = {"version": grader_version(), "weights": str(a.weights)}
        weights = score.load_weights(a.weights)
    except score.WeightsError as e:
        ap.error(str(e))
    why = choose_sandbox(cfg, a.sandbox)
    if why:
        print(f"{PROG}: error: {why}", file=sys.stderr)
        return 1
    try:
        rows = _grade_all(a, cfg, weights)
    except (GradeError, OSError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; graded submissions are kept in {a.out} "
              "(run the same command again to resume)", file=sys.stderr)
        return 130
    for r in rows:
        print(render.console_line(r))
    print(f"pages: {a.out}/<submission>/verdict.html; class: {a.out}/index.html, "
          f"{a.out}/summary.csv", file=sys.stderr)
    return 0
