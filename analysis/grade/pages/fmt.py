"""The formatting every verdict page and the class dashboard share: numbers, the verdict
words, the settings, lab, sandbox and grader lines, the tables' cells and rankings, the
status notes, grader prose with code spans, and the leaderboard's number.

The texts may carry a student's (titles, ids, fixes that quote them): each page escapes them
for its own markup (names.md_*, html.escape), as the docstrings say."""

import html
import math
import re

from analysis.grade import labs
from analysis.grade import records as C
from analysis.grade import score as S
from analysis.grade.trust import names as N


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


def num(v, spec: str = "g") -> str:
    """A number of the evidence as text; '?' for anything else."""
    return format(v, spec) if isinstance(v, (int, float)) and not isinstance(v, bool) else "?"


def settings_text(evidence: dict) -> str:
    """'R kit runs per server and n = 10, 1000 (quick)', from numbers only."""
    cfg = evidence.get("config", {})
    budget, cpus = cfg.get("budget_s"), cfg.get("cpus")
    skip = cfg.get("skip")
    left = [c for c in C.SKIPPABLE if isinstance(skip, list) and c in skip]
    return (f"{num(cfg.get('runs'))} kit runs per server and n = "
            f"{', '.join(map(str, sizes_of(evidence)))}" + (" (quick)" if cfg.get("quick") else "")
            + (f"; time budget {num(budget, '.0f')} s" if is_number(budget) else "")
            + (f"; {num(cpus)} CPU" if is_number(cpus) else "")
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


def anchor(cid) -> str:
    """A check id as an HTML id and fragment: the id's safe characters only."""
    return "check-" + re.sub(r"[^A-Za-z0-9_-]", "_", str(cid))


def lines(text) -> list:
    """The lines of a multi-line text (a counterexample), each as names.visible()."""
    return [N.visible(line) for line in str(text).split("\n")]


# ---- teaching: status notes, what to fix, grader prose ---------------------------------

# Said of a check that neither passed nor failed, before what to fix.
STATUS_NOTE = {
    "skip": "Skipped: this check could not be run on this submission, so it earns none of "
            "its points (the evidence says why).",
    "undetermined": "Undetermined: the grader could not tell (e.g. a measurement too close "
                    "to call on a noisy machine), so this check is not scored: neither its "
                    "points nor its maximum count, and no point is lost. Look at it anyway:",
}


def word_scored(c: dict) -> str:
    """The check's verdict word, with ', not scored' when undetermined."""
    return S.status_word(c) + (", not scored" if c["status"] == "undetermined" else "")


# Said of a check the grader did not run (its time budget, or the command's --skip).
NOT_RUN_NOTE = ("Not run: the grader left this check out (the evidence says why), so it is not "
                "scored: neither its points nor its maximum count, and no point is lost.")


def status_note(check: dict) -> str:
    """STATUS_NOTE's sentence for a skipped or undetermined check, else ''."""
    if check.get("not_run") is True and check.get("status") == "undetermined":
        return NOT_RUN_NOTE
    status = check.get("status")
    return STATUS_NOTE.get(status, "") if isinstance(status, str) else ""


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


LEADERBOARD = "Speed (x the grader's rwlock per string)"


def _board(evidence: dict) -> dict:
    """The concurrency check's leaderboard record with a speed that is a number, or {}."""
    for c in evidence.get("checks") or ():
        board = c.get("leaderboard") if isinstance(c, dict) else None
        if isinstance(board, dict) and c.get("id") == "concurrency" and \
                is_number(board.get("speed")):
            return board
    return {}


def leaderboard_speed(evidence: dict) -> float | None:
    """The concurrency check's speed against the grader's own rwlock per string (kitref4)
    (the median of its burst over the submission's, round by round, in turns): what the
    leaderboard ranks, in two decimals as the leaderboard and the class page show it; None
    when it was not measured or is withheld (leaderboard_withheld)."""
    board = _board(evidence)
    if not board or board.get("withheld"):
        return None
    return round(float(board["speed"]), 2)


def leaderboard_withheld(evidence: dict) -> str:
    """Why a measured speed is not on the leaderboard ('design FAIL, timing FAIL': the
    checks it rests on that did not pass; concurrency.post_or_withhold), or ''."""
    why = _board(evidence).get("withheld")
    return str(why) if why else ""


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def settings_words(settings) -> str:
    """A class's settings (cli's dict of runs, sizes, quick, race) in words; any other
    dict as key=value pairs, any other value as text (escape it)."""
    if not isinstance(settings, dict):
        return str(settings) if settings else ""
    runs, sizes = settings.get("runs"), settings.get("sizes")
    if (isinstance(runs, int) and not isinstance(runs, bool) and isinstance(sizes, list)
            and all(map(is_number, sizes))):
        text = settings_text({"config": settings})
        if "race" in settings:
            text += "; race detector " + ("on" if settings["race"] else "off")
        if "memory" in settings:
            text += "; memory check " + ("on" if settings["memory"] else "off")
        return text
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def class_max(rows: list) -> list:
    """The distinct maximum scores of the rows, sorted (one for a class graded alike)."""
    return sorted({float(r.get("max_score")) for r in rows if is_number(r.get("max_score"))})
