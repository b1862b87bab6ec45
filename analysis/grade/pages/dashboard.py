"""The class dashboard: index.html and gradescope_scores.csv, from the rows of
render.summary_row().

index.html is one self-contained page for the TA: the grader's settings, a histogram of the
scores and each check's pass rate (inline SVG drawn here, in Python), and the table of the
submissions, which a small inline script makes sortable (click a column's header) and
filterable (by name, by verdict). The script reads and writes the page's URL fragment
(index.html#sort=score&dir=desc&verdict=FAIL&q=ali), so that a view can be shared and
opened as it was. Without JavaScript the table still shows every row. Nothing external:
no asset, no CDN, no request; the only links are relative ones to files beside the page.

Every name, source, title and flag in a row may come from a hostile submission: it is shown
through names.visible() and html.escape(), never as markup, and never as an attribute name;
a link to a submission is made only for a names.assign()-style name."""

import csv
import html
import re
from pathlib import PurePath

from analysis.grade import labs
from analysis.grade import score as S
from analysis.grade.pages import fmt as F
from analysis.grade.pages import render as R
from analysis.grade.trust import names as N

GRADESCOPE_CSV = "gradescope_scores.csv"
# The columns of Gradescope's own score sheets (its "Download Grades" export: Name or First
# Name and Last Name, SID, Email, Total Score, Max Points, Status, ...). Its course roster
# (a CSV with a header row; Name and Email required, Email unique per member, SID optional)
# is what a row is matched against: by Email or SID, as a Name need not be unique. The
# grader knows neither: Name carries the submission's folder name, and the TA fills in SID
# or Email unless the folder name is one (see gradescope_row()).
GRADESCOPE_FIELDS = ("Name", "SID", "Email", "Total Score", "Max Points", "Status")
VERDICTS = ("PASS", "PASS WITH FINDINGS", "FAIL", labs.NOT_GRADABLE)
STATUS_CLASSES = {"pass", "fail", "skip", "undetermined"}
BINS = 10  # the histogram's bins: tenths of the maximum score
_EMAIL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_PAGE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\.html")


def _e(text) -> str:
    """Any text of a row, as safe HTML (also inside a quoted attribute)."""
    return html.escape(N.visible(text))


# ---- the rows: checks, percentages, pass rates ----------------------------------------


def row_checks(row: dict) -> dict:
    """The row's {check id: {'title', 'status', 'points', 'max_points'}}, only the entries
    that are dicts; {} for a row without checks (a grading error, an older row)."""
    checks = row.get("checks")
    if not isinstance(checks, dict):
        return {}
    return {str(k): v for k, v in checks.items() if isinstance(v, dict)}


def check_columns(rows: list) -> list:
    """[(check id, title, sort key)] of every check of the rows, in the order first seen;
    the key ('check-ID' in the safe alphabet, made unique) names the column in the URL."""
    cols, keys = {}, set()
    for r in rows:
        for cid, c in row_checks(r).items():
            if cid in cols:
                continue
            key = "check-" + re.sub(r"[^A-Za-z0-9_-]", "_", cid)
            while key in keys:
                key += "_"
            keys.add(key)
            cols[cid] = (cid, str(c.get("title") or cid), key)
    return list(cols.values())


def percent(row: dict):
    """The row's score as a percentage of its maximum (0..100), None without a maximum."""
    got, mx = row.get("score"), row.get("max_score")
    if not (F.is_number(got) and F.is_number(mx)) or mx <= 0:
        return None
    return min(100.0, max(0.0, round(100.0 * got / mx, 6)))


