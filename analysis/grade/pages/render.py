"""Verdict pages from evidence.json: Markdown, one self-contained HTML page (inline SVG, no
external assets), and Gradescope's results.json; the class summary (summary.csv,
index.html) and the console lines. Pure functions of (evidence, weights) but the writers.

Every string of the evidence may carry a student's text (make output, server stderr,
replies, timing-file lines, the folder's name): it is shown only through analysis.grade.names
(code spans or escapes in Markdown, html.escape in HTML, escaped controls everywhere).

Every page teaches: for each check that did not pass, "What to fix" (the check's own `fix`,
the worker's specific diagnosis, else its record's default (checks.py); the grader's words,
which may quote a student's, so escaped alike), and "How the score was made" (each check's
weight, the share earned, its points, the verdict rule, the weights file), with the
settings, the date and the grader version (evidence["grader"], when present)."""

import csv
import html
import json
import math
import re
from fractions import Fraction
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (Gradescope's Ubuntu 22.04): Debian's python3-tomli
    import tomli as tomllib

from analysis.grade import checks as C
from analysis.grade import labs
from analysis.grade.trust import names as N

DEFAULT_WEIGHTS = Path(__file__).resolve().parents[2] / "grade_weights.toml"


class WeightsError(Exception):
    pass


def load_weights(path: Path) -> dict:
    """{'points': {check: float}, 'thresholds': {...}, 'visibility': {...}, 'labs': {version:
    {'points': {...}, 'designs': [...]}}}; WeightsError with one line if bad."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise WeightsError(f"cannot read weights {path}: {e}") from None
    points = _points(path, "points", data.get("points", {}))
    seen = data.get("visibility", {})
    for k, v in seen.items():
        if v not in VISIBILITY:
            raise WeightsError(f"weights {path}: visibility.{k} must be one of "
                               f"{', '.join(VISIBILITY)}, got {v!r}")
    return {"points": points, "thresholds": data.get("thresholds", {}), "path": str(path),
            "visibility": seen, "labs": _lab_tables(path, data.get("lab", {}))}


def _points(path, where: str, points) -> dict:
    if not isinstance(points, dict):
        raise WeightsError(f"weights {path}: {where} must be a table of points per check")
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


def verdict(evidence: dict) -> tuple:
    """('PASS' | 'PASS WITH FINDINGS' | 'FAIL', [ids of failed checks])."""
    if evidence.get("error"):
        return "FAIL", ["grading"]
    failed = [c["id"] for c in evidence.get("checks", []) if c["status"] == "fail"]
    if not failed:
        return "PASS", failed
    return ("PASS WITH FINDINGS" if all(f in C.FINDINGS for f in failed) else "FAIL"), failed


def totals(scored: list) -> tuple:
    return (round(sum(c["points"] for c in scored), 2),
            round(sum(c["max_points"] for c in scored), 2))


def _fmt(v):
    return "—" if v is None else f"{v:.3e}"


def servers_of(evidence: dict, ref_t: dict) -> list:
    """The table's rows: the lab's servers (main1..main4 when the evidence does not say),
    then the reference's others (its four designs beside a lab's one `main`)."""
    lab = evidence.get("lab") if isinstance(evidence.get("lab"), dict) else {}
    mine = [s for s in lab.get("servers") or labs.FOUR if isinstance(s, str)]
    return mine + [s for s in labs.FOUR if s in ref_t and s not in mine]


def table_rows(sub: dict, ref: dict, key: str, sizes: list, servers=labs.FOUR) -> list:
    rows = []
    for s in servers:
        row = [s]
        for n in sizes:
            row.append(_fmt(sub.get(s, {}).get(str(n), {}).get(key)))
            row.append(_fmt(ref.get(s, {}).get(str(n), {}).get(key)))
        rows.append(row)
    return rows


def ranking(tab: dict, n, servers=labs.FOUR) -> str:
    vals = [(tab.get(s, {}).get(str(n), {}).get("mean"), s) for s in servers]
    vals = [(v, s) for v, s in vals if v is not None]
    return " < ".join(s for _, s in sorted(vals)) if vals else "—"


def sizes_of(evidence: dict) -> list:
    """The sizes n of the evidence's settings: integers only, as they go into page markup."""
    return [n for n in evidence.get("config", {}).get("sizes", [])
            if isinstance(n, int) and not isinstance(n, bool)]


STATUS_WORDS = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP",
                "undetermined": "UNDETERMINED"}


def status_word(check: dict) -> str:
    """PASS, FAIL, SKIP, or UNKNOWN for a status that is none of those."""
    status = check.get("status")
    return STATUS_WORDS.get(status, "UNKNOWN") if isinstance(status, str) else "UNKNOWN"


