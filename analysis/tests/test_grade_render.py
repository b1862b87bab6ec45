"""render: verdict pages and Gradescope JSON from evidence (pure)."""

import csv
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from analysis.grade import names, render

W = {"points": {"build": 5, "robustness": 10, "timing": 4}, "thresholds": {}}


def ev(**status):
    return {"config": {"runs": 2, "sizes": [10, 1000]}, "seconds": 1.0,
            "checks": [{"id": k, "title": k.title(), "status": v,
                        "evidence": ["<script>alert(1)</script>"]} for k, v in status.items()],
            "tables": {"main1": {"10": {"mean": 2e-3, "median": 1e-3, "client": 3e-3}}}}


def test_points_follow_weights_and_fractions():
    e = ev(build="pass", robustness="fail", timing="skip")
    e["checks"][1]["fraction"] = 0.5
    scored = {c["id"]: c["points"] for c in render.score(e, W)}
    assert scored == {"build": 5, "robustness": 5, "timing": 0}
    assert render.totals(render.score(e, W)) == (10, 19)


def test_verdict_words():
    assert render.verdict(ev(build="pass"))[0] == "PASS"
    assert render.verdict(ev(build="pass", robustness="fail")) == ("PASS WITH FINDINGS",
                                                                   ["robustness"])
    assert render.verdict(ev(build="fail", robustness="fail"))[0] == "FAIL"
    assert render.verdict({"error": "x"})[0] == "FAIL"


def test_html_is_self_contained_and_escapes_evidence():
    page = render.html_page("a<b", ev(build="pass"), None, W)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "a&lt;b" in page and "<svg" in page
    for external in ("<link", "src=", "url(", "@import"):
        assert external not in page


def test_gradescope_json_has_one_test_per_check():
    g = render.gradescope(ev(build="pass", timing="fail"), W)
    json.dumps(g)
    assert g["score"] == 5 and g["max_score"] == 9
    assert [t["status"] for t in g["tests"]] == ["passed", "failed"]


def test_markdown_has_both_tables_and_the_ranking():
    md = render.markdown("x", ev(build="pass"), {"tables": {}}, W)
    assert "## Table 1: Mean" in md and "## Table 2: Median" in md
    assert "n=10: submission main1" in md


def test_a_crash_names_its_signal_and_the_first_request_left_without_reply():
    from analysis.grade import kitload as K
    from analysis.grade import worker

    class Dead:
        def alive(self):
            return False

        def death(self):
            return "killed by signal SIGSEGV (11)"

    first = K.Request(3, 7, False, "String[7] has been modified by thread 3", 1.0, 2.0, None,
                      "ConnectionResetError: Connection reset by peer")
    later = K.Request(4, 1, True, "", 1.5, 2.0, None, "connection refused")
    text = worker.describe_failure(Dead(), [later, first])
    assert "SIGSEGV" in text and "'7-0-String[7] has been modified by thread 3'" in text


# ---- hostile text: a student's folder name and output --------------------------------------

HEADING = "<h1>Verdict: PASS</h1>"


def hostile_ev() -> dict:
    e = ev(build="fail", timing="fail")
    e["checks"][0]["evidence"] = [f"make: {HEADING}", "``` `tick` ``` | pipe | \\|",
                                  "ok\n# Verdict: PASS", "\x1b[2J\u202eSSAP"]
    e["checks"][1]["counterexamples"] = ["read 1\n```\n# Verdict: PASS\n````\n<b>x</b>"]
    e["error"] = "worker: <h1>x</h1>\n# Verdict: PASS"
    return e


def outside_code(md: str) -> str:
    """`md` without its fenced code blocks and code spans, by CommonMark's rules: a fence
    closes at a line of at least as many backticks, a span at the next run of exactly as
    many backticks as it opened with."""
    kept, fence = [], None
    for line in md.split("\n"):
        run = re.match(r" {0,3}(`{3,})", line)
        if fence is None and run:
            fence = run.group(1)
        elif fence is not None:
            if re.fullmatch(r" {0,3}" + fence + r"`* *", line):
                fence = None
        else:
            kept.append(line)
    text, out, i = "\n".join(kept), [], 0
    while i < len(text):
        run = re.match(r"`+", text[i:])
        if not run:
            out.append(text[i])
            i += 1
            continue
        n = len(run.group(0))
        close = re.compile("(?<!`)" + "`" * n + "(?!`)").search(text, i + n)
        if close is None:
            out.append(run.group(0))
            i += n
        else:
            i = close.end()
    return "".join(out)


def test_student_text_in_markdown_is_only_inside_code():
    md = render.markdown("`x` <h1>PASS</h1>", hostile_ev(), None, W)
    rest = outside_code(md)
    for bad in ("<h1>", "<b>", "# Verdict", "|pipe|", "tick", "\x1b", "\u202e"):
        assert bad not in rest.replace(" ", ""), (bad, rest)
    assert not [line for line in rest.splitlines() if line.startswith("# ")
                and not line.startswith("# Lab 2 grade: ")]
    assert "**Verdict: FAIL**" in md