def histogram(rows: list) -> tuple:
    """([count per bin], rows left out): bin i holds the scores from 10*i % up to, not
    including, 10*(i+1) %, the last one 100 % too; a row without a maximum is left out."""
    counts, left_out = [0] * BINS, 0
    for r in rows:
        p = percent(r)
        if p is None:
            left_out += 1
        else:
            counts[min(BINS - 1, int(p // (100 / BINS)))] += 1
    return counts, left_out


def pass_rates(rows: list) -> list:
    """Per check, (id, title, passed, graded, undetermined): graded counts the submissions
    whose check passed, failed or was skipped; an undetermined one (the grader could not
    tell, not scored) is not graded, and a submission without the check is not counted."""
    out = []
    for cid, title, _ in check_columns(rows):
        statuses = [row_checks(r)[cid].get("status") for r in rows if cid in row_checks(r)]
        undetermined = statuses.count("undetermined")
        graded = len(statuses) - undetermined
        out.append((cid, title, statuses.count("pass"), graded, undetermined))
    return out


# ---- figures: inline SVG --------------------------------------------------------------

_HW, _HH, _LEFT, _BOTTOM, _TOP = 560, 250, 52, 48, 22


def _bin_text(i: int) -> tuple:
    """('30–40', 'from 30 % up to, not including, 40 %') for bin i."""
    lo, hi = i * 100 // BINS, (i + 1) * 100 // BINS
    upto = "to 100 % included" if i == BINS - 1 else f"up to, not including, {hi} %"
    return f"{lo}–{hi}", f"from {lo} % {upto}"


def _histogram_bars(counts: list) -> list:
    """One <g class='bin'> per bin: its bar, its count above it and its range below."""
    top, plot_h = max(counts) or 1, _HH - _TOP - _BOTTOM
    step = (_HW - _LEFT - 12) / BINS
    out = []
    for i, n in enumerate(counts):
        label, words = _bin_text(i)
        h, x = plot_h * n / top, _LEFT + i * step
        y, mid = _HH - _BOTTOM - h, _LEFT + (i + 0.5) * step
        out.append(f"<g class='bin' data-bin='{label}' data-count='{n}'>"
                   f"<title>{words}: {n} submission{'s' * (n != 1)}</title>"
                   f"<rect class='bar' x='{x + 2:.1f}' y='{y:.1f}' width='{step - 4:.1f}' "
                   f"height='{h:.1f}'/>"
                   f"<text class='count' x='{mid:.1f}' y='{y - 4:.1f}'>{n}</text>"
                   f"<text class='bin-label' x='{mid:.1f}' y='{_HH - _BOTTOM + 15}'>{label}"
                   "</text></g>")
    return out


def _histogram_axes(top: int) -> list:
    """The axes, the count ticks (whole numbers, at most six, the largest count among them)
    and the axis titles."""
    base, plot_h = _HH - _BOTTOM, _HH - _TOP - _BOTTOM
    out = [f"<line class='axis' x1='{_LEFT}' y1='{base}' x2='{_HW - 8}' y2='{base}'/>",
           f"<line class='axis' x1='{_LEFT}' y1='{_TOP}' x2='{_LEFT}' y2='{base}'/>"]
    for t in sorted({*range(0, top, -(-top // 5) or 1), top}):
        y = base - plot_h * t / (top or 1)
        out.append(f"<text class='tick' x='{_LEFT - 6}' y='{y + 4:.1f}'>{t}</text>")
    out += [f"<text class='axis-title' x='{(_LEFT + _HW) / 2:.0f}' y='{_HH - 8}'>"
            "Score (% of the maximum)</text>",
            f"<text class='axis-title' transform='translate(14 {(_TOP + base) / 2:.0f}) "
            "rotate(-90)'>Submissions</text>"]
    return out


def svg_histogram(rows: list) -> str:
    """The histogram of the scores' percentages, with a sentence for rows left out."""
    counts, left_out = histogram(rows)
    svg = (f"<svg id='histogram' width='{_HW}' height='{_HH}' viewBox='0 0 {_HW} {_HH}' "
           "role='img' aria-label='Histogram of the scores'>"
           + "".join(_histogram_axes(max(counts)) + _histogram_bars(counts)) + "</svg>")
    note = (f"<p class='note'>{left_out} submission{'s' * (left_out != 1)} without a maximum "
            "score (nothing was scored) left out.</p>" if left_out else "")
    return svg + note


def _rate_bar(passed: int, graded: int) -> str:
    """A 120-pixel bar, filled in the share passed."""
    w = 120 * passed / graded if graded else 0
    return ("<svg class='rate' width='120' height='12' viewBox='0 0 120 12' aria-hidden='true'>"
            "<rect width='120' height='12' class='rate-bg'/>"
            f"<rect class='rate-fill' width='{w:.1f}' height='12'/></svg>")


def html_pass_rates(rows: list) -> str:
    """Each check's pass rate: title, passed / graded, %, a bar, undetermined."""
    rates = pass_rates(rows)
    if not rates:
        return "<p>No check results.</p>"
    b = ["<table id='pass-rates'><thead><tr><th>Check</th><th>Passed / graded</th>"
         "<th>Pass rate</th><th></th><th>Undetermined</th></tr></thead><tbody>"]
    for cid, title, passed, graded, undet in rates:
        rate = f"{100 * passed / graded:.0f} %" if graded else "—"
        b.append(f"<tr data-check='{_e(cid)}'><td>{_e(title)}</td>"
                 f"<td class='num'>{passed} / {graded}</td><td class='num'>{rate}</td>"
                 f"<td>{_rate_bar(passed, graded)}</td><td class='num'>{undet}</td></tr>")
    b.append("</tbody></table><p>Passed / graded: the submissions whose check passed, of "
             "those where it passed, failed or was skipped. An undetermined check (the grader "
             "could not tell, e.g. a measurement too close to call; not scored) counts as not "
             "graded, and a submission without the check (a grading error) is not counted. A "
             "check with partial credit passes only with all of its points.</p>")
    return "".join(b)


# ---- the table ------------------------------------------------------------------------


def _check_max(rows: list, cid: str):
    """The check's one maximum over the rows that scored it (for its header), else None."""
    maxes = {c.get("max_points") for r in rows for k, c in row_checks(r).items()
             if k == cid and c.get("status") != "undetermined"
             and F.is_number(c.get("max_points"))}
    return maxes.pop() if len(maxes) == 1 else None


def _th(key: str, kind: str, label: str, tip: str = "") -> str:
    """A sortable column header: the key names it in the URL, kind is 'num' or 'text'."""
    title = f" title='{_e(tip)}'" if tip else ""
    return (f"<th data-key='{key}' data-type='{kind}' aria-sort='none'{title}>"
            f"<button type='button'>{label}</button></th>")


def _table_head(rows: list, columns: list, speeds: bool = False) -> str:
    """The header row: the fixed columns, a column per check (its title and its maximum
    when one for all), the leaderboard's speed when the class has one (speeds), the time
    and the similarity flag; every one sortable."""
    cells = [_th("name", "text", "Submission"), _th("source", "text", "Source"),
             _th("verdict", "text", "Verdict"), _th("score", "num", "Score / max"),
             _th("pct", "num", "%", "score as a percentage of the maximum")]
    for cid, title, key in columns:
        mx = _check_max(rows, cid)
        cells.append(_th(key, "num", _e(title) + (f" <small>/ {mx:g}</small>" if mx else ""),
                         f"{title}: points earned"))
    if speeds:
        cells.append(_th("speed", "num", "Speed", f"the leaderboard: {F.LEADERBOARD}, "
                         "measured by the grader in turns with its own server"))
    cells += [_th("time", "num", "Time (s)", "how long grading took"),
              _th("similarity", "text", "Similarity", "flagged as similar to another")]
    return "<thead><tr>" + "".join(cells) + "</tr></thead>"


def _check_cell(c) -> str:
    """A check's points, coloured by its status, its verdict in the tooltip; '—' when it
    was not scored (undetermined), empty when the submission has no such check."""
    if c is None:
        return "<td class='num'></td>"
    status = c.get("status")
    status = status if isinstance(status, str) and status in STATUS_CLASSES else "unknown"
    word = S.STATUS_WORDS.get(status, "UNKNOWN")
    pts, mx = c.get("points"), c.get("max_points")
    if status == "undetermined" or not F.is_number(pts):
        return f"<td class='num {status}' title='{word}, not scored'>—</td>"
    tip = f"{word}: {pts:g} of {F.num(mx)} points"
    return f"<td class='num {status}' title='{tip}'>{pts:g}</td>"


def _name_cell(name: str) -> str:
    """The submission's name linking to its verdict page; a name that is not an assign()
    name is shown without a link rather than linked unsafely."""
    shown = _e(name)
    return (f"<td><a href='{html.escape(N.html_href(name))}'>{shown}</a></td>"
            if N.is_safe(name) else f"<td>{shown}</td>")


def _row(r: dict, order: int, columns: list, speeds: bool = False) -> str:
    """One submission's row. data-order keeps the page's order for ties when sorting, and
    data-verdict (one of VERDICTS or empty) is what the verdict filter compares; speeds:
    the class has a leaderboard column."""
    word = str(r.get("verdict", ""))
    known = word if word in VERDICTS else ""
    failed = str(r.get("failed") or "")
    tip = f" title='failed: {_e(failed)}'" if failed else ""
    pct = percent(r)
    flag = str(r.get("similarity") or "")
    checks = row_checks(r)
    cells = [_name_cell(str(r.get("submission", ""))), f"<td>{_e(r.get('source', ''))}</td>",
             f"<td class='{known.replace(' ', '-')}'{tip}>{_e(word)}</td>",
             f"<td>{F.num(r.get('score'))} / {F.num(r.get('max_score'))}</td>",
             "<td class='num'>—</td>" if pct is None
             else f"<td class='num' data-v='{pct:g}'>{pct:.0f}</td>"]
    cells += [_check_cell(checks.get(cid)) for cid, _, _ in columns]
    if speeds:
        v, held = r.get("speed"), str(r.get("withheld") or "")
        cells.append(f"<td class='num' data-v='{v:g}'>{v:.2f}</td>" if F.is_number(v) else
                     f"<td class='num withheld' title='the speed is not ranked: the checks it "
                     f"rests on did not all pass'>withheld: {_e(held)}</td>" if held else
                     "<td class='num'>—</td>")
    cells += [f"<td class='num'>{F.num(r.get('seconds'))}</td>",
              f"<td class='{'flag' if flag else ''}'>{_e(flag)}</td>"]
    return f"<tr data-order='{order}' data-verdict='{known}'>" + "".join(cells) + "</tr>"


def html_table(rows: list) -> str:
    """The filter controls (hidden until the script shows them) and the submissions' table."""
    columns = check_columns(rows)
    speeds = any(F.is_number(r.get("speed")) or r.get("withheld") for r in rows)
    options = "".join(f"<option value='{v}'>{v}</option>" for v in VERDICTS)
    return ("<form id='filters' hidden>"
            "<label>Name <input type='search' id='q' placeholder='part of a name'></label> "
            f"<label>Verdict <select id='verdict'><option value=''>all</option>{options}"
            "</select></label> <span id='shown'></span></form>"
            f"<div class='wide'><table id='class'>{_table_head(rows, columns, speeds)}<tbody>"
            + "".join(_row(r, i, columns, speeds) for i, r in enumerate(rows))
            + "</tbody></table></div>")


# ---- the page -------------------------------------------------------------------------


def meta_html(meta: dict | None) -> str:
    """'Graded DATE; settings: ...; grader: lockbench VERSION; weights: FILE' from meta's
    'date', 'settings' (text or a dict) and 'grader' ({'version', 'date', 'weights'}) or
    'version' and 'weights'."""
    meta = meta or {}
    grader = meta.get("grader") if isinstance(meta.get("grader"), dict) else {}
    date = meta.get("date") or grader.get("date")
    version = meta.get("version") or grader.get("version")
    weights = meta.get("weights") or grader.get("weights")
    settings = F.settings_words(meta.get("settings"))
    parts = [text for text, there in ((f"Graded {date}", date),
                                      (f"settings: {settings}", settings),
                                      (f"grader: lockbench {version}", version),
                                      (f"weights: {weights}", weights)) if there]
    return f"<p>{_e('; '.join(parts))}</p>" if parts else ""


def max_html(rows: list) -> str:
    """The one maximum score of the class, or a note on why the rows' maxima differ."""
    maxes = F.class_max(rows)
    if len(maxes) == 1:
        return f"<p>Maximum score: {maxes[0]:g}, the same for every submission.</p>"
    if not maxes:
        return ""
    return ("<p class='note'>Note: the maximum score is not the same for every submission ("
            + ", ".join(f"{m:g}" for m in maxes) + "): a check the grader could not decide "
            "(undetermined) is not scored, and leaves its points out of that submission's "
            "maximum. Each row shows its own maximum.</p>")


def gradescope_html(wrote: bool) -> str:
    """What gradescope_scores.csv holds and what the TA does before uploading it."""
    if not wrote:
        return ("<p class='note'>gradescope_scores.csv was not written: a submission's "
                "folder in this output folder has that name.</p>")
    return (f"<p><a href='{GRADESCOPE_CSV}'>{GRADESCOPE_CSV}</a>: the scores in the columns "
            "of Gradescope's score sheets, " + ", ".join(GRADESCOPE_FIELDS) + ". Gradescope "
            "matches a row to a student of the course roster by Email (or SID), not by Name. "
            "The grader knows neither: Name is the submission's folder name, Email is filled "
            "in when that name is an email address and SID when it is all digits; otherwise "
            "fill in SID or Email before uploading. A cell that a spreadsheet would take for "
            "a formula starts with a '. Every column of the grader: "
            "<a href='summary.csv'>summary.csv</a>.</p>")


PAGE_STYLE = ("body{font-family:sans-serif;margin:1.5em}"
              "table{border-collapse:collapse;margin:.5em 0}"
              "td,th{border:1px solid #999;padding:.2em .5em}td.num{text-align:right}"
              "th button{font:inherit;font-weight:bold;background:none;border:0;padding:0;"
              "cursor:pointer}th[aria-sort=ascending] button::after{content:' \\25B2'}"
              "th[aria-sort=descending] button::after{content:' \\25BC'}"
              ".PASS,.pass{color:#070}.FAIL,.fail{color:#b00}.PASS-WITH-FINDINGS{color:#b06000}"
              ".skip,.undetermined,.unknown{color:#777}.flag{background:#fff0d0}"
              ".note{background:#fff6d6;padding:.3em .6em}#filters{margin:.5em 0}"
              ".wide{overflow-x:auto}"
              ".bar{fill:#4a78b0}.count,.bin-label{font-size:11px;text-anchor:middle}"
              ".tick{font-size:11px;text-anchor:end}.axis{stroke:#333}"
              ".axis-title{font-size:12px;text-anchor:middle}"
              ".rate-bg{fill:#e4e4e4}.rate-fill{fill:#2e8b57}")


def page(rows: list, meta: dict | None = None, similarity_page: str | None = None,
         gradescope: bool = True) -> str:
    """index.html: the meta line, the maximum score, the links, the histogram, the pass
    rates, the table and the verdict rule; the script last, so the table is there first."""
    sim = ""
    if similarity_page:
        if not _PAGE_NAME.fullmatch(similarity_page):
            raise ValueError(f"not a page beside index.html: {similarity_page!r}")
        sim = (f"<p>Similar submissions: <a href='{similarity_page}'>the similarity "
               "report</a>; the Similarity column shows each submission's flag.</p>")
    body = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>Lab 2 grades</title>"
            f"<style>{PAGE_STYLE}</style></head><body><h1>Lab 2 grades</h1>",
            meta_html(meta), max_html(rows), gradescope_html(gradescope), sim,
            "<h2 id='scores'>Scores</h2>", svg_histogram(rows),
            "<h2 id='checks'>Checks passed</h2>", html_pass_rates(rows),
            f"<h2 id='submissions'>Submissions ({len(rows)})</h2>",
            "<p>Click a column's header to sort by it (again to reverse). The page's address "
            "keeps the view (e.g. <code>index.html#sort=score&amp;dir=desc&amp;verdict=FAIL"
            "&amp;q=ali</code>) to share it.</p>", html_table(rows),
            f"<p>Verdicts: {html.escape(S.VERDICT_RULE)} Each submission's page says what to "
            "fix and how its score was made.</p>",
            f"<script>{SCRIPT}</script></body></html>"]
    return "\n".join(b for b in body if b)


# Sorts and filters the table in place, and keeps the view in the URL's fragment. A number
# column sorts by its cells' data-v when they have one (the exact value of a rounded
# figure), else by their text; cells without a value go last either way. Reads cells' text
# and attributes only, never writes markup.
SCRIPT = r"""
(function () {
  "use strict";
  var table = document.getElementById("class"), body = table.tBodies[0];
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var q = document.getElementById("q"), pick = document.getElementById("verdict");
  var state = {sort: "", dir: "asc"};
  function column(key) {
    for (var i = 0; i < heads.length; i++) { if (heads[i].dataset.key === key) return i; }
    return -1;
  }
  function value(row, i, num) {
    var c = row.cells[i], t = c ? c.textContent.trim() : "";
    if (num) { var v = parseFloat(c && c.dataset.v || t); return isNaN(v) ? null : v; }
    return t === "" || t === "\u2014" ? null : t.toLowerCase();
  }
  function sortRows() {
    var i = column(state.sort);
    heads.forEach(function (h) { h.setAttribute("aria-sort", "none"); });
    if (i < 0) return;
    var num = heads[i].dataset.type === "num", sign = state.dir === "desc" ? -1 : 1;
    heads[i].setAttribute("aria-sort", sign < 0 ? "descending" : "ascending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a, i, num), y = value(b, i, num), d = 0;
      if (x === null || y === null) d = (x === null) - (y === null);
      else d = sign * (num ? x - y : (x < y ? -1 : x > y ? 1 : 0));
      return d || a.dataset.order - b.dataset.order;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function filterRows() {
    var text = q.value.trim().toLowerCase(), want = pick.value, n = 0;
    Array.prototype.forEach.call(body.rows, function (r) {
      var name = (r.cells[0].textContent + " " + r.cells[1].textContent).toLowerCase();
      var ok = (!text || name.indexOf(text) >= 0) && (!want || r.dataset.verdict === want);
      r.hidden = !ok;
      if (ok) n++;
    });
    document.getElementById("shown").textContent = n + " of " + body.rows.length + " shown";
  }
  function readHash() {
    var p = new URLSearchParams(location.hash.replace(/^#/, ""));
    var v = p.get("verdict") || "";
    state.sort = p.get("sort") || "";
    state.dir = p.get("dir") === "desc" ? "desc" : "asc";
    q.value = p.get("q") || "";
    pick.value = Array.prototype.some.call(pick.options, function (o) {
      return o.value === v; }) ? v : "";
  }
  function writeHash() {
    var p = new URLSearchParams();
    if (state.sort) { p.set("sort", state.sort); p.set("dir", state.dir); }
    if (pick.value) p.set("verdict", pick.value);
    if (q.value) p.set("q", q.value);
    try { history.replaceState(null, "", "#" + p.toString()); } catch (e) { /* file: */ }
  }
  function apply() { readHash(); sortRows(); filterRows(); }
  heads.forEach(function (h) {
    h.querySelector("button").addEventListener("click", function () {
      state.dir = state.sort === h.dataset.key && state.dir === "asc" ? "desc" : "asc";
      state.sort = h.dataset.key;
      sortRows();
      writeHash();
    });
  });
  q.addEventListener("input", function () { filterRows(); writeHash(); });
  pick.addEventListener("change", function () { filterRows(); writeHash(); });
  window.addEventListener("hashchange", apply);
  document.getElementById("filters").addEventListener("submit", function (ev) {
    ev.preventDefault(); });
  document.getElementById("filters").hidden = false;
  apply();
})();
"""


# ---- gradescope_scores.csv ------------------------------------------------------------


def gradescope_row(row: dict) -> list:
    """[Name, SID, Email, Total Score, Max Points, Status] of one row: Name the folder the
    submission was graded from (its last part; the output name without one), SID that
    name when it is all digits, Email when it is an email address, else both empty."""
    folder = PurePath(str(row.get("source") or "")).name or str(row.get("submission", ""))
    folder = N.visible(folder)
    sid = folder if folder.isascii() and folder.isdigit() else ""
    email = folder if _EMAIL.fullmatch(folder) else ""
    got, mx = row.get("score"), row.get("max_score")
    return [folder, sid, email, got if F.is_number(got) else "",
            mx if F.is_number(mx) else "", "Graded"]


def write_gradescope_csv(path, rows: list) -> None:
    """gradescope_scores.csv: GRADESCOPE_FIELDS, a row per submission, every cell through
    names.csv_cell() (no formula), text cells quoted and numbers not."""
    with open(path, "w", newline="") as f:
        csv.writer(f).writerow(GRADESCOPE_FIELDS)
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        for r in rows:
            w.writerow([N.csv_cell(v) for v in gradescope_row(r)])


def write(out, rows: list, meta: dict | None = None,
          similarity_page: str | None = None) -> None:
    """index.html and gradescope_scores.csv in `out`. When a submission's output folder
    took the CSV's name (a folder named so), the CSV is left out and the page says so."""
    target = out / GRADESCOPE_CSV
    wrote = not target.is_dir()
    if wrote:
        write_gradescope_csv(target, rows)
    (out / "index.html").write_text(page(rows, meta, similarity_page, wrote))


def write_class(out, rows: list[dict], meta: dict | None = None,
                similarity: dict | None = None, similarity_page: str | None = None) -> None:
    """summary.csv, index.html and gradescope_scores.csv of a class in `out`: rows as
    render.summary_row() gives them, in the order to show; meta optionally {'date': ...,
    'settings': text or dict, 'grader': {'version', 'date', 'weights'}}; similarity
    optionally the similarity check's flags, {submission name: text such as 'partner
    (0.83)'}, put in the rows' 'similarity'; similarity_page the file name of the
    similarity report written beside index.html (linked from it)."""
    if similarity:
        rows = [{**r, "similarity": str(similarity.get(r.get("submission"))
                                         or r.get("similarity") or "")} for r in rows]
    R.write_summary_csv(out / "summary.csv", rows)
    write(out, rows, meta, similarity_page)