def _num(v, spec: str = "g") -> str:
    """A number of the evidence as text; '?' for anything else."""
    return format(v, spec) if isinstance(v, (int, float)) and not isinstance(v, bool) else "?"


def settings_text(evidence: dict) -> str:
    """'R kit runs per server and n = 10, 1000 (quick)', from numbers only."""
    cfg = evidence.get("config", {})
    budget, cpus = cfg.get("budget_s"), cfg.get("cpus")
    skip = cfg.get("skip")
    left = [c for c in C.SKIPPABLE if isinstance(skip, list) and c in skip]
    return (f"{_num(cfg.get('runs'))} kit runs per server and n = "
            f"{', '.join(map(str, sizes_of(evidence)))}" + (" (quick)" if cfg.get("quick") else "")
            + (f"; time budget {_num(budget, '.0f')} s" if _is_number(budget) else "")
            + (f"; {_num(cpus)} CPU" if _is_number(cpus) else "")
            + (f"; left out: {', '.join(left)}" if left else ""))


def lab_text(evidence: dict) -> str:
    """Which version of the lab was graded and why ('' when the evidence does not say)."""
    lab = evidence.get("lab")
    if not isinstance(lab, dict) or not isinstance(lab.get("name"), str):
        return ""
    what, why = (lab.get(k) if isinstance(lab.get(k), str) else "" for k in ("what", "why"))
    return (f"graded as the {lab['name']} lab" + (f": {what}" if what else "")
            + (f" ({why})" if why else ""))


def sandbox_text(evidence: dict) -> str:
    """Which limits applied to this submission (the grader's own words)."""
    sb = evidence.get("sandbox") or {}
    mode = sb.get("mode")
    parts = [N.visible(mode) if isinstance(mode, str) and mode.startswith("container") else
             "bubblewrap: own loopback, only /usr, a few /etc files and its own copy "
             "visible, its own unprivileged uid without capabilities"]
    for key, what in (("memory", "memory"), ("processes", "processes"),
                      ("scratch", "disk")):
        if isinstance(sb.get(key), str):
            parts.append(f"{what}: {sb[key]}")
    left = sb.get("left_behind")
    if isinstance(left, int) and left:
        parts.append(f"{left} process(es) left after grading were killed")
    return "; ".join(parts)


def _anchor(cid) -> str:
    """A check id as an HTML id and fragment: the id's safe characters only."""
    return "check-" + re.sub(r"[^A-Za-z0-9_-]", "_", str(cid))


def _lines(text) -> list:
    """The lines of a multi-line text (a counterexample), each as names.visible()."""
    return [N.visible(line) for line in str(text).split("\n")]


# ---- teaching: what to fix, how the score was made ------------------------------------

# Said of a check that neither passed nor failed, before what to fix.
STATUS_NOTE = {
    "skip": "Skipped: this check could not be run on this submission, so it earns none of "
            "its points (the evidence says why).",
    "undetermined": "Undetermined: the grader could not tell (e.g. a measurement too close "
                    "to call on a noisy machine), so this check is not scored: neither its "
                    "points nor its maximum count, and no point is lost. Look at it anyway:",
}


def _word_scored(c: dict) -> str:
    """The check's verdict word, with ', not scored' when undetermined."""
    return status_word(c) + (", not scored" if c["status"] == "undetermined" else "")


# Said of a check the grader did not run (its time budget, or the command's --skip).
NOT_RUN_NOTE = ("Not run: the grader left this check out (the evidence says why), so it is not "
                "scored: neither its points nor its maximum count, and no point is lost.")


def status_note(check: dict) -> str:
    """STATUS_NOTE's sentence for a skipped or undetermined check, else ''."""
    if check.get("not_run") is True and check.get("status") == "undetermined":
        return NOT_RUN_NOTE
    status = check.get("status")
    return STATUS_NOTE.get(status, "") if isinstance(status, str) else ""


def fixes(check: dict) -> list:
    """What to fix for a check that did not pass: its own `fix` (a text or a list of texts,
    the worker's specific diagnosis) when it has one, else its record's default fix
    (checks.py); [] for a passed check or one the grader did not run. The texts may quote a
    student's: show them escaped."""
    if check.get("status") == "pass" or check.get("not_run") is True:
        return []
    own = check.get("fix")
    own = [own] if isinstance(own, str) else own if isinstance(own, list) else []
    own = [str(x) for x in own if isinstance(x, str) and x.strip()]
    if own:
        return own
    record = C.BY_ID.get(check.get("id"))
    return [record.fix] if record and record.fix else []


