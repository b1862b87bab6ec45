"""The score of a submission: the weights file (points per check, thresholds, Gradescope
visibility, per-version tables), each check's points and share earned, the verdict and why,
what to fix (records.fixes), and the words that say how each check's points were counted
("How the score was made").

of(evidence, weights) computes a grading's Score once; every page (render, Markdown, HTML,
Gradescope's results, the class page's row) is handed that one Score. Pure functions of
(evidence, weights); the words they return may name a student's check ids and titles: the
pages show them through trust/names.py."""

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (Gradescope's Ubuntu 22.04): Debian's python3-tomli
    import tomli as tomllib

from analysis.grade import labs
from analysis.grade import records as C
from analysis.grade.trust import names as N

DEFAULT_WEIGHTS = Path(__file__).resolve().parents[1] / "grade_weights.toml"


class WeightsError(Exception):
    pass


# What a weights file may hold: its tables, the thresholds the checks read (cli.config), and
# in [points] and [visibility] the checks' ids (records.CHECKS). A key that is none of them
# (a misspelt check would silently score nothing) is refused.
TABLES = ("points", "thresholds", "lab", "visibility")
THRESHOLDS = ("speed_ratio", "speed_ratio_serial")


def _known(path, where: str, keys, allowed) -> None:
    """WeightsError naming the first key of `keys` that is not in `allowed`."""
    for k in keys:
        if k not in allowed:
            raise WeightsError(f"weights {path}: {where}{k} is not known (one of: "
                               f"{', '.join(allowed)})")


def load_weights(path: Path) -> dict:
    """{'points': {check: float}, 'thresholds': {...}, 'visibility': {...}, 'labs': {version:
    {'points': {...}, 'designs': [...]}}}; WeightsError with one line if bad, or if it
    names a table, threshold or check that does not exist."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise WeightsError(f"cannot read weights {path}: {e}") from None
    _known(path, "", data, TABLES)
    points = _points(path, "points", data.get("points", {}))
    seen = data.get("visibility", {})
    if not isinstance(seen, dict) or not isinstance(data.get("thresholds", {}), dict):
        raise WeightsError(f"weights {path}: visibility and thresholds must be tables")
    _known(path, "visibility.", seen, (*(c.id for c in C.CHECKS), "results"))
    _known(path, "thresholds.", data.get("thresholds", {}), THRESHOLDS)
    for k, v in seen.items():
        if v not in VISIBILITY:
            raise WeightsError(f"weights {path}: visibility.{k} must be one of "
                               f"{', '.join(VISIBILITY)}, got {v!r}")
    return {"points": points, "thresholds": data.get("thresholds", {}), "path": str(path),
            "visibility": seen, "labs": _lab_tables(path, data.get("lab", {}))}


def _points(path, where: str, points) -> dict:
    if not isinstance(points, dict):
        raise WeightsError(f"weights {path}: {where} must be a table of points per check")
    _known(path, f"{where}.", points, tuple(c.id for c in C.CHECKS))
    for k, v in points.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise WeightsError(f"weights {path}: {where}.{k} must be a number >= 0, got {v!r}")
    return points


def _lab_tables(path, tables) -> dict:
    """[lab."VERSION"] tables: a version's points where they differ from [points], and for a
    one-server version the lock designs of `main` that earn the design check."""
    out = {}
    for name, t in (tables.items() if isinstance(tables, dict) else ()):
        if name not in labs.LABS:
            raise WeightsError(f"weights {path}: lab.{name!r} is not a version of the lab "
                               f"(one of {', '.join(labs.LABS)})")
        if not isinstance(t, dict) or set(t) - {"points", "designs"}:
            raise WeightsError(f"weights {path}: lab.{name!r} may hold only points and designs")
        designs = t.get("designs")   # None: the version's own
        if designs is not None and len(labs.LABS[name].servers) > 1:
            raise WeightsError(f"weights {path}: lab.{name!r}.designs: each server of that "
                               "version has the design of its number")
        if designs is not None and (not isinstance(designs, list) or not designs or any(
                d not in labs.ANY_DESIGN for d in designs)):
            raise WeightsError(f"weights {path}: lab.{name!r}.designs must list some of "
                               + ", ".join(map(repr, labs.ANY_DESIGN)))
        out[name] = {"points": _points(path, f"lab.{name!r}.points", t.get("points", {})),
                     "designs": designs}
    return out


def points_of(evidence: dict, weights: dict) -> dict:
    """Points per check for the version of the lab the evidence was graded as."""
    lab = evidence.get("lab")
    name = lab.get("name") if isinstance(lab, dict) else None
    mine = weights.get("labs", {}).get(name, {}) if isinstance(name, str) else {}
    return {**weights["points"], **mine.get("points", {})}


# Gradescope's values: when the student sees a test (and the results as a whole)
VISIBILITY = ("visible", "hidden", "after_due_date", "after_published")


def score(evidence: dict, weights: dict) -> list:
    """The checks with 'points' and 'max_points' added. An undetermined check (the grader
    could not tell, e.g. a measurement too close to call on a noisy machine) is not
    scored at all: the grader's limits never cost a point."""
    out, points = [], points_of(evidence, weights)
    for c in evidence.get("checks", []):
        if c["id"] not in points:   # said on the page, never silently nothing
            c = {**c, "unweighted": True}
        mx = float(points.get(c["id"], 0))
        if c["status"] == "undetermined":
            out.append({**c, "points": 0.0, "max_points": 0.0})
            continue
        out.append({**c, "points": round(mx * earned_share(c), 2), "max_points": mx})
    return out


def earned_share(check: dict) -> float:
    """The share of its points a scored check earns: its `fraction` (partial credit, held
    to 0..1) when it has a numeric one, else 1 for a pass and 0 otherwise; 0 when skipped."""
    if check.get("status") == "skip":
        return 0.0
    frac = check.get("fraction")
    if isinstance(frac, (int, float)) and not isinstance(frac, bool) and math.isfinite(frac):
        return min(1.0, max(0.0, float(frac)))
    return 1.0 if check.get("status") == "pass" else 0.0


# Failing these is a finding (the kit's own sample fails some robustness probes), not a FAIL.


def not_gradable(evidence: dict) -> str:
    """Why the kit cannot grade the version of the lab the evidence was told to be (the
    2017 lab: its own server, client and protocol), or ''."""
    lab = evidence.get("lab")
    return labs.OWN.gradable if isinstance(lab, dict) and lab.get("name") == labs.OWN.name \
        else ""


def verdict(evidence: dict) -> tuple:
    """('PASS' | 'PASS WITH FINDINGS' | 'FAIL' | labs.NOT_GRADABLE, [ids of failed
    checks])."""
    if evidence.get("error"):
        return "FAIL", ["grading"]
    if not_gradable(evidence):
        return labs.NOT_GRADABLE, []
    failed = [c["id"] for c in evidence.get("checks", []) if c["status"] == "fail"]
    if not failed:
        return "PASS", failed
    return ("PASS WITH FINDINGS" if all(f in C.FINDINGS for f in failed) else "FAIL"), failed


def totals(scored: list) -> tuple:
    return (round(sum(c["points"] for c in scored), 2),
            round(sum(c["max_points"] for c in scored), 2))


def not_scored_why(check: dict) -> str:
    """Why an undetermined check is not scored."""
    return ("the grader did not run it" if check.get("not_run") is True
            else "the grader could not tell")


def score_rule(check: dict) -> str:
    """How this check's points were counted, in words."""
    status = check.get("status")
    if status == "undetermined":
        return f"not scored: {not_scored_why(check)}"
    if status == "skip":
        return "skipped: earns nothing"
    if check.get("unweighted"):
        return "no line of points in the weights file: worth nothing"
    if "fraction" not in check:
        return "all or nothing"
    cid = check.get("id")
    partial = C.BY_ID[cid].partial if cid in C.BY_ID else ""
    if cid not in C.PER_SERVER:
        return partial or "the share the check reported"
    return (partial or "all or nothing for the servers present") + \
        "; each missing server costs its quarter"


def share_text(check: dict) -> str:
    """The share earned: '1', '0', '5/7 (71 %)'; 'not scored' for an undetermined check."""
    if check.get("status") == "undetermined":
        return "not scored"
    share = earned_share(check)
    if share in (0.0, 1.0):
        return f"{share:g}"
    frac = Fraction(share).limit_denominator(64)
    shown = f"{frac.numerator}/{frac.denominator} " if abs(float(frac) - share) < 1e-9 else ""
    return f"{shown}({share * 100:.0f} %)"


VERDICT_RULE = ("PASS when no check failed; PASS WITH FINDINGS when the only checks that "
                "failed are robustness, races and memory (the kit's own sample fails some "
                "robustness probes); FAIL when any other check failed, or when grading "
                "itself failed. A skipped check earns nothing but does not decide the verdict; an "
                "undetermined check is not scored at all: the grader's limits never cost a "
                "point. NOT GRADABLE BY THE KIT: a version of the lab the kit's client cannot "
                "talk to (the 2017 lab, a server and client of the student's own): nothing is "
                "run against it, nothing scored.")


def verdict_reason(evidence: dict) -> str:
    """Why this submission got its verdict word (check ids through names.visible)."""
    word, failed = verdict(evidence)
    ids = ", ".join(map(N.visible, failed))
    if evidence.get("error"):
        return "FAIL because grading itself failed (see the grading error)"
    if word == labs.NOT_GRADABLE:
        return (f"{word} because this is {not_gradable(evidence)}; none of the kit's checks "
                "was run or scored (the build check says what was found)")
    if word == "PASS":
        return "PASS because no check failed"
    if word == "PASS WITH FINDINGS":
        return f"PASS WITH FINDINGS because only {ids} failed"
    findings = [f for f in failed if f in C.FINDINGS]
    decisive = ", ".join(N.visible(f) for f in failed if f not in C.FINDINGS)
    return (f"FAIL because {decisive} failed"
            + (f" (and {', '.join(findings)}, a finding)" if findings else ""))


def how_rows(sc: "Score") -> list:
    """One row per check for 'How the score was made': (title, verdict word, weight, share
    earned, points, rule); the title as it is (escape it), the rest the grader's words."""
    rows = []
    for c in sc.checks:
        weight = float(sc.points.get(c["id"], 0))
        pts = ("0 (not scored)" if c["status"] == "undetermined"
               else f"{c['points']:g} / {c['max_points']:g}")
        rows.append((c["title"], status_word(c), f"{weight:g}", share_text(c), pts,
                     score_rule(c)))
    return rows


def score_sums(sc: "Score") -> str:
    """'Score: the sum of the points, G of M.' and what undetermined checks left out."""
    left = [c for c in sc.checks if c["status"] == "undetermined"]
    text = f"Score: the sum of the points earned, {sc.total:g} of {sc.maximum:g}."
    if left:
        pts = sum(float(sc.points.get(c["id"], 0)) for c in left)
        text += (f" Not scored (undetermined): {', '.join(N.visible(c['title']) for c in left)}"
                 f"; their {pts:g} points are left out of the maximum.")
    return text


def check_points(scored: list) -> dict:
    """{check id: {'title', 'status', 'points', 'max_points'}} of score()'s checks, in their
    order: what the class page and summary.csv show per check (the first of a repeated id)."""
    out = {}
    for c in scored:
        cid = str(c.get("id"))
        if cid not in out:
            status = c.get("status")
            out[cid] = {"title": str(c.get("title") or cid),
                        "status": status if isinstance(status, str) else "unknown",
                        "points": c["points"], "max_points": c["max_points"]}
    return out


STATUS_WORDS = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP",
                "undetermined": "UNDETERMINED"}


