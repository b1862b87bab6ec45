"""dashboard: the class page (index.html) and gradescope_scores.csv, from summary rows."""

import csv
import html
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from analysis.grade import score
from analysis.grade.pages import dashboard, render
from analysis.grade.trust import names
from analysis.tests.test_grade_render import CHROMIUM, chromium_dom, hrefs, relative

W = {"points": {"build": 5, "timing": 5, "speed": 10}, "thresholds": {}}


def check(status, points, mx, title="Build"):
    return {"title": title, "status": status, "points": points, "max_points": mx}


def row(name, score=9.5, mx=10, verdict="PASS", source=None, checks=None, **more):
    return {"submission": name, "source": source or f"/class/{name}", "verdict": verdict,
            "score": score, "max_score": mx, "failed": "", "seconds": 12.5, "similarity": "",
            "checks": checks if checks is not None else {"build": check("pass", 5, 5)},
            **more}


HOSTILE_SOURCES = ['<img src=x onerror=alert(1)>', 'javascript:alert(1)', "=cmd|'-C calc'!A0",
                   "x\u202eevil\x1b[2J", "@SUM(A1)", "+1-2", "a'b\"c<b>d"]


def hostile_rows() -> list:
    paths = [Path("/class") / s for s in HOSTILE_SOURCES]
    rows = [row(n, source=str(p), verdict="FAIL", failed="<script>x</script>",
                similarity="<b>bob</b> (0.9)\u202e",
                checks={"build\" onclick='x'": check("fail' onmouseover='y", 0, 5,
                                                     "<script>t</script>")})
            for n, p in zip(names.assign(paths), paths)]
    return rows + [row("javascript:alert(1)"), row("../../etc/passwd")]


class Tags(HTMLParser):
    """Every start tag with its attributes, the text, and the rows of the tables' bodies as
    (attributes, [cell texts])."""

    def __init__(self):
        super().__init__()
        self.tags, self.text, self.rows = [], [], []
        self._in_body, self._cell = False, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "tbody":
            self._in_body = True
        if tag == "tr" and self._in_body:
            self.rows.append((a, []))
        if tag == "td" and self._in_body:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None and self.rows:
            self.rows[-1][1].append("".join(self._cell).strip())
            self._cell = None
        if tag in ("tbody", "table"):
            self._in_body = False

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(page: str) -> Tags:
    t = Tags()
    t.feed(page)
    return t


def class_table(page: str) -> list:
    """The class table's rows: (attributes, cells), as the page (or Chromium's DOM) has them."""
    table = page[page.index("id='class'" if "id='class'" in page else 'id="class"'):]
    t = Tags()
    t.feed("<table id='class'>" + table[table.index("<tbody"):table.index("</tbody>") + 8])
    return t.rows


def write(tmp_path, rows, **kw) -> str:
    dashboard.write_class(tmp_path, rows, **kw)
    return (tmp_path / "index.html").read_text()


# ---- hostile text, nothing external ---------------------------------------------------


def test_hostile_names_sources_titles_and_flags_are_shown_as_text(tmp_path):
    page = write(tmp_path, hostile_rows())
    tags = parse(page)
    assert {t for t, _ in tags.tags} <= {
        "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "a", "code", "svg",
        "g", "line", "rect", "text", "form", "label", "input", "select", "option", "span",
        "div", "table", "thead", "tbody", "tr", "th", "td", "button", "small", "script"}
    assert [t for t, _ in tags.tags].count("script") == 1
    assert not [(t, k) for t, a in tags.tags for k in a if k.startswith("on")]
    assert "<img" not in page and "<b>bob" not in page and "&lt;b&gt;bob&lt;/b&gt;" in page
    assert "\u202e" not in page and "\x1b" not in page and "x\\u202eevil\\x1b[2J" in page
    assert "&lt;script&gt;t&lt;/script&gt;" in page  # a check's title
    classes = {c for _, a in tags.tags for c in (a.get("class") or "").split()}
    assert not [c for c in classes if "'" in c or "=" in c]  # a status is never a class


def test_links_are_relative_and_only_to_files_beside_the_page(tmp_path):
    rows = hostile_rows()
    page = write(tmp_path, rows)
    links = hrefs(page)
    assert all(map(relative, links)), links
    expected = {names.html_href(r["submission"]) for r in rows if names.is_safe(r["submission"])}
    assert set(links) == expected | {"gradescope_scores.csv", "summary.csv"}
    assert not [h for h in links if ":" in h]
    plain = [r["submission"] for r in rows if not names.is_safe(r["submission"])]
    assert plain == ["javascript:alert(1)", "../../etc/passwd"]  # shown, not linked