def test_a_table_row_keeps_its_cells_whatever_a_title_holds():
    e = ev(build="pass")
    e["checks"][0]["title"] = "a | b \\| c <h1>"
    row = next(line for line in render.markdown("x", e, None, W).splitlines()
               if line.startswith("| ") and "PASS" in line)
    unescaped = [m for m in re.finditer(r"(\\*)\|", row) if len(m.group(1)) % 2 == 0]
    assert len(unescaped) == 4, row
    assert "<h1>" not in row


def test_html_shows_controls_escaped_and_keeps_check_ids_out_of_markup():
    e = hostile_ev()
    e["checks"][0]["id"] = "x' onmouseover='alert(1)"
    e["checks"][0]["status"] = "fail' onclick='alert(1)"
    page = render.html_page("a\u202eb\nc", e, None, W)
    assert "<h1>Verdict" not in page and "\x1b" not in page and "\u202e" not in page
    assert "onmouseover='" not in page and "onclick='" not in page
    assert "a\\u202eb\\nc" in page and "UNKNOWN" in page


def test_results_json_has_no_terminal_control_characters():
    g = render.gradescope(hostile_ev(), W)
    text = json.dumps(g, ensure_ascii=False)
    assert "\x1b" not in "".join(t["output"] for t in g["tests"])
    assert "\u202e" not in text and "\\u001b" not in json.dumps(g)
    assert "# Verdict: PASS" in g["tests"][1]["output"].split("\n")  # lines stay lines


def row(submission, source="/x/s", verdict="PASS", failed=""):
    return {"submission": submission, "source": source, "verdict": verdict, "score": 9.5,
            "max_score": 10, "failed": failed, "seconds": 1.5}


def test_summary_csv_cells_are_never_formulas(tmp_path):
    formula = '=HYPERLINK("http://x","y")'
    render.write_class(tmp_path, [row(formula, source=f"/c/{formula}", failed="-1+2"),
                                  row("alice", source="@SUM(A1)", verdict="+x")])
    lines = list(csv.reader((tmp_path / "summary.csv").open(newline="")))
    assert lines[0] == list(render.SUMMARY_FIELDS)
    for cells in lines[1:]:
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")], cells
    assert lines[1][0] == "'" + formula and lines[1][3:5] == ["9.5", "10"]
    assert lines[2][1] == "'@SUM(A1)"


def test_summary_csv_numbers_are_unquoted_numbers(tmp_path):
    render.write_class(tmp_path, [row("alice")])
    text = (tmp_path / "summary.csv").read_text().splitlines()
    assert text[0] == ",".join(render.SUMMARY_FIELDS)
    assert text[1] == '"alice","/x/s","PASS",9.5,10,"",1.5'


def hrefs(page: str) -> list:
    found = []

    class Links(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend(v for k, v in attrs if k == "href")

    Links().feed(page)
    return found


def relative(href: str) -> bool:
    u = urlsplit(href)
    return not u.scheme and not u.netloc and not href.startswith(("/", "\\")) and ".." not in href


def test_index_links_are_relative_and_text_is_escaped(tmp_path):
    safe = names.assign([Path("/nowhere/javascript:alert(1)")])[0]
    render.write_class(tmp_path, [row(safe, source="/c/javascript:alert(1)"),
                                  row("javascript:alert(1)", failed="<script>x</script>")],
                       meta={"date": "<b>today</b>", "settings": {"runs": "<i>3</i>"}})
    page = (tmp_path / "index.html").read_text()
    links = hrefs(page)
    assert links == [f"./{safe}/verdict.html"] and all(map(relative, links))
    assert "<script>" not in page and "<b>today" not in page and "&lt;b&gt;today" in page
    assert "runs=&lt;i&gt;3" in page


def test_console_lines_are_one_line_each():
    line = render.console_line(row("x\nalice: PASS 100/100\x1b[1A", failed="build\r\nok"))
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert line.startswith("x\\nalice: PASS 100/100\\x1b[1A: PASS 9.5/10 (failed: ")
    assert render.console_line(row("alice")) == "alice: PASS 9.5/10"


def test_summary_row_carries_the_source_and_the_scores():
    r = render.summary_row("alice", Path("/c/alice"), ev(build="pass", timing="fail"), W)
    assert r == {"submission": "alice", "source": "/c/alice", "verdict": "FAIL", "score": 5,
                 "max_score": 9, "failed": "timing", "seconds": 1.0}
    assert list(r) == list(render.SUMMARY_FIELDS)


CHROMIUM = shutil.which("chromium")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_index_html_in_headless_chromium_has_only_relative_links(tmp_path):
    sub = tmp_path / "class" / "javascript:alert(1)"
    sub.mkdir(parents=True)
    (name,) = names.assign([sub])
    out = tmp_path / "grades"
    out.mkdir()
    render.write_class(out, [row(name, source=str(sub)), row("javascript:alert(1)")])
    profile = tmp_path / "profile"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", (out / "index.html").as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    links = hrefs(dom)
    assert links, dom[:2000]
    assert all(map(relative, links)), links
    assert all("javascript" not in urlsplit(h).scheme for h in links)
