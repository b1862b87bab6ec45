"""Grading one submission inside a course platform's container, always leaving a result.

    python3 -m analysis.grade.platforms.hosted gradescope    ($AUTOGRADER_ROOT, def. /autograder)
    python3 -m analysis.grade.platforms.hosted prairielearn  ($PL_ROOT, def. /grade)

The bundles' run_autograder and run_prairielearn call this. It runs the grader (`python -m
analysis.grade`) as a child with the bundle's settings (bundle.json beside the code) under
a hard time limit, then writes the platform's results file: Gradescope's results.json as
the grader wrote it, or PrairieLearn's format converted from it. When grading cannot run
or does not finish, the results still say so, as one failed test naming why: a platform
that finds no results file scores 0 with no word of explanation.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CODE = Path(__file__).resolve().parents[3]   # the bundle's lockbench/ folder
MARGIN_S = 60        # beyond the budget before the grader is stopped
GRADER_FAULT = ("This is the grader's failure, not a verdict on your code: nothing was "
                "scored. Ask your TA to grade this submission again.")


def settings() -> dict:
    """The bundle's settings: budget, quick, sandbox, lab, folder (bundle.json, written by
    bundle.py)."""
    try:
        return json.loads((CODE / "bundle.json").read_text())
    except (OSError, ValueError):
        return {}


def grader_argv(submission: Path, work: Path, cfg: dict, budget: float) -> list:
    """The grader's command line for one submission under the bundle's settings."""
    argv = [sys.executable, "-m", "analysis.grade", str(submission), "--out", str(work),
            "--no-reference", "--no-progress", "--force", "--budget", f"{budget:g}",
            "--sandbox", os.environ.get("LOCKBENCH_SANDBOX", cfg.get("sandbox", "auto")),
            "--bin-dir", str(CODE / "bin"), "--weights", str(CODE / "grade_weights.toml")]
    if cfg.get("quick"):
        argv.append("--quick")
    for option in ("lab", "folder"):   # what the course set when it wrote the bundle
        if cfg.get(option):
            argv += [f"--{option}", str(cfg[option])]
    return argv


def grade(submission: Path, work: Path, cfg: dict) -> tuple:
    """(folder of the graded submission's pages or None, why not) after running the
    grader once under the bundle's budget."""
    budget = float(cfg.get("budget_s", 450))
    argv = grader_argv(submission, work, cfg, budget)
    env = {**os.environ, "PYTHONPATH": str(CODE), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        p = subprocess.run(argv, env=env, capture_output=True, text=True, errors="replace",
                           timeout=budget + MARGIN_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"grading did not finish within {budget + MARGIN_S:g} s"
    except OSError as e:
        return None, f"the grader could not start: {e}"
    pages = [d for d in work.iterdir() if (d / "results.json").is_file()]
    if p.returncode != 0 or len(pages) != 1:
        last = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        return None, f"the grader failed: {last[:500]}"
    return pages[0], ""


def failed_gradescope(why: str, seconds: float) -> dict:
    return {"score": 0, "execution_time": round(seconds),
            "output": f"lockbench could not grade this submission: {why}. {GRADER_FAULT}",
            "tests": [{"name": "The grader ran", "status": "failed", "score": 0,
                       "max_score": 0, "output": f"{why}. {GRADER_FAULT}"}]}


def to_prairielearn(gs: dict, evidence: dict) -> dict:
    """PrairieLearn's results from Gradescope's: score as a fraction, one test per check;
    gradable false when nothing could be built (the student is not charged an attempt)."""
    got, mx = gs.get("score", 0), gs.get("max_score", 0)
    tests = [{"name": t.get("name", ""), "points": t.get("score", 0),
              "max_points": t.get("max_score", 0), "output": t.get("output", ""),
              "message": t.get("status", "")} for t in gs.get("tests", [])]
    out = {"gradable": not build_failed(evidence) and not kit_cannot_grade(evidence),
           "score": min(1.0, max(0.0, got / mx)) if mx else 0.0,
           "message": (gs.get("output", "").splitlines() or [""])[0],
           "output": gs.get("output", ""), "tests": tests}
    if kit_cannot_grade(evidence):
        out["message"] = ("The kit cannot grade your submission (a server and client of your "
                          "own), so it was not graded and costs you no attempt. "
                          + out["message"])
    elif not out["gradable"]:
        out["message"] = ("Your submission did not build, so it was not graded and costs "
                          "you no attempt. " + out["message"])
    return out


def kit_cannot_grade(evidence: dict) -> bool:
    """The version of the lab the kit cannot grade was told (the 2017 lab, labs.OWN: a
    server and client of the student's own); this module imports nothing of the grader."""
    lab = evidence.get("lab") if isinstance(evidence.get("lab"), dict) else {}
    return lab.get("name") == "2017"


def build_failed(evidence: dict) -> bool:
    """None of the lab's servers was built (main1..main4, or main): a build failure, not
    a verdict."""
    status = {c.get("id"): c.get("status") for c in evidence.get("checks", [])
              if isinstance(c, dict)}
    lab = evidence.get("lab") if isinstance(evidence.get("lab"), dict) else {}
    servers = lab.get("servers") or ["main1", "main2", "main3", "main4"]
    missing = next((c.get("evidence", []) for c in evidence.get("checks", [])
                    if isinstance(c, dict) and c.get("id") == "binaries"), [])
    all_missing = any(f"missing: {', '.join(map(str, servers))}" == str(x) for x in missing)
    return status.get("build") == "fail" and all_missing


def failed_prairielearn(why: str) -> dict:
    return {"gradable": False, "score": 0.0,
            "message": f"lockbench could not grade this submission: {why}. {GRADER_FAULT}",
            "output": why, "tests": []}


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def run(platform: str) -> int:
    if platform == "gradescope":
        root = Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))
        submission, results = root / "submission", root / "results" / "results.json"
    else:
        root = Path(os.environ.get("PL_ROOT", "/grade"))
        submission, results = root / "student", root / "results" / "results.json"
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="lockbench-hosted-"))
    try:
        pages, why = grade(submission, work, settings())
        if platform == "gradescope":
            data = (json.loads((pages / "results.json").read_text()) if pages
                    else failed_gradescope(why, time.monotonic() - t0))
        elif pages:
            data = to_prairielearn(json.loads((pages / "results.json").read_text()),
                                   json.loads((pages / "evidence.json").read_text()))
        else:
            data = failed_prairielearn(why)

    except Exception as e:  # noqa: BLE001 - whatever happened, the platform gets a result
        why = f"{type(e).__name__}: {e}"
        data = (failed_gradescope(why, time.monotonic() - t0) if platform == "gradescope"
                else failed_prairielearn(why))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_json(results, data)
    print(data.get("output", "")[:4000])
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("gradescope", "prairielearn"):
        print("usage: python3 -m analysis.grade.platforms.hosted gradescope|prairielearn",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(run(sys.argv[1]))