def test_the_page_has_no_external_asset(tmp_path):
    page = write(tmp_path, rate_rows(), meta={"date": "today"},
                 similarity_page="similarity.html")
    for external in ("<link", "src=", "url(", "@import", "fetch(", "xmlhttprequest", "http",
                     "<iframe", "<object", "<embed", "<img", "//"):
        assert external not in page.lower(), external
    hostile = write(tmp_path, hostile_rows())  # a student's text is text, not a tag
    for tag, attrs in parse(hostile).tags:
        assert tag not in ("link", "img", "iframe", "object", "embed", "base")
        for k, v in attrs.items():
            if k in ("href", "src", "action", "formaction", "xlink:href", "style"):
                assert not urlsplit(v).scheme and not urlsplit(v).netloc, (tag, k, v)


def test_without_javascript_every_row_shows_and_the_filters_are_hidden(tmp_path):
    page = write(tmp_path, [row("alice"), row("bob", verdict="FAIL")])
    rows = class_table(page)
    assert [cells[0] for _, cells in rows] == ["alice", "bob"]
    assert not [a for a, _ in rows if "hidden" in a]
    form = next(a for t, a in parse(page).tags if t == "form")
    assert form.get("id") == "filters" and "hidden" in form


# ---- the histogram, the pass rates ----------------------------------------------------

SCORES = [(0, 10), (0.5, 10), (1, 10), (9.99, 10), (10, 10), (7, 10), (7, 10), (3.5, 5),
          (2, 0)]


def svg_bins(page: str) -> dict:
    """{bin label: (count, bar height, count label)} of the histogram, parsed as XML."""
    svg = re.search(r"<svg id='histogram'.*?</svg>", page, re.S).group(0)
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter("g"):
        rect, label = g.find("rect"), g.find("text[@class='count']")
        out[g.get("data-bin")] = (int(g.get("data-count")), float(rect.get("height")),
                                  label.text)
    return out


def test_the_histogram_counts_the_scores_per_tenth_of_the_maximum(tmp_path):
    rows = [row(f"s{i}", score=s, mx=m) for i, (s, m) in enumerate(SCORES)]
    page = write(tmp_path, rows)
    bins = svg_bins(page)
    assert list(bins) == ["0–10", "10–20", "20–30", "30–40", "40–50", "50–60", "60–70",
                          "70–80", "80–90", "90–100"]
    counts = {k: v[0] for k, v in bins.items()}
    assert counts == {**dict.fromkeys(bins, 0), "0–10": 2, "10–20": 1, "70–80": 3,
                      "90–100": 2}
    assert all(label == str(n) for n, _, label in bins.values())  # counts labelled
    heights = {n: h for n, h, _ in bins.values()}  # a bar's height is its count's share
    assert heights[0] == 0 and heights[2] == pytest.approx(2 / 3 * heights[3])
    assert "Score (% of the maximum)" in page and ">Submissions</text>" in page
    assert "1 submission without a maximum score (nothing was scored) left out" in page
    assert dashboard.histogram(rows) == ([2, 1, 0, 0, 0, 0, 0, 3, 0, 2], 1)


def rate_rows() -> list:
    def checks(build, speed, timing=None):
        c = {"build": check(build, 5 if build == "pass" else 0, 5),
             "speed": check(speed, 10 if speed == "pass" else 0,
                            0 if speed == "undetermined" else 10, "Speed <i>")}
        return c | ({"timing": check(timing, 0, 5, "Timing")} if timing else {})
    return [row("a", checks=checks("pass", "pass", "fail")),
            row("b", checks=checks("pass", "undetermined", "skip")),
            row("c", checks=checks("fail", "undetermined")),
            row("d", checks=checks("skip", "fail", "pass")),
            row("e", verdict="FAIL", checks={})]  # a grading error: no checks at all


