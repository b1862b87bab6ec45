"""results.json in Gradescope's format: the score, one test per check with its output
(verdict, points, evidence, what to fix), the submission's output (how the score was made,
the settings, the grader) and the leaderboard.

Every line that may carry a student's text goes through names.visible()."""

import math

from analysis.grade import score as S
from analysis.grade.pages import fmt as F
from analysis.grade.trust import names as N


def _gs_test_output(c: dict) -> str:
    """One Gradescope test's output: its verdict and points, the evidence, a status note
    (skipped, undetermined) and what to fix, each line through names.visible."""
    if c["status"] == "undetermined":
        head = f"{S.status_word(c)}: not scored (0 of 0 points): {S.not_scored_why(c)}"
    else:
        head = (f"{S.status_word(c)}: {c['points']:g} of {c['max_points']:g} points; "
                f"counted: {S.score_rule(c)}")
    lines = [head, "",
             *map(N.visible, c["evidence"]),
             *(x for ex in c.get("counterexamples", []) for x in ["", "Counterexample:",
                                                                  *F.lines(ex)])]
    if F.status_note(c):
        lines += ["", F.status_note(c)]
    items = c["fixes"]
    if items:
        lines += ["", "What to fix:", *(f"- {N.visible(x)}" for x in items)]
    return "\n".join(lines)


def gradescope_output(evidence: dict, sc: S.Score) -> str:
    """The submission's output on Gradescope: verdict, score, what to fix, how the score
    was made, the settings and the grader."""
    out = [f"Verdict: {sc.verdict}; score {sc.total:g} / {sc.maximum:g}",
           f"Why: {sc.reason}."]
    if evidence.get("error"):
        out.append(f"Grading error: {N.visible(evidence['error'])}")
    todo = [(c, c["fixes"]) for c in sc.checks if c["status"] != "pass"]
    todo = [(c, f) for c, f in todo if f]
    if todo:
        out += ["", "What to fix:"]
        out += [f"- {N.visible(c['title'])} ({F.word_scored(c)}): {N.visible(x)}"
                for c, items in todo for x in items]
    out += ["", "How the score was made (check: verdict, weight x share earned = points; "
                "how it is counted):"]
    out += [f"- {N.visible(t)}: {w}, weight {wt}, {rule}" if sh == "not scored"
            else f"- {N.visible(t)}: {w}, {wt} x {sh} = {pts}; {rule}"
            for t, w, wt, sh, pts, rule in S.how_rows(sc)]
    out += [S.score_sums(sc), f"Verdict rule: {S.VERDICT_RULE}", "",
            f"Settings: {F.settings_text(evidence)}; grading took "
            f"{F.num(evidence.get('seconds', 0), '.0f')} s.",
            f"Sandbox: {F.sandbox_text(evidence)}.",
            *([f"Lab: {N.visible(F.lab_text(evidence))}."] if F.lab_text(evidence) else []),
            f"Grader: {N.visible(F.grader_text(evidence, sc.weights))}."]
    return "\n".join(out)


def gradescope(evidence: dict, sc: S.Score) -> dict:
    """results.json in Gradescope's format: one test per check, status 'passed' or 'failed'
    only (an undetermined check, not scored, counts as passed: 0 of 0 points, as Gradescope
    would infer; its output says it was not scored and why). sc: the grading's Score
    (score.of)."""
    seen = sc.weights.get("visibility", {})
    out = {"score": sc.total, "max_score": sc.maximum,
           "visibility": seen.get("results", "visible"),
           "output": gradescope_output(evidence, sc),
           "tests": [{"name": N.visible(c["title"]), "number": str(i + 1),
                      "score": c["points"], "max_score": c["max_points"],
                      "status": "passed" if c["status"] in ("pass", "undetermined")
                      else "failed",
                      "visibility": seen.get(c["id"], "visible"),
                      "output": _gs_test_output(c)}
                     for i, c in enumerate(sc.checks)]}
    secs = evidence.get("seconds")
    if isinstance(secs, (int, float)) and not isinstance(secs, bool) and math.isfinite(secs):
        out["execution_time"] = max(0, round(secs))
    speed = F.leaderboard_speed(evidence)
    if speed is not None:
        out["leaderboard"] = [{"name": F.LEADERBOARD, "value": speed, "order": "desc"}]
    return out
