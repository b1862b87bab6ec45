"""What writes the grader's files: one submission's pages (verdict.md, verdict.html,
results.json), the class's summary.csv, and the console lines.

The grading's score is computed once (score.of) and handed to every page: markdown, html,
gradescope and the class's summary row; every cell of summary.csv goes through
names.csv_cell() and every console line through names.console(), as any text may be a
student's."""

import csv
import json
from pathlib import Path

from analysis.grade import score as S
from analysis.grade.pages import fmt as F
from analysis.grade.pages import gradescope as G
from analysis.grade.pages import html as H
from analysis.grade.pages import markdown as M
from analysis.grade.trust import names as N


def write_pages(out: Path, name: str, evidence: dict, ref: dict | None,
                weights: dict) -> S.Score:
    """verdict.md, verdict.html and results.json from one Score of the grading, which it
    returns (the class's summary row is made from it too)."""
    sc = S.of(evidence, weights)
    (out / "verdict.md").write_text(M.markdown(name, evidence, ref, sc))
    (out / "verdict.html").write_text(H.html_page(name, evidence, ref, sc))
    (out / "results.json").write_text(json.dumps(G.gradescope(evidence, sc), indent=1))
    return sc


# ---- the class: summary.csv, console lines ---------------------------------------------

# summary.csv's first columns, in this order (spreadsheets and scripts read them by place);
# each check's points and maximum follow (check_fields()).
SUMMARY_FIELDS = ("submission", "source", "verdict", "score", "max_score", "failed", "seconds",
                  "similarity")


def summary_row(name: str, source, evidence: dict, sc: S.Score) -> dict:
    """One submission's row of the class summary: `name` its output folder (an
    names.assign() name), `source` the folder it was graded from; SUMMARY_FIELDS, with
    'similarity' empty (write_class() fills it from the similarity check's flags), then
    'checks', each check's points and maximum (check_points()), and 'speed', the
    leaderboard's number (leaderboard_speed(); None when not measured or withheld), and
    'withheld', why a measured speed is not ranked ('' when it is, or none was measured);
    sc: the grading's Score (score.of)."""
    got, mx, word, failed = sc.total, sc.maximum, sc.verdict, sc.failed
    secs = evidence.get("seconds", 0)
    return {"submission": name, "source": str(source), "verdict": word, "score": got,
            "max_score": mx, "failed": " ".join(map(str, failed)),
            "seconds": round(secs, 1) if F.is_number(secs) else 0.0, "similarity": "",
            "checks": S.check_points(sc.checks), "speed": F.leaderboard_speed(evidence),
            "withheld": F.leaderboard_withheld(evidence)}


def check_fields(rows: list[dict]) -> list:
    """The check ids of the rows, in the order first seen (summary.csv's last columns)."""
    seen: dict = {}
    for r in rows:
        checks = r.get("checks")
        for cid in checks if isinstance(checks, dict) else ():
            seen.setdefault(str(cid), None)
    return list(seen)


def _check_cells(row: dict, ids: list) -> list:
    """[points, max] per check id; empty cells for a check the row does not have."""
    checks = row.get("checks") if isinstance(row.get("checks"), dict) else {}
    out = []
    for cid in ids:
        c = checks.get(cid)
        c = c if isinstance(c, dict) else {}
        out += [v if F.is_number(v) else "" for v in (c.get("points"), c.get("max_points"))]
    return out


def write_summary_csv(path: Path, rows: list[dict]) -> None:
    """summary.csv: SUMMARY_FIELDS, then 'ID points' and 'ID max' per check, then 'speed'
    (the leaderboard's number) when any row has one; every cell
    through names.csv_cell(), every text cell quoted (a spreadsheet that splits on ';' or
    tabs still keeps a cell whole)."""
    ids = check_fields(rows)
    speed = any(F.is_number(r.get("speed")) for r in rows)  # a leaderboard: its last column
    header = [*SUMMARY_FIELDS, *(f"{N.visible(i)} {w}" for i in ids for w in ("points", "max")),
              *(["speed"] if speed else [])]
    with open(path, "w", newline="") as f:
        csv.writer(f).writerow([N.csv_cell(h) for h in header])
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        for r in rows:
            w.writerow([N.csv_cell(r.get(k, "")) for k in SUMMARY_FIELDS]
                       + _check_cells(r, ids)
                       + ([r["speed"] if F.is_number(r.get("speed")) else ""] if speed else []))


def console_line(row: dict) -> str:
    """'NAME: VERDICT score/max (failed: ids)' for the terminal: one line whatever the
    row's text holds (names.console())."""
    failed = row.get("failed") or ""
    return (f"{N.console(row.get('submission', ''))}: {N.console(row.get('verdict', ''))} "
            f"{F.num(row.get('score'))}/{F.num(row.get('max_score'))}"
            + (f" (failed: {N.console(failed)})" if failed else ""))
