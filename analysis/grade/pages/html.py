"""verdict.html, one self-contained page (inline SVG, no external assets): the verdict
banner, what to fix, each check's evidence, how the score was made, the tables and figures.

Every string of the evidence may carry a student's text: it goes into the page only through
names.visible() and html.escape()."""

import html

from analysis.grade import labs
from analysis.grade import score as S
from analysis.grade.pages import fmt as F
from analysis.grade.pages import markdown as M
from analysis.grade.trust import names as N


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
NOT_GRADABLE_COLOUR = "#606060"


def _html_fix(items: list) -> str:
    """'What to fix:' with one item inline, several as a list (escaped by rich_html)."""
    if len(items) == 1:
        return f"<strong>What to fix:</strong> {F.rich_html(items[0])}"
    return ("<strong>What to fix:</strong><ul>"
            + "".join(f"<li>{F.rich_html(x)}</li>" for x in items) + "</ul>")


def html_teach(c: dict) -> str:
    """A check's status note (skipped, undetermined) and 'What to fix', as one block."""
    items = c["fixes"]
    note = F.status_note(c)
    if not items and not note:
        return ""
    parts = [f"<p>{html.escape(note)}</p>"] if note else []
    if items:
        parts.append(f"<p>{_html_fix(items)}</p>")
    return f"<div class='fix'>{''.join(parts)}</div>"


def html_fix_summary(scored: list) -> list:
    """'What to fix' near the top: each check that did not pass, linked to its section."""
    todo = [(c, c["fixes"]) for c in scored if c["status"] != "pass"]
    todo = [(c, f) for c, f in todo if f]
    if not todo:
        return []
    b = ["<h2 id='what-to-fix'>What to fix</h2><ul class='fixes'>"]
    for c, items in todo:
        b.append(f"<li><a href='#{F.anchor(c['id'])}'>{html.escape(N.visible(c['title']))}</a>"
                 f" ({F.word_scored(c)}): " + (F.rich_html(items[0]) if len(items) == 1 else
                                   "<ul>" + "".join(f"<li>{F.rich_html(x)}</li>"
                                                    for x in items) + "</ul>") + "</li>")
    return [*b, "</ul>"]


def html_checks(scored: list) -> list:
    """The checks' table and one section per check with its evidence, as HTML parts."""
    e = html.escape
    b = ["<table><tr><th>Check</th><th>Verdict</th><th>Points</th></tr>"]
    for c in scored:
        word = S.status_word(c)
        b.append(f"<tr><td><a href='#{F.anchor(c['id'])}'>{e(N.visible(c['title']))}</a></td>"
                 f"<td class='{word.lower()}'>{word}</td>"
                 f"<td>{c['points']:g} / {c['max_points']:g}</td></tr>")
    b.append("</table>")
    for c in scored:
        word = S.status_word(c)
        b.append(f"<h2 id='{F.anchor(c['id'])}'>{e(N.visible(c['title']))}: "
                 f"<span class='{word.lower()}'>{word}</span></h2><ul>")
        b += [f"<li>{e(N.visible(line))}</li>" for line in c["evidence"]]
        b.append("</ul>")
        for ex in c.get("counterexamples", []):
            b.append(f"<p>Counterexample:</p><pre>{e(chr(10).join(F.lines(ex)))}</pre>")
        b.append(html_teach(c))
    return b


def html_how(evidence: dict, sc: S.Score) -> list:
    """'How the score was made': weights, shares earned, points, the verdict rule."""
    e = html.escape
    b = ["<h2 id='how'>How the score was made</h2><table><tr><th>Check</th><th>Verdict</th>"
         "<th>Weight</th><th>Earned</th><th>Points</th><th>How it is counted</th></tr>"]
    for title, word, weight, share, pts, rule in S.how_rows(sc):
        b.append(f"<tr><td>{e(N.visible(title))}</td><td class='{word.lower()}'>{word}</td>"
                 f"<td class='num'>{weight}</td><td class='num'>{share}</td>"
                 f"<td class='num'>{pts}</td><td>{F.rich_html(rule)}</td>"
                 "</tr>")
    b.append("</table>")
    b += [f"<p>{e(S.score_sums(sc))}</p>",
          f"<p>Verdict: {e(sc.reason)}. The rule: {e(S.VERDICT_RULE)}</p>",
          f"<p>Weights: <code>{e(N.visible(F.weights_file(evidence, sc.weights)))}</code> (points "
          "per check; a course edits it or passes its own with <code>--weights FILE</code>)."
          "</p>"]
    return b