def _code_parts(text) -> list:
    """[(is_code, part)]: `text` split at its pairs of backticks (with an unpaired one, all
    of it is text)."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:
        return [(False, str(text))]
    return [(i % 2 == 1, p) for i, p in enumerate(parts) if p]


def rich_md(text, cell: bool = False) -> str:
    """Grader prose that may quote a student (a fix, a rule) as Markdown: the parts between
    backticks as code spans (N.md_code, N.md_cell in a table), the rest through N.md_text."""
    code = N.md_cell if cell else N.md_code
    return "".join(code(p) if is_code else N.md_text(p) for is_code, p in _code_parts(text))


def rich_html(text) -> str:
    """rich_md() for HTML: <code> for the parts between backticks, everything escaped."""
    e = html.escape
    return "".join(f"<code>{e(N.visible(p))}</code>" if is_code else e(N.visible(p))
                   for is_code, p in _code_parts(text))


def _not_scored_why(check: dict) -> str:
    """Why an undetermined check is not scored."""
    return ("the grader did not run it" if check.get("not_run") is True
            else "the grader could not tell")


def score_rule(check: dict) -> str:
    """How this check's points were counted, in words."""
    status = check.get("status")
    if status == "undetermined":
        return f"not scored: {_not_scored_why(check)}"
    if status == "skip":
        return "skipped: earns nothing"
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
                "point.")


def verdict_reason(evidence: dict) -> str:
    """Why this submission got its verdict word (check ids through names.visible)."""
    word, failed = verdict(evidence)
    ids = ", ".join(map(N.visible, failed))
    if evidence.get("error"):
        return "FAIL because grading itself failed (see the grading error)"
    if word == "PASS":
        return "PASS because no check failed"
    if word == "PASS WITH FINDINGS":
        return f"PASS WITH FINDINGS because only {ids} failed"
    findings = [f for f in failed if f in C.FINDINGS]
    decisive = ", ".join(N.visible(f) for f in failed if f not in C.FINDINGS)
    return (f"FAIL because {decisive} failed"
            + (f" (and {', '.join(findings)}, a finding)" if findings else ""))


def how_rows(evidence: dict, weights: dict) -> list:
    """One row per check for 'How the score was made': (title, verdict word, weight, share
    earned, points, rule); the title as it is (escape it), the rest the grader's words."""
    rows = []
    points = points_of(evidence, weights)
    for c in score(evidence, weights):
        weight = float(points.get(c["id"], 0))
        pts = ("0 (not scored)" if c["status"] == "undetermined"
               else f"{c['points']:g} / {c['max_points']:g}")
        rows.append((c["title"], status_word(c), f"{weight:g}", share_text(c), pts,
                     score_rule(c)))
    return rows


def _grader_field(evidence: dict, key: str):
    g = evidence.get("grader")
    v = g.get(key) if isinstance(g, dict) else None
    return v if isinstance(v, str) and v else None


def weights_file(evidence: dict, weights: dict) -> str:
    """The weights file used: the evidence's grader record, else the loaded weights' path."""
    path = _grader_field(evidence, "weights") or weights.get("path")
    return str(path) if path else "not recorded"


def grader_text(evidence: dict, weights: dict) -> str:
    """'graded DATE by the lockbench grader VERSION; weights from FILE', saying which of
    them the evidence does not record (escape it)."""
    date, version = _grader_field(evidence, "date"), _grader_field(evidence, "version")
    missing = " and ".join(w for w, v in (("version", version), ("date", date)) if not v)
    return ((f"graded {date} by " if date else "")
            + f"the lockbench grader{f' {version}' if version else ''}"
            + (f" ({missing} not recorded)" if missing else "")
            + f"; weights from {weights_file(evidence, weights)}")


def _md_head(name: str, evidence: dict, weights: dict, scored: list) -> list:
    word, failed = verdict(evidence)
    got, mx = totals(scored)
    failed_md = ", ".join(map(N.md_code, failed))
    out = [f"# Lab 2 grade: {N.md_code(name)}", "",
           f"**Verdict: {word}**" + (f" (failed: {failed_md})" if failed else ""),
           f"**Score: {got:g} / {mx:g}**", "",
           f"Settings: {settings_text(evidence)}; grading took "
           f"{_num(evidence.get('seconds', 0), '.0f')} s.", "",
           f"Grader: {N.md_text(grader_text(evidence, weights))}.", "",
           f"Sandbox: {N.md_text(sandbox_text(evidence))}", ""]
    if lab_text(evidence):
        out += [f"Lab: {N.md_text(lab_text(evidence))}", ""]
    if evidence.get("error"):
        out += [f"Grading error: {N.md_code(evidence['error'])}", ""]
    out += ["| Check | Verdict | Points |", "|---|---|---|"]
    for c in scored:
        out.append(f"| {N.md_text(c['title'])} | {status_word(c)} | "
                   f"{c['points']:g} / {c['max_points']:g} |")
    return [*out, ""]


