"""Verdict pages from evidence.json: Markdown, one self-contained HTML page (inline SVG, no
external assets), and Gradescope's results.json; the class summary (summary.csv,
index.html) and the console lines. Pure functions of (evidence, weights) but the writers.

Every string of the evidence may carry a student's text (make output, server stderr,
replies, timing-file lines, the folder's name): it is shown only through analysis.grade.names
(code spans or escapes in Markdown, html.escape in HTML, escaped controls everywhere)."""

import csv
import html
import json
import re
import tomllib
from pathlib import Path

from . import names as N

DEFAULT_WEIGHTS = Path(__file__).resolve().parent.parent / "grade_weights.toml"
SERVERS = ("main1", "main2", "main3", "main4")


class WeightsError(Exception):
    pass


def load_weights(path: Path) -> dict:
    """{'points': {check: float}, 'thresholds': {...}}; WeightsError with one line if bad."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise WeightsError(f"cannot read weights {path}: {e}") from None
    points = data.get("points", {})
    for k, v in points.items():
        if not isinstance(v, (int, float)) or v < 0:
            raise WeightsError(f"weights {path}: points.{k} must be a number >= 0, got {v!r}")
    return {"points": points, "thresholds": data.get("thresholds", {})}


def score(evidence: dict, weights: dict) -> list:
    """The checks with 'points' and 'max_points' added. An undetermined check (the grader
    could not tell, e.g. a measurement too close to call on a noisy machine) is not
    scored at all: the grader's limits never cost a point."""
    out = []
    for c in evidence.get("checks", []):
        mx = float(weights["points"].get(c["id"], 0))
        if c["status"] == "undetermined":
            out.append({**c, "points": 0.0, "max_points": 0.0})
            continue
        frac = c.get("fraction", 1.0 if c["status"] == "pass" else 0.0)
        if c["status"] == "skip":
            frac = 0.0
        out.append({**c, "points": round(mx * frac, 2), "max_points": mx})
    return out


# Failing these is a finding (the kit's own sample fails some robustness probes), not a FAIL.
FINDINGS = ("robustness", "races")


def verdict(evidence: dict) -> tuple:
    """('PASS' | 'PASS WITH FINDINGS' | 'FAIL', [ids of failed checks])."""
    if evidence.get("error"):
        return "FAIL", ["grading"]
    failed = [c["id"] for c in evidence.get("checks", []) if c["status"] == "fail"]
    if not failed:
        return "PASS", failed
    return ("PASS WITH FINDINGS" if all(f in FINDINGS for f in failed) else "FAIL"), failed


def totals(scored: list) -> tuple:
    return (round(sum(c["points"] for c in scored), 2),
            round(sum(c["max_points"] for c in scored), 2))


def _fmt(v):
    return "—" if v is None else f"{v:.3e}"


def table_rows(sub: dict, ref: dict, key: str, sizes: list) -> list:
    rows = []
    for s in SERVERS:
        row = [s]
        for n in sizes:
            row.append(_fmt(sub.get(s, {}).get(str(n), {}).get(key)))
            row.append(_fmt(ref.get(s, {}).get(str(n), {}).get(key)))
        rows.append(row)
    return rows


def ranking(tab: dict, n) -> str:
    vals = [(tab.get(s, {}).get(str(n), {}).get("mean"), s) for s in SERVERS]
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
    return STATUS_WORDS.get(check.get("status"), "UNKNOWN")


def _num(v, spec: str = "g") -> str:
    """A number of the evidence as text; '?' for anything else."""
    return format(v, spec) if isinstance(v, (int, float)) and not isinstance(v, bool) else "?"


def settings_text(evidence: dict) -> str:
    """'R kit runs per server and n = 10, 1000 (quick)', from numbers only."""
    cfg = evidence.get("config", {})
    return (f"{_num(cfg.get('runs'))} kit runs per server and n = "
            f"{', '.join(map(str, sizes_of(evidence)))}" + (" (quick)" if cfg.get("quick") else ""))