def test_pass_rates_leave_undetermined_checks_out_of_the_graded(tmp_path):
    rows = rate_rows()
    assert dashboard.pass_rates(rows) == [("build", "Build", 2, 4, 0),
                                          ("speed", "Speed <i>", 1, 2, 2),
                                          ("timing", "Timing", 1, 3, 0)]
    page = write(tmp_path, rows)
    table = page[page.index("<table id='pass-rates'>"):]
    table = table[:table.index("</table>")]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in table.split("<tr")[2:]]
    shown = [(c[0], c[1], c[2], c[4]) for c in cells]
    assert shown == [("Build", "2 / 4", "50 %", "0"), ("Speed &lt;i&gt;", "1 / 2", "50 %", "2"),
                     ("Timing", "1 / 3", "33 %", "0")]
    assert "counts as not graded" in page


# ---- the table ------------------------------------------------------------------------


def test_the_table_has_each_checks_points_the_time_and_the_flag(tmp_path):
    rows = rate_rows()
    page = write(tmp_path, rows, similarity={"a": "b (0.83)"})
    heads = re.findall(r"<th data-key='([^']+)' data-type='(num|text)'", page)
    assert heads == [("name", "text"), ("source", "text"), ("verdict", "text"),
                     ("score", "num"), ("pct", "num"), ("check-build", "num"),
                     ("check-speed", "num"), ("check-timing", "num"), ("time", "num"),
                     ("similarity", "text")]
    cells = {c[0]: c for _, c in class_table(page)}
    assert cells["a"][3:] == ["9.5 / 10", "95", "5", "10", "0", "12.5", "b (0.83)"]
    assert cells["b"][5:8] == ["5", "—", "0"]  # undetermined: not scored; skip: none earned
    assert cells["c"][7] == "" and cells["e"][5:8] == ["", "", ""]  # no such check
    assert "Build <small>/ 5</small>" in page and "Timing <small>/ 5</small>" in page


def test_similarity_flags_and_the_report_link(tmp_path):
    (tmp_path / "similarity.html").write_text("report")
    page = write(tmp_path, [row("alice"), row("bob")], similarity={"bob": "alice (0.91)"},
                 similarity_page="similarity.html")
    assert "similarity.html" in hrefs(page)
    assert "<td class='flag'>alice (0.91)</td>" in page
    summary = list(csv.DictReader((tmp_path / "summary.csv").open(newline="")))
    assert [r["similarity"] for r in summary] == ["", "alice (0.91)"]
    for bad in ("https://x/similarity.html", "../similarity.html", "javascript:x.html", "a/b.html"):
        with pytest.raises(ValueError):
            write(tmp_path, [row("alice")], similarity_page=bad)


def test_the_page_keeps_the_meta_line_the_maximum_and_the_verdict_rule(tmp_path):
    page = write(tmp_path, [row("alice"), row("bob")],
                 meta={"date": "2026-11-25 10:00 UTC", "grader": {"version": "1.4.2"}})
    assert "Graded 2026-11-25 10:00 UTC; grader: lockbench 1.4.2" in page
    assert "Maximum score: 10, the same for every submission." in page
    assert html.escape(score.VERDICT_RULE) in page


# ---- the CSV files --------------------------------------------------------------------