def _md_fix_list(items: list, indent: str = "") -> list:
    return [f"{indent}- {rich_md(x)}" for x in items]


def _md_fix_summary(scored: list) -> list:
    """'## What to fix': every check that did not pass, with what to change."""
    todo = [(c, fixes(c)) for c in scored if c["status"] != "pass"]
    todo = [(c, f) for c, f in todo if f]
    if not todo:
        return []
    out = ["## What to fix", ""]
    for c, items in todo:
        head = f"- **{N.md_text(c['title'])}** ({_word_scored(c)})"
        out += ([f"{head}: {rich_md(items[0])}"] if len(items) == 1
                else [f"{head}:", *_md_fix_list(items, "  ")])
    return [*out, ""]


def _md_teach(c: dict) -> list:
    """A check's status note (skipped, undetermined) and its 'What to fix' line."""
    out = [N.md_text(status_note(c)), ""] if status_note(c) else []
    items = fixes(c)
    if len(items) == 1:
        out += [f"**What to fix:** {rich_md(items[0])}", ""]
    elif items:
        out += ["**What to fix:**", "", *_md_fix_list(items), ""]
    return out


def _md_check_sections(scored: list) -> list:
    out = []
    for c in scored:
        out += [f"## {N.md_text(c['title'])}: {status_word(c)}", ""]
        out += [f"- {N.md_code(line)}" for line in c["evidence"]]
        for ex in c.get("counterexamples", []):
            out += ["", "Counterexample:", "", N.md_fence(ex)]
        out.append("")
        out += _md_teach(c)
    return out


def score_sums(evidence: dict, weights: dict, scored: list) -> str:
    """'Score: the sum of the points, G of M.' and what undetermined checks left out."""
    got, mx = totals(scored)
    left = [c for c in scored if c["status"] == "undetermined"]
    text = f"Score: the sum of the points earned, {got:g} of {mx:g}."
    if left:
        points = points_of(evidence, weights)
        pts = sum(float(points.get(c["id"], 0)) for c in left)
        text += (f" Not scored (undetermined): {', '.join(N.visible(c['title']) for c in left)}"
                 f"; their {pts:g} points are left out of the maximum.")
    return text


def _md_how(evidence: dict, weights: dict, scored: list) -> list:
    """'## How the score was made': weights, shares earned, points, the verdict rule."""
    out = ["## How the score was made", "",
           "| Check | Verdict | Weight | Earned | Points | How it is counted |",
           "|---|---|---|---|---|---|"]
    for title, word, weight, share, pts, rule in how_rows(evidence, weights):
        out.append(f"| {N.md_text(title)} | {word} | {weight} | {share} | {pts} | "
                   f"{rich_md(rule, cell=True)} |")
    return [*out, "", N.md_text(score_sums(evidence, weights, scored)), "",
            f"Verdict: {N.md_text(verdict_reason(evidence))}. The rule: "
            f"{N.md_text(VERDICT_RULE)}", "",
            f"Weights: {N.md_code(weights_file(evidence, weights))} (points per check; a "
            "course edits it or passes its own with `--weights FILE`).", ""]


TABLES = (("mean", "Mean"), ("median", "Median"))


def _table_data(evidence: dict, ref: dict | None) -> tuple:
    """(the submission's tables, the reference's, the sizes); empty tables when none."""
    ref_t = (ref or {}).get("tables", {})
    return evidence.get("tables") or {}, ref_t, sizes_of(evidence), servers_of(evidence, ref_t)


def _md_tables(evidence: dict, ref: dict | None) -> list:
    sub_t, ref_t, sizes, servers = _table_data(evidence, ref)
    if not sub_t:
        return []
    out = []
    for num, (key, what) in enumerate(TABLES, 1):
        out += [f"## Table {num}: {what} memory access latency (s), submission | reference", ""]
        head = "| Server | " + " | ".join(f"n={n} | ref n={n}" for n in sizes) + " |"
        out += [head, "|---" * (1 + 2 * len(sizes)) + "|"]
        out += ["| " + " | ".join(r) + " |"
                for r in table_rows(sub_t, ref_t, key, sizes, servers)]
        out.append("")
    out += ["Ranking by mean latency (fastest first):", ""]
    for n in sizes:
        out.append(f"- n={n}: submission {ranking(sub_t, n, servers)}; reference "
                   f"{ranking(ref_t, n)}")
    return [*out, ""]