def sandbox_text(evidence: dict) -> str:
    """Which limits applied to this submission (the grader's own words)."""
    sb = evidence.get("sandbox") or {}
    parts = ["bubblewrap: own loopback, only /usr, a few /etc files and its own copy "
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


def markdown(name: str, evidence: dict, ref: dict | None, weights: dict) -> str:
    scored = score(evidence, weights)
    word, failed = verdict(evidence)
    got, mx = totals(scored)
    failed_md = ", ".join(map(N.md_code, failed))
    out = [f"# Lab 2 grade: {N.md_code(name)}", "",
           f"**Verdict: {word}**" + (f" (failed: {failed_md})" if failed else ""),
           f"**Score: {got:g} / {mx:g}**", "",
           f"Settings: {settings_text(evidence)}; grading took "
           f"{_num(evidence.get('seconds', 0), '.0f')} s.", "",
           f"Sandbox: {N.md_text(sandbox_text(evidence))}", ""]
    if evidence.get("error"):
        out += [f"Grading error: {N.md_code(evidence['error'])}", ""]
    out += ["| Check | Verdict | Points |", "|---|---|---|"]
    for c in scored:
        out.append(f"| {N.md_text(c['title'])} | {status_word(c)} | "
                   f"{c['points']:g} / {c['max_points']:g} |")
    out.append("")
    for c in scored:
        out += [f"## {N.md_text(c['title'])}: {status_word(c)}", ""]
        out += [f"- {N.md_code(line)}" for line in c["evidence"]]
        for ex in c.get("counterexamples", []):
            out += ["", "Counterexample:", "", N.md_fence(ex)]
        out.append("")
    sub_t = evidence.get("tables")
    if sub_t:
        ref_t = (ref or {}).get("tables", {})
        sizes = sizes_of(evidence)
        for num, (key, what) in enumerate((("mean", "Mean"), ("median", "Median")), 1):
            out += [f"## Table {num}: {what} memory access latency (s), submission | reference", ""]
            head = "| Server | " + " | ".join(f"n={n} | ref n={n}" for n in sizes) + " |"
            out += [head, "|---" * (1 + 2 * len(sizes)) + "|"]
            out += ["| " + " | ".join(r) + " |" for r in table_rows(sub_t, ref_t, key, sizes)]
            out.append("")
        out += ["Ranking by mean latency (fastest first):", ""]
        for n in sizes:
            out.append(f"- n={n}: submission {ranking(sub_t, n)}; reference {ranking(ref_t, n)}")
        out.append("")
    return "\n".join(out)


def svg_bars(sub: dict, ref: dict, n) -> str:
    """Mean latency per server, submission beside reference, as inline SVG."""
    vals = []
    for s in SERVERS:
        vals.append((s, sub.get(s, {}).get(str(n), {}).get("mean"),
                     ref.get(s, {}).get(str(n), {}).get("mean")))
    top = max([v for _, a, b in vals for v in (a, b) if v] or [1])
    w, h, bw = 360, 160, 28
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
        parts.append(f'<text x="{x}" y="{h + 16}" font-size="12">{s}</text>')
    parts.append(f'<text x="4" y="{h + 34}" font-size="11" fill="#3465a4">submission</text>'
                 f'<text x="90" y="{h + 34}" font-size="11" fill="#888">reference</text></svg>')
    return "".join(parts)


PASS_COLOUR = "#00a000"
FAIL_COLOUR = "#d00000"
FINDINGS_COLOUR = "#b06000"


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
    return b


def html_page(name: str, evidence: dict, ref: dict | None, weights: dict) -> str:
    e = html.escape
    scored = score(evidence, weights)
    word, failed = verdict(evidence)
    got, mx = totals(scored)
    colour = {"PASS": PASS_COLOUR, "FAIL": FAIL_COLOUR}.get(word, FINDINGS_COLOUR)
    b = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
         f"<title>Lab 2 grade: {e(N.visible(name))}</title><style>",
         "body{font-family:sans-serif;margin:1.5em;max-width:60em}"
         "table{border-collapse:collapse;margin:.5em 0}"
         "td,th{border:1px solid #999;padding:.2em .5em}"
         ".pass{color:#070}.fail{color:#b00}.skip{color:#777}.undetermined{color:#777}pre{background:#f4f4f4;padding:.5em;"
         "white-space:pre-wrap}",
         f"#verdict{{background:{colour};color:#fff;font-size:2em;padding:.4em .8em}}",
         "</style></head><body>",
         f"<h1>Lab 2 grade: {e(N.visible(name))}</h1>",
         f"<div id='verdict'>{word} — {got:g} / {mx:g}</div>"]
    if failed:
        b.append(f"<p>Failed: {e(', '.join(map(N.visible, failed)))}</p>")
    b.append(f"<p>{e(settings_text(evidence))}; grading took "
             f"{_num(evidence.get('seconds', 0), '.0f')} s.</p>"
             f"<p>Sandbox: {e(N.visible(sandbox_text(evidence)))}</p>")
    if evidence.get("error"):
        b.append(f"<p class='fail'>Grading error: {e(N.visible(evidence['error']))}</p>")
    b += html_checks(scored)
    sub_t = evidence.get("tables")
    if sub_t:
        ref_t = (ref or {}).get("tables", {})
        sizes = sizes_of(evidence)
        for num, (key, what) in enumerate((("mean", "Mean"), ("median", "Median")), 1):
            b.append(f"<h2>Table {num}: {what} memory access latency (s)</h2>"
                     "<table><tr><th>Server</th>"
                     + "".join(f"<th>n={n}</th><th>reference n={n}</th>" for n in sizes) + "</tr>")
            for r in table_rows(sub_t, ref_t, key, sizes):
                b.append("<tr>" + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>")
            b.append("</table>")
        b.append("<h2>Ranking (fastest first)</h2><ul>")
        for n in sizes:
            b.append(f"<li>n={n}: submission {e(ranking(sub_t, n))}; reference "
                     f"{e(ranking(ref_t, n))}</li>")
        b.append("</ul><h2>Figures</h2>")
        b += [svg_bars(sub_t, ref_t, n) for n in sizes]
    b.append("</body></html>")
    return "\n".join(b)


def gradescope(evidence: dict, weights: dict) -> dict:
    scored = score(evidence, weights)
    got, mx = totals(scored)
    word, failed = verdict(evidence)
    return {"score": got, "max_score": mx, "visibility": "visible",
            "output": N.visible(word + (f": failed {', '.join(failed)}" if failed else "")),
            "tests": [{"name": N.visible(c["title"]), "number": str(i + 1), "score": c["points"],
                       "max_score": c["max_points"],
                       "status": "passed" if c["status"] == "pass" else "failed",
                       "output": "\n".join([*map(N.visible, c["evidence"]),
                                            *(x for ex in c.get("counterexamples", [])
                                              for x in _lines(ex))])}
                      for i, c in enumerate(scored)]}


def write_pages(out: Path, name: str, evidence: dict, ref: dict | None, weights: dict) -> None:
    (out / "verdict.md").write_text(markdown(name, evidence, ref, weights))
    (out / "verdict.html").write_text(html_page(name, evidence, ref, weights))
    (out / "results.json").write_text(json.dumps(gradescope(evidence, weights), indent=1))


# ---- the class: summary.csv, index.html, console lines ----------------------------------

SUMMARY_FIELDS = ("submission", "source", "verdict", "score", "max_score", "failed", "seconds")


def summary_row(name: str, source, evidence: dict, weights: dict) -> dict:
    """One submission's row of the class summary: `name` its output folder (an
    names.assign() name), `source` the folder it was graded from."""
    got, mx = totals(score(evidence, weights))
    word, failed = verdict(evidence)
    secs = evidence.get("seconds", 0)
    return {"submission": name, "source": str(source), "verdict": word, "score": got,
            "max_score": mx, "failed": " ".join(map(str, failed)),
            "seconds": round(secs, 1) if isinstance(secs, (int, float)) else 0.0}


def write_summary_csv(path: Path, rows: list[dict]) -> None:
    """summary.csv with every cell through names.csv_cell(), and every text cell quoted (a
    spreadsheet that splits on ';' or tabs still keeps a cell whole)."""
    with open(path, "w", newline="") as f:
        csv.writer(f).writerow(SUMMARY_FIELDS)
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        for r in rows:
            w.writerow([N.csv_cell(r.get(k, "")) for k in SUMMARY_FIELDS])


def _meta_html(meta: dict | None) -> str:
    """'Graded DATE; settings: ...' from meta's 'date' and 'settings' (text or a dict)."""
    meta = meta or {}
    parts = []
    if meta.get("date"):
        parts.append(f"Graded {meta['date']}")
    settings = meta.get("settings")
    if isinstance(settings, dict):
        settings = ", ".join(f"{k}={v}" for k, v in settings.items())
    if settings:
        parts.append(f"settings: {settings}")
    return f"<p>{html.escape(N.visible('; '.join(parts)))}</p>" if parts else ""


def _index_row(r: dict) -> str:
    e = html.escape
    name = str(r.get("submission", ""))
    shown = e(N.visible(name))
    # A name that is not an assign() name is shown without a link rather than linked unsafely.
    cell = f"<a href='{e(N.html_href(name))}'>{shown}</a>" if N.is_safe(name) else shown
    word = str(r.get("verdict", ""))
    css = word.replace(" ", "-") if word in ("PASS", "FAIL", "PASS WITH FINDINGS") else ""
    return (f"<tr><td>{cell}</td><td>{e(N.visible(r.get('source', '')))}</td>"
            f"<td class='{css}'>{e(N.visible(word))}</td>"
            f"<td>{_num(r.get('score'))} / {_num(r.get('max_score'))}</td>"
            f"<td>{e(N.visible(r.get('failed', '')))}</td></tr>")


def write_class(out: Path, rows: list[dict], meta: dict | None = None) -> None:
    """summary.csv and index.html of a class in `out`: rows as summary_row() gives them, in
    the order to show; meta optionally {'date': ..., 'settings': text or dict}."""
    write_summary_csv(out / "summary.csv", rows)
    body = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>Lab 2 grades</title>"
            "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
            "td,th{border:1px solid #999;padding:.2em .5em}.PASS{color:#070}.FAIL{color:#b00}"
            ".PASS-WITH-FINDINGS{color:#b06000}"
            "</style></head><body><h1>Lab 2 grades</h1>", _meta_html(meta),
            "<table><tr><th>Submission</th><th>Source</th><th>Verdict</th><th>Score</th>"
            "<th>Failed checks</th></tr>"]
    body += [_index_row(r) for r in rows]
    body.append("</table></body></html>")
    (out / "index.html").write_text("\n".join(body))


def console_line(row: dict) -> str:
    """'NAME: VERDICT score/max (failed: ids)' for the terminal: one line whatever the
    row's text holds (names.console())."""
    failed = row.get("failed") or ""
    return (f"{N.console(row.get('submission', ''))}: {N.console(row.get('verdict', ''))} "
            f"{_num(row.get('score'))}/{_num(row.get('max_score'))}"
            + (f" (failed: {N.console(failed)})" if failed else ""))
