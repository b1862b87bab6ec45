"""similarity.html and similarity.csv: the class's code similarity (similarity/compare.py)
as a page, flagged pairs with their matched code side by side, and every pair as a row.

Everything a submission wrote (file names and code) reaches them escaped: controls, bidi
overrides and zero-width characters written as escapes, every cell through names."""

import csv
import html
import io
import re
import unicodedata
from pathlib import Path

from analysis.grade.similarity.compare import GUARANTEE_T, MIN_OVERLAP, NOISE_T, Pair, Result
from analysis.grade.trust import names as N
from analysis.grade.trust.sources import Source

SHOWN_PAIRS = 50          # pairs whose code the report shows
SHOWN_CHARS = 40000       # characters of one file the report shows


# ---- similarity.csv -----------------------------------------------------------------------

def _write_csv(path: Path, result: Result) -> None:
    """One row per pair; text cells quoted and a formula-like start neutralised, so a
    submission named "=HYPERLINK(...)" stays text in a spreadsheet."""
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    w.writerow(["a", "b", "score_a", "score_b", "flagged", "tokens_overlap"])
    for p in result.pairs:
        w.writerow([N.csv_cell(N.visible(p.a)), N.csv_cell(N.visible(p.b)),
                    round(p.score_a, 4), round(p.score_b, 4),
                    "yes" if p.flagged else "no", p.tokens_overlap])
    path.write_text(buf.getvalue(), encoding="utf-8", errors="replace")


# ---- similarity.html ----------------------------------------------------------------------

_ODD = re.compile(r"[^\t\n\x20-\x7e]")
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn"})


def _code(text: str) -> str:
    """Code text for a <pre>: escaped, and controls, bidi overrides and zero-width characters
    written as escapes (they could hide or reorder what the TA reads)."""
    def one(m):
        c = m.group()
        return N.visible(c) if unicodedata.category(c) in _HIDDEN else c
    return html.escape(_ODD.sub(one, text), quote=False)


def _text(s) -> str:
    """Any name or note on one line, escaped for HTML text and attributes."""
    return html.escape(N.visible(str(s)), quote=True)