def markdown(name: str, evidence: dict, ref: dict | None, weights: dict) -> str:
    """verdict.md: the verdict and score, what to fix, each check's evidence, how the score
    was made, Tables 1 and 2 beside the reference."""
    scored = score(evidence, weights)
    out = _md_head(name, evidence, weights, scored) + _md_fix_summary(scored)
    out += _md_check_sections(scored) + _md_how(evidence, weights, scored)
    out += _md_tables(evidence, ref)
    return "\n".join(out)


def svg_bars(sub: dict, ref: dict, n, servers=labs.FOUR) -> str:
    """Mean latency per server, submission beside reference, as inline SVG."""
    vals = []
    for s in servers:
        vals.append((s, sub.get(s, {}).get(str(n), {}).get("mean"),
                     ref.get(s, {}).get(str(n), {}).get("mean")))
    top = max([v for _, a, b in vals for v in (a, b) if v] or [1])
    w, h, bw = max(360, 30 + 85 * len(vals)), 160, 28
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 40}" '
             f'role="img" aria-label="mean latency n={n}">',
             f'<text x="4" y="14" font-size="12">mean latency, n={n} (max {top:.2e} s)</text>']
    for i, (s, a, b) in enumerate(vals):
        x = 20 + i * 85
        for j, (v, colour) in enumerate(((a, "#3465a4"), (b, "#babdb6"))):
            if v:
                bh = max(1, int(v / top * (h - 30)))
                parts.append(f'<rect x="{x + j * bw}" y="{h - bh}" width="{bw - 2}" '
                             f'height="{bh}" fill="{colour}"/>')
        parts.append(f'<text x="{x}" y="{h + 16}" font-size="12">{html.escape(s)}</text>')
    parts.append(f'<text x="4" y="{h + 34}" font-size="11" fill="#3465a4">submission</text>'
                 f'<text x="90" y="{h + 34}" font-size="11" fill="#888">reference</text></svg>')
    return "".join(parts)


PASS_COLOUR = "#00a000"
FAIL_COLOUR = "#d00000"
FINDINGS_COLOUR = "#b06000"


def _html_fix(items: list) -> str:
    """'What to fix:' with one item inline, several as a list (escaped by rich_html)."""
    if len(items) == 1:
        return f"<strong>What to fix:</strong> {rich_html(items[0])}"
    return ("<strong>What to fix:</strong><ul>"
            + "".join(f"<li>{rich_html(x)}</li>" for x in items) + "</ul>")


def html_teach(c: dict) -> str:
    """A check's status note (skipped, undetermined) and 'What to fix', as one block."""
    items = fixes(c)
    note = status_note(c)
    if not items and not note:
        return ""
    parts = [f"<p>{html.escape(note)}</p>"] if note else []
    if items:
        parts.append(f"<p>{_html_fix(items)}</p>")
    return f"<div class='fix'>{''.join(parts)}</div>"


def html_fix_summary(scored: list) -> list:
    """'What to fix' near the top: each check that did not pass, linked to its section."""
    todo = [(c, fixes(c)) for c in scored if c["status"] != "pass"]
    todo = [(c, f) for c, f in todo if f]
    if not todo:
        return []
    b = ["<h2 id='what-to-fix'>What to fix</h2><ul class='fixes'>"]
    for c, items in todo:
        b.append(f"<li><a href='#{_anchor(c['id'])}'>{html.escape(N.visible(c['title']))}</a>"
                 f" ({_word_scored(c)}): " + (rich_html(items[0]) if len(items) == 1 else
                                   "<ul>" + "".join(f"<li>{rich_html(x)}</li>"
                                                    for x in items) + "</ul>") + "</li>")
    return [*b, "</ul>"]


def html_checks(scored: list) -> list:
    """The checks' table and one section per check with its evidence, as HTML parts."""
    e = html.escape
    b = ["<table><tr><th>Check</th><th>Verdict</th><th>Points</th></tr>"]
    for c in scored:
        word = status_word(c)
        b.append(f"<tr><td><a href='#{_anchor(c['id'])}'>{e(N.visible(c['title']))}</a></td>"
                 f"<td class='{word.lower()}'>{word}</td>"
                 f"<td>{c['points']:g} / {c['max_points']:g}</td></tr>")
    b.append("</table>")
    for c in scored:
        word = status_word(c)
        b.append(f"<h2 id='{_anchor(c['id'])}'>{e(N.visible(c['title']))}: "
                 f"<span class='{word.lower()}'>{word}</span></h2><ul>")
        b += [f"<li>{e(N.visible(line))}</li>" for line in c["evidence"]]
        b.append("</ul>")
        for ex in c.get("counterexamples", []):
            b.append(f"<p>Counterexample:</p><pre>{e(chr(10).join(_lines(ex)))}</pre>")
        b.append(html_teach(c))
    return b