def html_tables(evidence: dict, ref: dict | None) -> list:
    e = html.escape
    sub_t, ref_t, sizes, servers = M.table_data(evidence, ref)
    if not sub_t:
        return []
    b = []
    for num, (key, what) in enumerate(M.TABLES, 1):
        b.append(f"<h2>Table {num}: {what} memory access latency (s)</h2>"
                 "<table><tr><th>Server</th>"
                 + "".join(f"<th>n={n}</th><th>reference n={n}</th>" for n in sizes) + "</tr>")
        for r in F.table_rows(sub_t, ref_t, key, sizes, servers):
            b.append("<tr>" + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>")
        b.append("</table>")
    b.append("<h2>Ranking (fastest first)</h2><ul>")
    for n in sizes:
        b.append(f"<li>n={n}: submission {e(F.ranking(sub_t, n, servers))}; reference "
                 f"{e(F.ranking(ref_t, n))}</li>")
    b.append("</ul><h2>Figures</h2>")
    return b + [svg_bars(sub_t, ref_t, n, servers) for n in sizes]


PAGE_STYLE = ("body{font-family:sans-serif;margin:1.5em;max-width:60em}"
              "table{border-collapse:collapse;margin:.5em 0}"
              "td,th{border:1px solid #999;padding:.2em .5em}"
              ".pass{color:#070}.fail{color:#b00}.skip{color:#777}.undetermined{color:#777}"
              "pre{background:#f4f4f4;padding:.5em;white-space:pre-wrap}"
              ".fix{background:#fff6d6;border-left:4px solid #b06000;padding:.1em .8em;"
              "margin:.5em 0}code{background:#f4f4f4;padding:0 .2em}.num{white-space:nowrap}")


def html_page(name: str, evidence: dict, ref: dict | None, sc: S.Score) -> str:
    """verdict.html, one self-contained page: the verdict banner, what to fix, each check's
    evidence, how the score was made, the tables and figures; sc: the grading's Score
    (score.of)."""
    e = html.escape
    word, failed, got, mx = sc.verdict, sc.failed, sc.total, sc.maximum
    colour = {"PASS": PASS_COLOUR, "FAIL": FAIL_COLOUR,
              labs.NOT_GRADABLE: NOT_GRADABLE_COLOUR}.get(word, FINDINGS_COLOUR)
    b = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
         f"<title>Lab 2 grade: {e(N.visible(name))}</title><style>", PAGE_STYLE,
         f"#verdict{{background:{colour};color:#fff;font-size:2em;padding:.4em .8em}}",
         "</style></head><body>",
         f"<h1>Lab 2 grade: {e(N.visible(name))}</h1>",
         f"<div id='verdict'>{word} — {got:g} / {mx:g}</div>"]
    if failed:
        b.append(f"<p>Failed: {e(', '.join(map(N.visible, failed)))}</p>")
    b.append(f"<p>{e(F.settings_text(evidence))}; grading took "
             f"{F.num(evidence.get('seconds', 0), '.0f')} s.</p>"
             f"<p>Grader: {e(N.visible(F.grader_text(evidence, sc.weights)))}. "
             "<a href='#how'>How the score was made</a>.</p>"
             f"<p>Sandbox: {e(N.visible(F.sandbox_text(evidence)))}</p>")
    if F.lab_text(evidence):
        b.append(f"<p>Lab: {e(N.visible(F.lab_text(evidence)))}</p>")
    if evidence.get("error"):
        b.append(f"<p class='fail'>Grading error: {e(N.visible(evidence['error']))}</p>")
    b += html_fix_summary(sc.checks) + html_checks(sc.checks) + html_how(evidence, sc)
    b += html_tables(evidence, ref)
    b.append("</body></html>")
    return "\n".join(b)