def test_gradescope_scores_csv_has_gradescopes_columns_and_no_formula(tmp_path):
    rows = [row("alice", score=9.5, source="/class/alice"),
            row("1234567", score=7, mx=10, source="/class/1234567"),
            row("ccid_ualberta.ca-abc123", score=0, source="/class/ccid@ualberta.ca"),
            *hostile_rows()[:5]]
    dashboard.write_class(tmp_path, rows)
    text = (tmp_path / "gradescope_scores.csv").read_text().splitlines()
    assert text[0] == "Name,SID,Email,Total Score,Max Points,Status"
    assert text[1] == '"alice","","",9.5,10,"Graded"'
    assert text[2] == '"1234567","1234567","",7,10,"Graded"'
    assert text[3] == '"ccid@ualberta.ca","","ccid@ualberta.ca",0,10,"Graded"'
    cells = list(csv.reader((tmp_path / "gradescope_scores.csv").open(newline="")))
    assert len(cells) == 1 + len(rows) and all(len(c) == 6 for c in cells)
    assert not [c for r in cells for c in r if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    names_ = [r[0] for r in cells[1:]]
    assert "'=cmd|'-C calc'!A0" in names_ and "'@SUM(A1)" in names_
    assert "x\\u202eevil\\x1b[2J" in names_
    assert "Gradescope matches a row to a student of the course roster by Email" in \
        (tmp_path / "index.html").read_text()


def test_a_folder_named_like_the_gradescope_csv_does_not_stop_the_class(tmp_path):
    (tmp_path / "gradescope_scores.csv").mkdir()
    page = write(tmp_path, [row("gradescope_scores.csv"), row("bob")])
    assert "gradescope_scores.csv was not written" in page
    assert (tmp_path / "gradescope_scores.csv").is_dir()
    assert "gradescope_scores.csv" not in hrefs(page)


def test_summary_csv_has_each_checks_points_after_the_first_columns(tmp_path):
    e = {"seconds": 3, "checks": [
        {"id": "build", "title": "Build", "status": "pass", "evidence": []},
        {"id": "speed", "title": "Speed", "status": "undetermined", "evidence": []},
        {"id": "=timing", "title": "T", "status": "fail", "fraction": 0.5, "evidence": []}]}
    r = render.summary_row("alice", "/c/alice", e, score.of(e, {**W, "points": {**W["points"],
                                                                    "=timing": 4}}))
    assert r["checks"]["=timing"] == {"title": "T", "status": "fail", "points": 2.0,
                                      "max_points": 4.0}
    dashboard.write_class(tmp_path, [r, row("bob", checks={})])
    lines = list(csv.reader((tmp_path / "summary.csv").open(newline="")))
    assert lines[0][:len(render.SUMMARY_FIELDS)] == list(render.SUMMARY_FIELDS)
    assert lines[0][len(render.SUMMARY_FIELDS):] == [
        "build points", "build max", "speed points", "speed max", "'=timing points",
        "'=timing max"]
    assert lines[1][8:] == ["5.0", "5.0", "0.0", "0.0", "2.0", "4.0"]
    assert lines[2][8:] == [""] * 6


# ---- in headless Chromium -------------------------------------------------------------



def needs_chromium(test):
    """Drives headless Chromium: slow, and skipped without it."""
    skip = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
    return pytest.mark.slow(pytest.mark.chromium(skip(test)))


def numeric_rows() -> list:
    """Scores whose order as text (10, 100, 9.5) differs from their order as numbers."""
    return [row("alice", score=10, mx=100, verdict="FAIL"), row("bob", score=100, mx=100),
            row("alina", score=9.5, mx=100, verdict="FAIL"), row("carl", score=50, mx=100,
                                                                  verdict="FAIL")]


def dom_of(tmp_path, page: Path, fragment: str = "") -> str:
    """Chromium's DOM of `page` opened with `fragment` (chromium_dom() opens no fragment)."""
    class Address:  # all that chromium_dom() asks of its page
        def as_uri(self):
            return page.as_uri() + fragment

    return chromium_dom(tmp_path / "profile", Address())


@needs_chromium
def test_in_chromium_the_page_renders_its_histogram_and_applies_the_address(tmp_path):
    out = tmp_path / "grades"
    out.mkdir()
    dashboard.write_class(out, numeric_rows() + hostile_rows()[:2])
    dom = dom_of(tmp_path, out / "index.html", "#sort=score&dir=desc&verdict=FAIL&q=ali")
    assert "<svg" in dom and dom.count('class="bar"') == dashboard.BINS, dom[:3000]
    rows = class_table(dom)
    order = [cells[0] for _, cells in rows]
    assert order[:4] == ["bob", "carl", "alice", "alina"], order  # by score, as numbers
    shown = [cells[0] for a, cells in rows if "hidden" not in a]
    assert shown == ["alice", "alina"]  # FAIL and "ali" in the name
    assert '<th data-key="score" data-type="num" aria-sort="descending"' in dom
    assert 'id="shown">2 of 6 shown<' in dom
    assert all(map(relative, hrefs(dom)))


@needs_chromium
def test_in_chromium_a_click_on_a_header_sorts_and_the_address_keeps_the_view(tmp_path):
    out = tmp_path / "grades"
    out.mkdir()
    dashboard.write_class(out, numeric_rows())
    page = (out / "index.html").read_text()
    clicks = ("<script>var b = document.querySelector('th[data-key=pct] button');"
              "b.click(); var first = document.location.hash; b.click();"
              "document.body.dataset.first = first;"
              "document.body.dataset.hash = document.location.hash;</script></body>")
    (out / "clicked.html").write_text(page.replace("</body>", clicks))
    dom = dom_of(tmp_path, out / "clicked.html")
    order = [cells[0] for _, cells in class_table(dom)]
    assert order == ["bob", "carl", "alice", "alina"], order  # second click: descending
    assert 'data-first="#sort=pct&amp;dir=asc"' in dom
    assert 'data-hash="#sort=pct&amp;dir=desc"' in dom