def html_how(evidence: dict, weights: dict, scored: list) -> list:
    """'How the score was made': weights, shares earned, points, the verdict rule."""
    e = html.escape
    b = ["<h2 id='how'>How the score was made</h2><table><tr><th>Check</th><th>Verdict</th>"
         "<th>Weight</th><th>Earned</th><th>Points</th><th>How it is counted</th></tr>"]
    for title, word, weight, share, pts, rule in how_rows(evidence, weights):
        b.append(f"<tr><td>{e(N.visible(title))}</td><td class='{word.lower()}'>{word}</td>"
                 f"<td class='num'>{weight}</td><td class='num'>{share}</td>"
                 f"<td class='num'>{pts}</td><td>{rich_html(rule)}</td>"
                 "</tr>")
    b.append("</table>")
    b += [f"<p>{e(score_sums(evidence, weights, scored))}</p>",
          f"<p>Verdict: {e(verdict_reason(evidence))}. The rule: {e(VERDICT_RULE)}</p>",
          f"<p>Weights: <code>{e(N.visible(weights_file(evidence, weights)))}</code> (points "
          "per check; a course edits it or passes its own with <code>--weights FILE</code>)."
          "</p>"]
    return b


def html_tables(evidence: dict, ref: dict | None) -> list:
    e = html.escape
    sub_t, ref_t, sizes, servers = _table_data(evidence, ref)
    if not sub_t:
        return []
    b = []
    for num, (key, what) in enumerate(TABLES, 1):
        b.append(f"<h2>Table {num}: {what} memory access latency (s)</h2>"
                 "<table><tr><th>Server</th>"
                 + "".join(f"<th>n={n}</th><th>reference n={n}</th>" for n in sizes) + "</tr>")
        for r in table_rows(sub_t, ref_t, key, sizes, servers):
            b.append("<tr>" + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>")
        b.append("</table>")
    b.append("<h2>Ranking (fastest first)</h2><ul>")
    for n in sizes:
        b.append(f"<li>n={n}: submission {e(ranking(sub_t, n, servers))}; reference "
                 f"{e(ranking(ref_t, n))}</li>")
    b.append("</ul><h2>Figures</h2>")
    return b + [svg_bars(sub_t, ref_t, n, servers) for n in sizes]


PAGE_STYLE = ("body{font-family:sans-serif;margin:1.5em;max-width:60em}"
              "table{border-collapse:collapse;margin:.5em 0}"
              "td,th{border:1px solid #999;padding:.2em .5em}"
              ".pass{color:#070}.fail{color:#b00}.skip{color:#777}.undetermined{color:#777}"
              "pre{background:#f4f4f4;padding:.5em;white-space:pre-wrap}"
              ".fix{background:#fff6d6;border-left:4px solid #b06000;padding:.1em .8em;"
              "margin:.5em 0}code{background:#f4f4f4;padding:0 .2em}.num{white-space:nowrap}")


def html_page(name: str, evidence: dict, ref: dict | None, weights: dict) -> str:
    """verdict.html, one self-contained page: the verdict banner, what to fix, each check's
    evidence, how the score was made, the tables and figures."""
    e = html.escape
    scored = score(evidence, weights)
    word, failed = verdict(evidence)
    got, mx = totals(scored)
    colour = {"PASS": PASS_COLOUR, "FAIL": FAIL_COLOUR}.get(word, FINDINGS_COLOUR)
    b = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
         f"<title>Lab 2 grade: {e(N.visible(name))}</title><style>", PAGE_STYLE,
         f"#verdict{{background:{colour};color:#fff;font-size:2em;padding:.4em .8em}}",
         "</style></head><body>",
         f"<h1>Lab 2 grade: {e(N.visible(name))}</h1>",
         f"<div id='verdict'>{word} — {got:g} / {mx:g}</div>"]
    if failed:
        b.append(f"<p>Failed: {e(', '.join(map(N.visible, failed)))}</p>")
    b.append(f"<p>{e(settings_text(evidence))}; grading took "
             f"{_num(evidence.get('seconds', 0), '.0f')} s.</p>"
             f"<p>Grader: {e(N.visible(grader_text(evidence, weights)))}. "
             "<a href='#how'>How the score was made</a>.</p>"
             f"<p>Sandbox: {e(N.visible(sandbox_text(evidence)))}</p>")
    if lab_text(evidence):
        b.append(f"<p>Lab: {e(N.visible(lab_text(evidence)))}</p>")
    if evidence.get("error"):
        b.append(f"<p class='fail'>Grading error: {e(N.visible(evidence['error']))}</p>")
    b += html_fix_summary(scored) + html_checks(scored) + html_how(evidence, weights, scored)
    b += html_tables(evidence, ref)
    b.append("</body></html>")
    return "\n".join(b)


