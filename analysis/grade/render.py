"""Verdict pages from evidence.json: Markdown, one self-contained HTML page (inline SVG, no
external assets), and Gradescope's results.json. Pure functions of (evidence, weights)."""

import html
import json
import tomllib
from pathlib import Path

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
    """The checks with 'points' and 'max_points' added."""
    out = []
    for c in evidence.get("checks", []):
        mx = float(weights["points"].get(c["id"], 0))
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
    return list(evidence.get("config", {}).get("sizes", []))


def markdown(name: str, evidence: dict, ref: dict | None, weights: dict) -> str:
    scored = score(evidence, weights)
    word, failed = verdict(evidence)
    got, mx = totals(scored)
    cfg = evidence.get("config", {})
    out = [f"# Lab 2 grade: {name}", "",
           f"**Verdict: {word}**" + (f" (failed: {', '.join(failed)})" if failed else ""),
           f"**Score: {got:g} / {mx:g}**", "",
           f"Settings: {cfg.get('runs')} kit runs per server and n = "
           f"{', '.join(map(str, cfg.get('sizes', [])))}"
           + (" (quick)" if cfg.get("quick") else "")
           + f"; grading took {evidence.get('seconds', 0):.0f} s. Sandboxed with bubblewrap "
           "(own loopback, read-only system, user nobody, rlimits).", ""]
    if evidence.get("error"):
        out += [f"Grading error: {evidence['error']}", ""]
    out += ["| Check | Verdict | Points |", "|---|---|---|"]
    for c in scored:
        out.append(f"| {c['title']} | {c['status'].upper()} | "
                   f"{c['points']:g} / {c['max_points']:g} |")
    out.append("")
    for c in scored:
        out += [f"## {c['title']}: {c['status'].upper()}", ""]
        out += [f"- {line}" for line in c["evidence"]]
        for ex in c.get("counterexamples", []):
            out += ["", "Counterexample:", "", "```", ex, "```"]
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


def html_page(name: str, evidence: dict, ref: dict | None, weights: dict) -> str:
    e = html.escape
    scored = score(evidence, weights)
    word, failed = verdict(evidence)
    got, mx = totals(scored)
    colour = {"PASS": PASS_COLOUR, "FAIL": FAIL_COLOUR}.get(word, FINDINGS_COLOUR)
    cfg = evidence.get("config", {})
    b = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
         f"<title>Lab 2 grade: {e(name)}</title><style>",
         "body{font-family:sans-serif;margin:1.5em;max-width:60em}"
         "table{border-collapse:collapse;margin:.5em 0}"
         "td,th{border:1px solid #999;padding:.2em .5em}"
         ".pass{color:#070}.fail{color:#b00}.skip{color:#777}pre{background:#f4f4f4;padding:.5em;"
         "white-space:pre-wrap}",
         f"#verdict{{background:{colour};color:#fff;font-size:2em;padding:.4em .8em}}",
         "</style></head><body>",
         f"<h1>Lab 2 grade: {e(name)}</h1>",
         f"<div id='verdict'>{word} — {got:g} / {mx:g}</div>"]
    if failed:
        b.append(f"<p>Failed: {e(', '.join(failed))}</p>")
    b.append(f"<p>{cfg.get('runs')} kit runs per server and n = "
             f"{e(', '.join(map(str, cfg.get('sizes', []))))}"
             f"{' (quick)' if cfg.get('quick') else ''}; grading took "
             f"{evidence.get('seconds', 0):.0f} s, sandboxed.</p>")
    if evidence.get("error"):
        b.append(f"<p class='fail'>Grading error: {e(evidence['error'])}</p>")
    b.append("<table><tr><th>Check</th><th>Verdict</th><th>Points</th></tr>")
    for c in scored:
        b.append(f"<tr><td><a href='#{c['id']}'>{e(c['title'])}</a></td>"
                 f"<td class='{c['status']}'>{c['status'].upper()}</td>"
                 f"<td>{c['points']:g} / {c['max_points']:g}</td></tr>")
    b.append("</table>")
    for c in scored:
        b.append(f"<h2 id='{c['id']}'>{e(c['title'])}: <span class='{c['status']}'>"
                 f"{c['status'].upper()}</span></h2><ul>")
        b += [f"<li>{e(line)}</li>" for line in c["evidence"]]
        b.append("</ul>")
        for ex in c.get("counterexamples", []):
            b.append(f"<p>Counterexample:</p><pre>{e(ex)}</pre>")
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
            "output": f"{word}" + (f": failed {', '.join(failed)}" if failed else ""),
            "tests": [{"name": c["title"], "number": str(i + 1), "score": c["points"],
                       "max_score": c["max_points"],
                       "status": "passed" if c["status"] == "pass" else "failed",
                       "output": "\n".join(c["evidence"] + c.get("counterexamples", []))}
                      for i, c in enumerate(scored)]}


def write_pages(out: Path, name: str, evidence: dict, ref: dict | None, weights: dict) -> None:
    (out / "verdict.md").write_text(markdown(name, evidence, ref, weights))
    (out / "verdict.html").write_text(html_page(name, evidence, ref, weights))
    (out / "results.json").write_text(json.dumps(gradescope(evidence, weights), indent=1))
