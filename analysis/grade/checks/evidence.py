"""The evidence rule every verdict goes through: a check passes only on what it judged.

Each check's record (records.py) says what it counts as judged (`judges`: requests answered,
operations checked, lines compared, probes run) and its runner reports how many
(`judged`: a number, or {server: number} for a check that judges each server). Below one
judged item (for every server it judges) a PASS is not a pass:

- FAIL when the submission made judging impossible: the server answered no request of the
  kit workload, so nothing it could be judged on ever came back;
- UNDETERMINED (not scored) otherwise: the grader lost its own measurement (noise, its
  budget, a probe it could not run), which never costs a student a point.

The page says how much each check judged, whatever its verdict.
"""

from analysis.grade import records as C


def total(judged) -> int:
    """How many items a check judged: the number, or the sum of a per-server count."""
    if isinstance(judged, dict):
        return sum(v for v in judged.values() if isinstance(v, int))
    return judged if isinstance(judged, int) and not isinstance(judged, bool) else 0


def judged_line(c: dict, unit: str) -> str:
    """'judged: 3000 requests answered (main1 1000, main2 2000)'."""
    j = c.get("judged")
    line = f"judged: {total(j)} {unit}"
    if isinstance(j, dict) and len(j) > 1:
        line += " (" + ", ".join(f"{s} {v}" for s, v in j.items()) + ")"
    return line


def _unjudged(judged) -> list:
    """The servers a per-server count judged nothing of ([''] for a number that is 0)."""
    if isinstance(judged, dict):
        return [s for s, v in judged.items() if not v] or ([""] if not judged else [])
    return [] if total(judged) else [""]


def apply(c: dict, answered: dict) -> dict:
    """The check `c` under the evidence rule; answered: {server: requests of the kit
    workload it answered}. Adds the 'judged' line; a pass on nothing judged becomes FAIL
    (nothing came back from that server) or UNDETERMINED (the grader's loss)."""
    rec = C.BY_ID.get(c["id"])
    if rec is None or not rec.judges or c.get("not_run"):
        return c
    c = {**c, "evidence": [*c["evidence"], judged_line(c, rec.judges)]}
    empty = _unjudged(c.get("judged"))
    if c["status"] != "pass" or not empty:
        return c
    who = [s for s in empty if s]
    what = f"nothing of {', '.join(who)} was judged" if who else "nothing was judged"
    silent = [s for s in (who or answered) if not answered.get(s)]
    if not answered or (silent and len(silent) == len(who or answered)):
        c.update(status="fail", fraction=0.0)
        c["evidence"].append(f"{what}: {', '.join(silent) or 'the submission'} answered no "
                             "request of the kit workload, so there was nothing to pass on")
    else:
        c.update(status="undetermined")
        c["evidence"].append(f"{what} (the grader's own measurement was lost): not scored, "
                             "a pass needs evidence")
    return c


def apply_all(checks: list, wl: dict) -> list:
    """Every check of a grading under the rule, with wl the kit workload's results."""
    answered = {name: sum(e.get("requests_ok", 0) for e in per_n.values())
                for name, per_n in (wl or {}).items()}
    return [apply(c, answered) for c in checks]