def _gs_test_output(c: dict) -> str:
    """One Gradescope test's output: its verdict and points, the evidence, a status note
    (skipped, undetermined) and what to fix, each line through names.visible."""
    if c["status"] == "undetermined":
        head = f"{status_word(c)}: not scored (0 of 0 points): {_not_scored_why(c)}"
    else:
        head = (f"{status_word(c)}: {c['points']:g} of {c['max_points']:g} points; "
                f"counted: {score_rule(c)}")
    lines = [head, "",
             *map(N.visible, c["evidence"]),
             *(x for ex in c.get("counterexamples", []) for x in ["", "Counterexample:",
                                                                  *_lines(ex)])]
    if status_note(c):
        lines += ["", status_note(c)]
    items = fixes(c)
    if items:
        lines += ["", "What to fix:", *(f"- {N.visible(x)}" for x in items)]
    return "\n".join(lines)


def gradescope_output(evidence: dict, weights: dict, scored: list) -> str:
    """The submission's output on Gradescope: verdict, score, what to fix, how the score
    was made, the settings and the grader."""
    word, _ = verdict(evidence)
    got, mx = totals(scored)
    out = [f"Verdict: {word}; score {got:g} / {mx:g}",
           f"Why: {verdict_reason(evidence)}."]
    if evidence.get("error"):
        out.append(f"Grading error: {N.visible(evidence['error'])}")
    todo = [(c, fixes(c)) for c in scored if c["status"] != "pass"]
    todo = [(c, f) for c, f in todo if f]
    if todo:
        out += ["", "What to fix:"]
        out += [f"- {N.visible(c['title'])} ({_word_scored(c)}): {N.visible(x)}"
                for c, items in todo for x in items]
    out += ["", "How the score was made (check: verdict, weight x share earned = points; "
                "how it is counted):"]
    out += [f"- {N.visible(t)}: {w}, weight {wt}, {rule}" if sh == "not scored"
            else f"- {N.visible(t)}: {w}, {wt} x {sh} = {pts}; {rule}"
            for t, w, wt, sh, pts, rule in how_rows(evidence, weights)]
    out += [score_sums(evidence, weights, scored), f"Verdict rule: {VERDICT_RULE}", "",
            f"Settings: {settings_text(evidence)}; grading took "
            f"{_num(evidence.get('seconds', 0), '.0f')} s.",
            f"Sandbox: {sandbox_text(evidence)}.",
            *([f"Lab: {N.visible(lab_text(evidence))}."] if lab_text(evidence) else []),
            f"Grader: {N.visible(grader_text(evidence, weights))}."]
    return "\n".join(out)


def gradescope(evidence: dict, weights: dict) -> dict:
    """results.json in Gradescope's format: one test per check, status 'passed' or 'failed'
    only (an undetermined check, not scored, counts as passed: 0 of 0 points, as Gradescope
    would infer; its output says it was not scored and why)."""
    scored = score(evidence, weights)
    got, mx = totals(scored)
    seen = weights.get("visibility", {})
    out = {"score": got, "max_score": mx, "visibility": seen.get("results", "visible"),
           "output": gradescope_output(evidence, weights, scored),
           "tests": [{"name": N.visible(c["title"]), "number": str(i + 1),
                      "score": c["points"], "max_score": c["max_points"],
                      "status": "passed" if c["status"] in ("pass", "undetermined")
                      else "failed",
                      "visibility": seen.get(c["id"], "visible"),
                      "output": _gs_test_output(c)}
                     for i, c in enumerate(scored)]}
    secs = evidence.get("seconds")
    if isinstance(secs, (int, float)) and not isinstance(secs, bool) and math.isfinite(secs):
        out["execution_time"] = max(0, round(secs))
    speed = leaderboard_speed(evidence)
    if speed is not None:
        out["leaderboard"] = [{"name": LEADERBOARD, "value": speed, "order": "desc"}]
    return out


LEADERBOARD = "Speed (x the grader's rwlock per string)"