def _marked(text: str, ranges) -> str:
    """The text escaped, with <mark> around the (sorted) ranges copydetect matched."""
    out, at = [], 0
    for start, end in ranges:
        start, end = max(start, at), min(end, len(text))
        if end <= start:
            continue
        out += [_code(text[at:start]), "<mark>", _code(text[start:end]), "</mark>"]
        at = end
    out.append(_code(text[at:]))
    return "".join(out)


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #bbb;padding:.2em .6em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.flag td{background:#fde8e8}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em;margin-bottom:2em}
.side{min-width:0}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:12px;line-height:1.35}
mark{background:#ffd27a}
.cut{color:#a00}
.muted{color:#666}
"""


def _head(title: str) -> str:
    """Self-contained page head: inline style only, and a policy that forbids anything
    fetched or run even if some text slipped through unescaped."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'\">"
            f"<title>{_text(title)}</title><style>{_CSS}</style></head><body>\n")


def _summary(result: Result) -> list[str]:
    n_flag = sum(p.flagged for p in result.pairs)
    below = [p for p in result.pairs if not p.flagged]
    out = [
        "<h1>Code similarity between submissions</h1>",
        f"<p>{len(result.per_submission)} submissions, {len(result.pairs)} pairs compared with "
        f"copydetect (winnowing, as MOSS; k = {NOISE_T}, guaranteed match length "
        f"{GUARANTEE_T} filtered characters). A pair is flagged when at least "
        f"{result.threshold:.0%} of one side's code is found in the other (and at least "
        f"{MIN_OVERLAP} characters match). Identifiers, comments and layout are ignored.</p>",
        f"<p>Boilerplate left out: {_text(result.boilerplate)}</p>",
        f"<h2>Flagged pairs ({n_flag})</h2>",
    ]
    out.append(_pair_table([p for p in result.pairs if p.flagged]) if n_flag
               else "<p>No pair reaches the threshold.</p>")
    top = (f"; the most similar of them: {_text(below[0].a)} and {_text(below[0].b)}, "
           f"{below[0].score:.0%}") if below else ""
    out.append(f"<p>{len(below)} pairs below the threshold{top}.</p>")
    return out


def _pair_table(pairs: list[Pair]) -> str:
    rows = ["<table><tr><th>#</th><th>a</th><th>b</th><th>of a in b</th><th>of b in a</th>"
            "<th>matched (filtered chars)</th></tr>"]
    for i, p in enumerate(pairs, 1):
        link = f"<a href=\"#pair-{i}\">{i}</a>" if i <= SHOWN_PAIRS else str(i)
        rows.append(f"<tr class=\"flag\"><td class=\"n\">{link}</td><td>{_text(p.a)}</td>"
                    f"<td>{_text(p.b)}</td><td class=\"n\">{p.score_a:.0%}</td>"
                    f"<td class=\"n\">{p.score_b:.0%}</td>"
                    f"<td class=\"n\">{p.tokens_overlap}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def _per_submission(result: Result) -> list[str]:
    rows = ["<h2>Per submission</h2>",
            "<table><tr><th>submission</th><th>highest pair score</th><th>with</th></tr>"]
    for name, best in sorted(result.per_submission.items(), key=lambda kv: -kv[1].score):
        partner = "" if best.partner is None else _text(best.partner)
        rows.append(f"<tr><td>{_text(name)}</td><td class=\"n\">{best.score:.0%}</td>"
                    f"<td>{partner}</td></tr>")
    rows.append("</table>")
    if result.notes:
        rows.append("<h2>Notes</h2><ul>")
        rows += [f"<li>{_text(n)}</li>" for n in result.notes]
        rows.append("</ul>")
    return rows


def _file_block(src: Source, ranges) -> str:
    text, cut = src.text, ""
    if len(text) > SHOWN_CHARS:
        cut = (f"<p class=\"cut\">[cut: the {len(text) - SHOWN_CHARS} characters after the "
               f"first {SHOWN_CHARS} are not shown]</p>")
        text = text[:SHOWN_CHARS]
    parts = f"{len(ranges)} matching part" + ("" if len(ranges) == 1 else "s")
    return (f"<details open><summary>{_text(src.path)}: {parts}</summary>"
            f"<pre>{_marked(text, ranges)}</pre>{cut}</details>")


def _side_html(name: str, share: float, sources: list[Source], marks: tuple) -> str:
    by_path = dict(marks)
    out = [f"<div class=\"side\"><h3>{_text(name)}: {share:.0%} of its code matched</h3>"]
    out += [_file_block(s, by_path[s.path]) for s in sources if s.path in by_path]
    rest = [_text(s.path) for s in sources if s.path not in by_path]
    if rest:
        out.append(f"<p class=\"muted\">No matching part in: {', '.join(rest)}</p>")
    out.append("</div>")
    return "\n".join(out)


def _details(result: Result) -> list[str]:
    shown = [p for p in result.pairs if p.flagged][:SHOWN_PAIRS]
    out = []
    if len(shown) < sum(p.flagged for p in result.pairs):
        out.append(f"<p class=\"cut\">Only the first {SHOWN_PAIRS} flagged pairs are shown "
                   "in full below.</p>")
    for i, p in enumerate(shown, 1):
        out.append(f"<h2 id=\"pair-{i}\">{i}. {_text(p.a)} and {_text(p.b)} "
                   f"({p.score:.0%})</h2><div class=\"pair\">")
        out.append(_side_html(p.a, p.score_a, result.sources.get(p.a, []), p.marks_a))
        out.append(_side_html(p.b, p.score_b, result.sources.get(p.b, []), p.marks_b))
        out.append("</div>")
    return out


def _html(result: Result) -> str:
    parts = [_head("Code similarity"), *_summary(result), *_per_submission(result),
             *_details(result), "</body></html>\n"]
    return "\n".join(parts)


def write(out: Path, result: Result) -> None:
    """Writes out/similarity.html (flagged pairs, matched code side by side) and
    out/similarity.csv (every pair)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "similarity.html").write_text(_html(result), encoding="utf-8", errors="replace")
    _write_csv(out / "similarity.csv", result)