def status_word(check: dict) -> str:
    """PASS, FAIL, SKIP, or UNKNOWN for a status that is none of those."""
    status = check.get("status")
    return STATUS_WORDS.get(status, "UNKNOWN") if isinstance(status, str) else "UNKNOWN"


@dataclass(frozen=True)
class Score:
    """One grading's score, computed once (of()) and handed to every page."""
    checks: list     # the evidence's checks with 'points', 'max_points' and 'fixes' added
    total: float
    maximum: float
    verdict: str     # PASS, PASS WITH FINDINGS, FAIL or labs.NOT_GRADABLE
    failed: list     # the ids of the checks that failed
    reason: str      # why this verdict (verdict_reason)
    points: dict     # points per check for the version of the lab graded
    weights: dict    # the weights it was counted from (their path, Gradescope visibility)


def one_server(evidence: dict) -> bool:
    """The evidence was graded as a one-server lab (its own fix texts apply)."""
    lab = evidence.get("lab")
    servers = lab.get("servers") if isinstance(lab, dict) else None
    return isinstance(servers, list) and len(servers) == 1


def of(evidence: dict, weights: dict) -> Score:
    """The score of one grading: every check's points and what to fix (records.fixes, for
    the version of the lab graded), the totals, the verdict and why."""
    one = one_server(evidence)
    checks = [{**c, "fixes": C.fixes(c, one)} for c in score(evidence, weights)]
    got, mx = totals(checks)
    word, failed = verdict(evidence)
    return Score(checks, got, mx, word, failed, verdict_reason(evidence),
                 points_of(evidence, weights), weights)