def leaderboard_speed(evidence: dict) -> float | None:
    """The concurrency check's speed against the grader's own rwlock per string (kitref4)
    (the median of its burst over the submission's, round by round, in turns): what the
    leaderboard ranks, in two decimals as the leaderboard and the class page show it; None
    when it was not measured."""
    for c in evidence.get("checks") or ():
        board = c.get("leaderboard") if isinstance(c, dict) else None
        if isinstance(board, dict) and c.get("id") == "concurrency" and \
                _is_number(board.get("speed")):
            return round(float(board["speed"]), 2)
    return None


def write_pages(out: Path, name: str, evidence: dict, ref: dict | None, weights: dict) -> None:
    (out / "verdict.md").write_text(markdown(name, evidence, ref, weights))
    (out / "verdict.html").write_text(html_page(name, evidence, ref, weights))
    (out / "results.json").write_text(json.dumps(gradescope(evidence, weights), indent=1))


# ---- the class: summary.csv, index.html, console lines ----------------------------------

# summary.csv's first columns, in this order (spreadsheets and scripts read them by place);
# each check's points and maximum follow (check_fields()).
SUMMARY_FIELDS = ("submission", "source", "verdict", "score", "max_score", "failed", "seconds",
                  "similarity")


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


def summary_row(name: str, source, evidence: dict, weights: dict) -> dict:
    """One submission's row of the class summary: `name` its output folder (an
    names.assign() name), `source` the folder it was graded from; SUMMARY_FIELDS, with
    'similarity' empty (write_class() fills it from the similarity check's flags), then
    'checks', each check's points and maximum (check_points()), and 'speed', the
    leaderboard's number (leaderboard_speed(); None when not measured)."""
    scored = score(evidence, weights)
    got, mx = totals(scored)
    word, failed = verdict(evidence)
    secs = evidence.get("seconds", 0)
    return {"submission": name, "source": str(source), "verdict": word, "score": got,
            "max_score": mx, "failed": " ".join(map(str, failed)),
            "seconds": round(secs, 1) if _is_number(secs) else 0.0, "similarity": "",
            "checks": check_points(scored), "speed": leaderboard_speed(evidence)}


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
        out += [v if _is_number(v) else "" for v in (c.get("points"), c.get("max_points"))]
    return out


def write_summary_csv(path: Path, rows: list[dict]) -> None:
    """summary.csv: SUMMARY_FIELDS, then 'ID points' and 'ID max' per check, then 'speed'
    (the leaderboard's number) when any row has one; every cell
    through names.csv_cell(), every text cell quoted (a spreadsheet that splits on ';' or
    tabs still keeps a cell whole)."""
    ids = check_fields(rows)
    speed = any(_is_number(r.get("speed")) for r in rows)  # a leaderboard: its last column
    header = [*SUMMARY_FIELDS, *(f"{N.visible(i)} {w}" for i in ids for w in ("points", "max")),
              *(["speed"] if speed else [])]
    with open(path, "w", newline="") as f:
        csv.writer(f).writerow([N.csv_cell(h) for h in header])
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        for r in rows:
            w.writerow([N.csv_cell(r.get(k, "")) for k in SUMMARY_FIELDS]
                       + _check_cells(r, ids)
                       + ([r["speed"] if _is_number(r.get("speed")) else ""] if speed else []))


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def settings_words(settings) -> str:
    """A class's settings (cli's dict of runs, sizes, quick, race) in words; any other
    dict as key=value pairs, any other value as text (escape it)."""
    if not isinstance(settings, dict):
        return str(settings) if settings else ""
    runs, sizes = settings.get("runs"), settings.get("sizes")
    if (isinstance(runs, int) and not isinstance(runs, bool) and isinstance(sizes, list)
            and all(map(_is_number, sizes))):
        text = settings_text({"config": settings})
        if "race" in settings:
            text += "; race detector " + ("on" if settings["race"] else "off")
        if "memory" in settings:
            text += "; memory check " + ("on" if settings["memory"] else "off")
        return text
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def class_max(rows: list) -> list:
    """The distinct maximum scores of the rows, sorted (one for a class graded alike)."""
    return sorted({float(r.get("max_score")) for r in rows if _is_number(r.get("max_score"))})


def console_line(row: dict) -> str:
    """'NAME: VERDICT score/max (failed: ids)' for the terminal: one line whatever the
    row's text holds (names.console())."""
    failed = row.get("failed") or ""
    return (f"{N.console(row.get('submission', ''))}: {N.console(row.get('verdict', ''))} "
            f"{_num(row.get('score'))}/{_num(row.get('max_score'))}"
            + (f" (failed: {N.console(failed)})" if failed else ""))
