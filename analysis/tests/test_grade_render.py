"""render: verdict pages and Gradescope JSON from evidence (pure)."""

import csv
import html
import json
import re
import shutil
import string
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from analysis.grade import labs, score
from analysis.grade import records as checks
from analysis.grade.checks import concurrency
from analysis.grade.pages import dashboard, fmt, gradescope, markdown, render
from analysis.grade.pages import html as H
from analysis.grade.trust import names
from analysis.tests.helpers import Shown, gfm, md_tags

W = {"points": {"build": 5, "robustness": 10, "timing": 4}, "thresholds": {}}


def ev(**status):
    return {"config": {"runs": 2, "sizes": [10, 1000]}, "seconds": 1.0,
            "checks": [{"id": k, "title": k.title(), "status": v,
                        "evidence": ["<script>alert(1)</script>"]} for k, v in status.items()],
            "tables": {"main1": {"10": {"mean": 2e-3, "median": 1e-3, "client": 3e-3}}}}


def test_points_follow_weights_and_fractions():
    e = ev(build="pass", robustness="fail", timing="skip")
    e["checks"][1]["fraction"] = 0.5
    scored = {c["id"]: c["points"] for c in score.score(e, W)}
    assert scored == {"build": 5, "robustness": 5, "timing": 0}
    assert score.totals(score.score(e, W)) == (10, 19)


def test_verdict_words():
    assert score.verdict(ev(build="pass"))[0] == "PASS"
    assert score.verdict(ev(build="pass", robustness="fail")) == ("PASS WITH FINDINGS",
                                                                   ["robustness"])
    assert score.verdict(ev(build="fail", robustness="fail"))[0] == "FAIL"
    assert score.verdict({"error": "x"})[0] == "FAIL"


def test_html_is_self_contained_and_escapes_evidence():
    page = H.html_page("a<b", ev(build="pass"), None, score.of(ev(build="pass"), W))
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "a&lt;b" in page and "<svg" in page
    for external in ("<link", "src=", "url(", "@import"):
        assert external not in page


def test_gradescope_json_has_one_test_per_check():
    e = ev(build="pass", timing="fail")
    g = gradescope.gradescope(e, score.of(e, W))
    json.dumps(g)
    assert g["score"] == 5 and g["max_score"] == 9
    assert [t["status"] for t in g["tests"]] == ["passed", "failed"]


def test_markdown_has_both_tables_and_the_ranking():
    md = markdown.markdown("x", ev(build="pass"), {"tables": {}}, score.of(ev(build="pass"), W))
    assert "## Table 1: Mean" in md and "## Table 2: Median" in md
    assert "n=10: submission main1" in md


def test_a_one_server_lab_shows_main_beside_the_reference_designs_and_names_the_lab():
    e = ev(build="pass")
    e["tables"] = {"main": {"10": {"mean": 4e-3, "median": 3e-3, "client": 5e-3}}}
    e["lab"] = {"name": "2024+", "servers": ["main"], "what": "one server main",
                "why": "one server main built"}
    ref = {"tables": {s: {"10": {"mean": 1e-3 * k, "median": 1e-3, "client": 2e-3}}
                      for k, s in enumerate(labs.FOUR, 1)}}
    md = markdown.markdown("x", e, ref, score.of(e, W))
    rows = [ln.split(" | ")[0] for ln in md.splitlines() if ln.startswith("| main")]
    assert rows[:5] == ["| main", "| main1", "| main2", "| main3", "| main4"], rows
    assert "Lab: graded as the 2024+ lab" in md
    page = H.html_page("x", e, ref, score.of(e, W))
    assert "Lab: graded as the 2024+ lab: one server main (one server main built)" in page
    assert fmt.lab_text({"lab": "not a record"}) == "" and fmt.lab_text({}) == ""


def test_a_crash_names_its_signal_and_the_first_request_left_without_reply():
    from analysis.grade.measure import kitload as K
    from analysis.grade.measure import kitrun

    class Dead:
        def alive(self):
            return False

        def death(self):
            return "killed by signal SIGSEGV (11)"

    first = K.Request(3, 7, False, "String[7] has been modified by thread 3", 1.0, 2.0, None,
                      "ConnectionResetError: Connection reset by peer")
    later = K.Request(4, 1, True, "", 1.5, 2.0, None, "connection refused")
    text = kitrun.describe_failure(Dead(), [later, first])
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
    many backticks as it opened with; outside code a backslash-escaped punctuation
    character (an escaped backtick too) is itself, never markup."""
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
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in string.punctuation:
            out.append(text[i:i + 2])
            i += 2
            continue
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
    md = markdown.markdown("`x` <h1>PASS</h1>", hostile_ev(), None, score.of(hostile_ev(), W))
    rest = outside_code(md)
    for bad in ("<h1>", "<b>", "# Verdict", "|pipe|", "tick", "\x1b", "\u202e"):
        assert bad not in rest.replace(" ", ""), (bad, rest)
    assert not [line for line in rest.splitlines() if line.startswith("# ")
                and not line.startswith("# Lab 2 grade: ")]
    assert "**Verdict: FAIL**" in md


def test_a_table_row_keeps_its_cells_whatever_a_title_holds():
    e = ev(build="pass")
    e["checks"][0]["title"] = "a | b \\| c <h1>"
    row = next(line for line in markdown.markdown("x", e, None, score.of(e, W)).splitlines()
               if line.startswith("| ") and "PASS" in line)
    unescaped = [m for m in re.finditer(r"(\\*)\|", row) if len(m.group(1)) % 2 == 0]
    assert len(unescaped) == 4, row
    assert [tag for tag, _ in md_tags(row) if tag == "h1"] == []


def test_html_shows_controls_escaped_and_keeps_check_ids_out_of_markup():
    e = hostile_ev()
    e["checks"][0]["id"] = "x' onmouseover='alert(1)"
    e["checks"][0]["status"] = "fail' onclick='alert(1)"
    page = H.html_page("a\u202eb\nc", e, None, score.of(e, W))
    assert "<h1>Verdict" not in page and "\x1b" not in page and "\u202e" not in page
    assert "onmouseover='" not in page and "onclick='" not in page
    assert "a\\u202eb\\nc" in page and "UNKNOWN" in page


def test_results_json_has_no_terminal_control_characters():
    g = gradescope.gradescope(hostile_ev(), score.of(hostile_ev(), W))
    text = json.dumps(g, ensure_ascii=False)
    assert "\x1b" not in "".join(t["output"] for t in g["tests"])
    assert "\u202e" not in text and "\\u001b" not in json.dumps(g)
    assert "# Verdict: PASS" in g["tests"][1]["output"].split("\n")  # lines stay lines


def row(submission, source="/x/s", verdict="PASS", failed=""):
    return {"submission": submission, "source": source, "verdict": verdict, "score": 9.5,
            "max_score": 10, "failed": failed, "seconds": 1.5}


def test_summary_csv_cells_are_never_formulas(tmp_path):
    formula = '=HYPERLINK("http://x","y")'
    dashboard.write_class(tmp_path, [row(formula, source=f"/c/{formula}", failed="-1+2"),
                                  row("alice", source="@SUM(A1)", verdict="+x")])
    lines = list(csv.reader((tmp_path / "summary.csv").open(newline="")))
    assert lines[0] == list(render.SUMMARY_FIELDS)
    for cells in lines[1:]:
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")], cells
    assert lines[1][0] == "'" + formula and lines[1][3:5] == ["9.5", "10"]
    assert lines[2][1] == "'@SUM(A1)"


def test_summary_csv_numbers_are_unquoted_numbers(tmp_path):
    dashboard.write_class(tmp_path, [row("alice")])
    text = (tmp_path / "summary.csv").read_text().splitlines()
    assert text[0] == ",".join(render.SUMMARY_FIELDS)
    assert text[1] == '"alice","/x/s","PASS",9.5,10,"",1.5,""'


def test_summary_csv_ends_with_the_leaderboard_speed_when_one_was_measured(tmp_path):
    dashboard.write_class(tmp_path, [dict(row("alice"), speed=1.25), row("bob")])
    lines = list(csv.reader((tmp_path / "summary.csv").open(newline="")))
    assert lines[0][-1] == "speed" and lines[1][-1] == "1.25" and lines[2][-1] == ""
    page = (tmp_path / "index.html").read_text()
    assert "data-key='speed'" in page and "<td class='num' data-v='1.25'>1.25</td>" in page


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
    dashboard.write_class(tmp_path, [row(safe, source="/c/javascript:alert(1)"),
                                  row("javascript:alert(1)", failed="<script>x</script>")],
                       meta={"date": "<b>today</b>", "settings": {"runs": "<i>3</i>"}})
    page = (tmp_path / "index.html").read_text()
    links = hrefs(page)
    assert [h for h in links if h.endswith("verdict.html")] == [f"./{safe}/verdict.html"]
    assert set(links) == {f"./{safe}/verdict.html", "gradescope_scores.csv", "summary.csv"}
    assert all(map(relative, links))
    # the page's own sorting script is its one script; the student's text is escaped
    assert page.count("<script") == 1 and "<script>x" not in page
    assert "&lt;script&gt;x" in page
    assert "<b>today" not in page and "&lt;b&gt;today" in page
    assert "runs=&lt;i&gt;3" in page


def test_console_lines_are_one_line_each():
    line = render.console_line(row("x\nalice: PASS 100/100\x1b[1A", failed="build\r\nok"))
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert line.startswith("x\\nalice: PASS 100/100\\x1b[1A: PASS 9.5/10 (failed: ")
    assert render.console_line(row("alice")) == "alice: PASS 9.5/10"


def test_summary_row_carries_the_source_and_the_scores():
    e = ev(build="pass", timing="fail")
    r = render.summary_row("alice", Path("/c/alice"), e, score.of(e, W))
    assert r == {"submission": "alice", "source": "/c/alice", "verdict": "FAIL", "score": 5,
                 "max_score": 9, "failed": "timing", "seconds": 1.0, "similarity": "",
                 "checks": {"build": {"title": "Build", "status": "pass", "points": 5,
                                      "max_points": 5},
                            "timing": {"title": "Timing", "status": "fail", "points": 0,
                                       "max_points": 4}}, "speed": None, "withheld": ""}
    assert list(r) == [*render.SUMMARY_FIELDS, "checks", "speed", "withheld"]


def test_the_leaderboard_is_the_concurrency_checks_speed_and_only_a_number():
    board = {"speed": 1.23456, "low": 1.0, "high": 1.5, "rounds": 11}
    e = ev(build="pass")
    e["checks"].append({"id": "concurrency", "title": "C", "status": "pass", "evidence": [],
                        "leaderboard": board})
    assert gradescope.gradescope(e, score.of(e, W))["leaderboard"] == [
        {"name": fmt.LEADERBOARD, "value": 1.23, "order": "desc"}]
    assert render.summary_row("a", Path("/c/a"), e, score.of(e, W))["speed"] == 1.23
    for bad in ("1.5", float("nan"), True, None):
        e["checks"][-1]["leaderboard"] = {**board, "speed": bad}
        assert "leaderboard" not in gradescope.gradescope(e, score.of(e, W)), bad
    e["checks"][-1] = "not a check"
    assert fmt.leaderboard_speed(e) is None


def _graded_main(**statuses) -> list:
    """A one-server lab's checks with the given statuses and a measured speed."""
    out = [{"id": cid, "title": cid, "status": st, "evidence": []}
           for cid, st in statuses.items()]
    for c in out:
        if c["id"] == "concurrency":
            c["leaderboard"] = {"speed": 1.12, "low": 1.0, "high": 1.3, "rounds": 11}
    return out


def test_a_speed_is_ranked_only_when_every_check_it_rests_on_passed(tmp_path):
    honest = _graded_main(design="pass", timing="pass", consistency="pass", concurrency="pass")
    concurrency.post_or_withhold(honest)
    assert fmt.leaderboard_speed({"checks": honest}) == 1.12
    assert fmt.leaderboard_withheld({"checks": honest}) == ""
    # a server that skips the kit's delay: fast, and its design and timing fail
    gamed = _graded_main(design="fail", timing="fail", consistency="pass", concurrency="pass",
                         robustness="fail")
    concurrency.post_or_withhold(gamed)
    e = {"checks": gamed}
    assert fmt.leaderboard_speed(e) is None
    assert "leaderboard" not in gradescope.gradescope(e, score.of(e, W))
    assert fmt.leaderboard_withheld(e) == "design FAIL, timing FAIL"   # robustness: no part
    con = next(c for c in gamed if c["id"] == "concurrency")
    assert con["leaderboard"]["speed"] == 1.12   # kept as evidence, not ranked
    assert "leaderboard: withheld" in con["evidence"][-1]
    # nothing unconfirmed is ranked; a check the course left out (--skip) withholds nothing
    unsure = _graded_main(design="undetermined", timing="pass", consistency="pass",
                          concurrency="pass")
    concurrency.post_or_withhold(unsure)
    assert fmt.leaderboard_withheld({"checks": unsure}) == "design UNDETERMINED"
    skipped = _graded_main(design="pass", timing="pass", consistency="undetermined",
                           concurrency="pass")
    skipped[2].update(not_run=True, left_out=True,
                      evidence=["not checked: the grading command left it out (--skip); "
                                "not scored"])
    concurrency.post_or_withhold(skipped)
    assert fmt.leaderboard_speed({"checks": skipped}) == 1.12
    # the class page says why an entry is withheld, in its Speed column
    evs = {n: {"checks": c, "seconds": 1.0} for n, c in (("honest", honest), ("gamed", gamed))}
    rows = [render.summary_row(n, Path(f"/c/{n}"), e, score.of(e, W)) for n, e in evs.items()]
    assert rows[1]["speed"] is None and rows[1]["withheld"] == "design FAIL, timing FAIL"
    dashboard.write_class(tmp_path, rows)
    page = (tmp_path / "index.html").read_text()
    assert "data-key='speed'" in page and "<td class='num' data-v='1.12'>1.12</td>" in page
    assert "withheld: design FAIL, timing FAIL</td>" in page


CHROMIUM = shutil.which("chromium")


def chromium_dom(profile: Path, page: Path) -> str:
    """The DOM headless Chromium builds from `page` (a file of its own profile)."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}"]
    return subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120).stdout


@pytest.mark.slow
@pytest.mark.chromium
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_index_html_in_headless_chromium_has_only_relative_links(tmp_path):
    sub = tmp_path / "class" / "javascript:alert(1)"
    sub.mkdir(parents=True)
    (name,) = names.assign([sub])
    out = tmp_path / "grades"
    out.mkdir()
    dashboard.write_class(out, [row(name, source=str(sub)), row("javascript:alert(1)")])
    dom = chromium_dom(tmp_path / "profile", out / "index.html")
    links = hrefs(dom)
    assert links, dom[:2000]
    assert all(map(relative, links)), links
    assert all("javascript" not in urlsplit(h).scheme for h in links)


# ---- pages that teach: what to fix, how the score was made ---------------------------------

CHECK_IDS = ("build", "binaries", "cmdline", "initial", "workload", "consistency", "idle",
             "speed", "robustness", "timing", "races", "design")
FULL_W = {"points": {"build": 5, "binaries": 5, "cmdline": 10, "initial": 5, "workload": 25,
                     "consistency": 20, "idle": 5, "speed": 10, "robustness": 5, "timing": 10,
                     "races": 0, "design": 0}, "thresholds": {}, "path": "/w/weights.toml"}


def check(cid, status, **more):
    return {"id": cid, "title": cid.title(), "status": status, "evidence": [f"{cid} said"],
            **more}


def teaching_ev(*checks, **top) -> dict:
    return {"config": {"runs": 3, "sizes": [10, 1000], "quick": True}, "seconds": 61.4,
            "checks": list(checks), **top}


@pytest.mark.parametrize("cid", CHECK_IDS)
def test_every_check_id_has_a_default_fix_shown_when_it_did_not_pass(cid):
    default = checks.BY_ID[cid].fix
    assert len(default) > 40
    for status in ("fail", "skip", "undetermined"):
        assert checks.fixes(check(cid, status)) == [default]
    assert checks.fixes(check(cid, "pass")) == []


def test_the_checks_own_fix_replaces_the_default_and_may_be_a_list():
    own = "your clock starts after pthread_mutex_lock: start it when the request has been read"
    assert checks.fixes(check("timing", "fail", fix=own)) == [own]
    assert checks.fixes(check("timing", "fail", fix=[own, "print with %e"])) == [
        own, "print with %e"]
    assert checks.fixes(check("timing", "fail", fix=[])) == [checks.BY_ID["timing"].fix]
    assert checks.fixes(check("timing", "pass", fix=own)) == []
    assert checks.fixes(check("unknown-id", "fail")) == []


def test_the_default_diagnoses_say_what_the_lab_asks():
    f = {c.id: c.fix for c in checks.CHECKS}
    assert "`make`" in f["build"] and "main1, main2, main3 and main4" in f["build"]
    assert "without htons" in f["cmdline"]
    assert '"String i: the initial value"' in f["initial"]
    assert "100 client threads x 10" in f["workload"] and "signal" in f["workload"]
    assert "whole read or write" in f["consistency"] and "interleaving" in f["consistency"]
    assert "accepting thread" in f["idle"] and "thread per connection" in f["idle"]
    assert "lock only the string it touches" in f["speed"] and "main4" in f["speed"]
    assert "read()'s return" in f["robustness"]
    assert "%e" in f["timing"] and "lock waiting included" in f["timing"]
    assert "mutex per string" in f["design"] and "read/write lock per string" in f["design"]


def failing_ev() -> dict:
    return teaching_ev(check("build", "pass"), check("idle", "fail"),
                       check("speed", "undetermined"), check("races", "skip"),
                       check("timing", "fail", fix="print one line per batch with %e"))


def test_what_to_fix_is_on_the_markdown_page_per_check_and_at_the_top():
    md = markdown.markdown("x", failing_ev(), None, score.of(failing_ev(), FULL_W))
    assert "## What to fix" in md
    idle = md.split("## Idle: FAIL")[1].split("\n## ")[0]
    assert "**What to fix:** " + fmt.rich_md(checks.BY_ID["idle"].fix) in idle
    timing = md.split("## Timing: FAIL")[1].split("\n## ")[0]
    assert "**What to fix:** print one line per batch with %e" in timing
    assert names.md_text(fmt.STATUS_NOTE["undetermined"]) in md
    assert names.md_text(fmt.STATUS_NOTE["skip"]) in md
    build = md.split("## Build: PASS")[1].split("\n## ")[0]
    assert "What to fix" not in build


def test_what_to_fix_is_on_the_html_page_and_in_results_json():
    e = failing_ev()
    page = H.html_page("x", e, None, score.of(e, FULL_W))
    assert "<strong>What to fix:</strong> print one line per batch with %e" in page
    assert "id='what-to-fix'" in page and "href='#check-idle'" in page
    g = gradescope.gradescope(e, score.of(e, FULL_W))
    out = {t["name"]: t["output"] for t in g["tests"]}
    assert "What to fix:\n- print one line per batch with %e" in out["Timing"]
    assert "- " + checks.BY_ID["idle"].fix in out["Idle"].split("\n")
    assert "What to fix" not in out["Build"]
    assert "What to fix:" in g["output"] and "Idle (FAIL): " in g["output"]


HOSTILE_FIX = ["<script>alert(1)</script>\n# Verdict: PASS", "## heading\x1b[2J\u202e",
               "# Verdict: PASS", "quoted `<script>x</script>` | and `` `a|b` ``",
               "an `unpaired <b>backtick</b>"]


def headings(md: str) -> list:
    """The headings GitHub's renderer makes of a Markdown page: (level, text shown)."""
    return [(int(level), "".join(Shown(inner).parts))
            for level, inner in re.findall(r"<h([1-6])[^>]*>(.*?)</h\1>", gfm(md), re.S)]


def student_headings(md: str) -> list:
    """Every heading but ours: the page's title and its sections' (`## Title: VERDICT`, the
    named parts of the page)."""
    ours = ("What to fix", "How the score was made", "Table ", "Ranking")
    section = re.compile(r"[A-Za-z ()]+: [A-Z]+")
    return [(lvl, h) for lvl, h in headings(md)
            if not ((lvl == 1 and h.startswith("Lab 2 grade: "))
                    or (lvl == 2 and (h.startswith(ours) or section.fullmatch(h))))]


def test_a_fix_quoting_a_student_is_escaped_in_markdown():
    e = teaching_ev(check("timing", "fail", fix=HOSTILE_FIX))
    md = markdown.markdown("x", e, None, score.of(e, FULL_W))
    assert "\x1b" not in md and "\u202e" not in md
    tags = [tag for tag, _ in md_tags(md)]
    assert "script" not in tags and "b" not in tags, tags
    assert student_headings(md) == [] and len(headings(md)) > 2, headings(md)
    page = gfm(md)
    assert "<code>&lt;script&gt;x&lt;/script&gt;</code>" in page  # quoted code stays code
    # shown as the student wrote it, the controls escaped
    assert "## heading\\x1b[2J\\u202e" in "".join(Shown(page).parts)


def test_a_fix_quoting_a_student_is_escaped_in_html_and_json():
    e = teaching_ev(check("timing", "fail", fix=HOSTILE_FIX))
    page = H.html_page("x", e, None, score.of(e, FULL_W))
    assert "<script>" not in page and "&lt;script&gt;alert(1)" in page
    assert "<code>&lt;script&gt;x&lt;/script&gt;</code>" in page
    assert "\x1b" not in page and "\u202e" not in page
    g = gradescope.gradescope(e, score.of(e, FULL_W))
    outputs = [g["output"], *(t["output"] for t in g["tests"])]
    for text in outputs:
        assert "\x1b" not in text and "\u202e" not in text
        assert not [ln for ln in text.split("\n") if ln.startswith(("# Verdict", "## head"))]
    assert "- <script>alert(1)</script>\\n# Verdict: PASS" in g["tests"][0]["output"]


def test_a_grader_record_with_markup_is_escaped():
    e = teaching_ev(check("build", "pass"),
                    grader={"version": "<script>v</script>", "date": "# today\n",
                            "weights": "/w/`x`.toml"})
    md = markdown.markdown("x", e, None, score.of(e, FULL_W))
    assert "script" not in [tag for tag, _ in md_tags(md)] and student_headings(md) == []
    assert "<script>" not in H.html_page("x", e, None, score.of(e, FULL_W))


def partial_ev(**top) -> dict:
    return teaching_ev(check("build", "fail", fraction=0.75),
                       check("workload", "fail", fraction=5 / 6),
                       check("speed", "undetermined"), check("robustness", "fail", fraction=5 / 7),
                       check("races", "skip"), check("idle", "pass"),
                       check("cmdline", "fail", fraction=0.75), **top)


def test_how_the_score_was_made_lists_weight_share_points_and_rule():
    rows = {r[0]: r[1:] for r in score.how_rows(score.of(partial_ev(), FULL_W))}
    assert rows["Build"] == ("FAIL", "5", "3/4 (75 %)", "3.75 / 5", checks.BY_ID["build"].partial)
    assert rows["Workload"][:4] == ("FAIL", "25", "5/6 (83 %)", "20.83 / 25")
    assert "(server, n) settings" in rows["Workload"][4]
    assert "each missing server costs its quarter" in rows["Workload"][4]
    assert rows["Robustness"][2:] == ("5/7 (71 %)", "3.57 / 5", checks.BY_ID["robustness"].partial)
    assert "probes" in rows["Robustness"][4] and "could not run costs nothing" in \
        rows["Robustness"][4]
    e = teaching_ev(check("design", "fail", fraction=2 / 3))
    design = score.how_rows(score.of(e, FULL_W))[0]
    assert design[3:] == ("2/3 (67 %)", "0 / 0", checks.BY_ID["design"].partial
                          + "; each missing server costs its quarter")
    assert rows["Speed"] == ("UNDETERMINED", "10", "not scored", "0 (not scored)",
                             "not scored: the grader could not tell")
    assert rows["Races"][2:] == ("0", "0 / 0", "skipped: earns nothing")
    assert rows["Idle"][2:] == ("1", "5 / 5", "all or nothing")
    assert rows["Cmdline"][2:] == ("3/4 (75 %)", "7.5 / 10", "all or nothing for the servers "
                                   "present; each missing server costs its quarter")


def test_the_how_section_is_on_both_pages_with_the_verdict_rule_and_weights_file():
    e = partial_ev()
    md = markdown.markdown("x", e, None, score.of(e, FULL_W))
    how = md.split("## How the score was made")[1]
    assert "| Robustness | FAIL | 5 | 5/7 (71 %) | 3.57 / 5 |" in how
    assert "Not scored (undetermined): Speed; their 10 points are left out" in how
    assert names.md_text(score.VERDICT_RULE) in how
    assert "Verdict: FAIL because build, workload, cmdline failed (and robustness, a " \
           "finding)" in how
    assert "Weights: `/w/weights.toml`" in how
    page = H.html_page("x", e, None, score.of(e, FULL_W))
    assert "<h2 id='how'>How the score was made</h2>" in page and "href='#how'" in page
    assert "<td class='num'>5/7 (71 %)</td><td class='num'>3.57 / 5</td>" in page
    assert html.escape(score.VERDICT_RULE) in page


def test_the_weights_file_comes_from_the_grader_record_else_the_loaded_weights():
    e = partial_ev(grader={"version": "1.4.2", "date": "2026-11-25 10:00 UTC",
                           "weights": "/course/w.toml"})
    assert fmt.weights_file(e, FULL_W) == "/course/w.toml"
    assert fmt.weights_file(partial_ev(), FULL_W) == "/w/weights.toml"
    assert fmt.weights_file(partial_ev(), W) == "not recorded"
    assert score.load_weights(score.DEFAULT_WEIGHTS)["path"] == str(score.DEFAULT_WEIGHTS)


def test_undetermined_is_not_scored_and_only_findings_give_pass_with_findings():
    e = teaching_ev(check("build", "pass"), check("speed", "undetermined"),
                    check("robustness", "fail", fraction=0.5), check("races", "fail"))
    assert score.verdict(e) == ("PASS WITH FINDINGS", ["robustness", "races"])
    assert score.totals(score.score(e, FULL_W)) == (7.5, 10)
    assert score.verdict_reason(e) == "PASS WITH FINDINGS because only robustness, races failed"
    e["checks"][1]["status"] = "fail"
    assert score.verdict_reason(e) == ("FAIL because speed failed (and robustness, races, a "
                                        "finding)")
    assert score.verdict_reason(teaching_ev(check("build", "undetermined"))) == \
        "PASS because no check failed"


def test_a_check_the_grader_did_not_run_has_no_fix_and_says_it_was_left_out():
    left = check("design", "undetermined", not_run=True,
                 evidence=["not checked: the grading command left it out (--skip); not scored"])
    e = teaching_ev(check("build", "pass"), left, check("speed", "undetermined"))
    e["config"]["skip"] = ["design", "<b>x</b>", "probe"]
    assert checks.fixes(left) == [] and checks.fixes(e["checks"][2])  # speed: measured
    assert fmt.status_note(left) == fmt.NOT_RUN_NOTE
    assert score.totals(score.score(e, FULL_W)) == (5, 5)
    sc = score.of(e, FULL_W)
    page, md = H.html_page("s", e, None, sc), markdown.markdown("s", e, None, sc)
    # only the ids the grader knows, in its order: never a word the evidence brought along
    assert "left out: design, probe" in md and "left out: design, probe" in page
    assert "&lt;b&gt;" not in page and "<b>x" not in page
    assert fmt.NOT_RUN_NOTE in md and "What to fix" in md  # speed's, not design's
    assert "Design**" not in md.split("## What to fix")[1].split("##")[0]
    g = gradescope.gradescope(e, score.of(e, FULL_W))
    fix = g["output"].split("What to fix:")[1].split("How the score was made")[0]
    assert "Design" not in fix and "Speed" in fix
    assert "- Design: UNDETERMINED, weight 0, not scored: the grader did not run it" in g["output"]
    test = next(t for t in g["tests"] if t["name"].startswith("Design"))
    assert test["output"].startswith("UNDETERMINED: not scored (0 of 0 points): the grader did "
                                     "not run it") and "What to fix" not in test["output"]


@pytest.mark.parametrize("fraction,points", [(1.5, 5), (-1, 0), ("0.5", 0), (float("nan"), 0),
                                             (True, 0), (0.25, 1.25)])
def test_a_fraction_earns_between_none_and_all_of_the_points(fraction, points):
    e = teaching_ev(check("build", "fail", fraction=fraction))
    assert score.score(e, FULL_W)[0]["points"] == points


def test_settings_date_and_grader_version_are_on_every_page():
    e = partial_ev(grader={"version": "1.4.2", "date": "2026-11-25 10:00 UTC",
                           "weights": "/course/w.toml"})
    settings = "3 kit runs per server and n = 10, 1000 (quick)"
    md = markdown.markdown("x", e, None, score.of(e, FULL_W))
    page = H.html_page("x", e, None, score.of(e, FULL_W))
    out = gradescope.gradescope(e, score.of(e, FULL_W))["output"]
    for text, esc in ((md, names.md_text), (page, lambda s: s), (out, lambda s: s)):
        assert settings in text
        assert esc("graded 2026-11-25 10:00 UTC by the lockbench grader 1.4.2") in text
        assert esc("/course/w.toml") in text
    bare = markdown.markdown("x", partial_ev(), None, score.of(partial_ev(), FULL_W))
    assert names.md_text("the lockbench grader (version and date not recorded); weights "
                            "from /w/weights.toml") in bare
    e["grader"] = {"version": "1.4.2"}
    assert fmt.grader_text(e, FULL_W).startswith("the lockbench grader 1.4.2 (date not")


def test_gradescope_statuses_max_scores_and_why_a_check_was_not_scored():
    e = partial_ev()
    g = gradescope.gradescope(e, score.of(e, FULL_W))
    tests = {t["name"]: t for t in g["tests"]}
    assert {t["status"] for t in g["tests"]} <= {"passed", "failed"}
    speed, races = tests["Speed"], tests["Races"]
    assert (speed["score"], speed["max_score"], speed["status"]) == (0, 0, "passed")
    assert speed["output"].startswith("UNDETERMINED: not scored (0 of 0 points)")
    assert fmt.STATUS_NOTE["undetermined"] in speed["output"]
    assert (races["score"], races["max_score"], races["status"]) == (0, 0, "failed")
    assert fmt.STATUS_NOTE["skip"] in races["output"]
    e = teaching_ev(check("build", "skip"))
    skipped_build = gradescope.gradescope(e, score.of(e, FULL_W))["tests"][0]
    assert (skipped_build["score"], skipped_build["max_score"]) == (0, 5)
    assert tests["Robustness"]["output"].startswith(
        "FAIL: 3.57 of 5 points; counted: the share of the probes")
    assert g["execution_time"] == 61 and (g["score"], g["max_score"]) == (40.65, 50)


def test_gradescope_top_level_output_gives_the_verdict_and_how_it_was_made():
    out = gradescope.gradescope(partial_ev(), score.of(partial_ev(), FULL_W))["output"].split("\n")
    assert out[0] == "Verdict: FAIL; score 40.65 / 50"
    assert out[1].startswith("Why: FAIL because build, workload, cmdline failed")
    assert "- Robustness: FAIL, 5 x 5/7 (71 %) = 3.57 / 5; the share of the probes the " \
           "server survived, answering the next request (a probe that could not run costs " \
           "nothing)" in out
    assert f"Verdict rule: {score.VERDICT_RULE}" in out


@pytest.mark.parametrize("seconds", [None, float("inf"), "61", True])
def test_execution_time_only_for_a_number_of_seconds(seconds):
    e = partial_ev()
    if seconds is None:
        del e["seconds"]
    else:
        e["seconds"] = seconds
    assert "execution_time" not in gradescope.gradescope(e, score.of(e, FULL_W))


def class_page(tmp_path, rows, meta=None) -> str:
    dashboard.write_class(tmp_path, rows, meta)
    return (tmp_path / "index.html").read_text()


def test_index_shows_one_maximum_score_for_everyone_with_the_settings_and_date(tmp_path):
    page = class_page(tmp_path, [row("alice"), row("bob")],
                      {"date": "2026-11-25 10:00 UTC",
                       "settings": {"runs": 3, "sizes": [10, 1000], "quick": True,
                                    "race": False},
                       "grader": {"version": "1.4.2", "weights": "/course/w.toml"}})
    assert "Maximum score: 10, the same for every submission." in page
    assert page.count("<td>9.5 / 10</td>") == 2 and ">Score / max</button></th>" in page
    assert ("Graded 2026-11-25 10:00 UTC; settings: 3 kit runs per server and n = 10, 1000 "
            "(quick); race detector off; grader: lockbench 1.4.2; weights: /course/w.toml"
            ) in page
    assert "not the same for every submission" not in page


def test_index_notes_when_the_maximum_scores_differ(tmp_path):
    other = {**row("bob"), "max_score": 12}
    page = class_page(tmp_path, [row("alice"), other])
    assert "Maximum score:" not in page
    assert "the maximum score is not the same for every submission (10, 12)" in page
    assert "<td>9.5 / 12</td>" in page and "<td>9.5 / 10</td>" in page


class Sections(HTMLParser):
    """The text of a page per <h2 id> section (what a reader sees), and the tags built."""

    def __init__(self):
        super().__init__()
        self.section, self.text, self.tags = "", {"": []}, []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "h2":
            self.section = dict(attrs).get("id") or "h2"
            self.text.setdefault(self.section, [])

    def handle_data(self, data):
        self.text[self.section].append(data)


@pytest.mark.slow
@pytest.mark.chromium
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_verdict_html_in_headless_chromium_shows_what_to_fix_under_the_failed_check(tmp_path):
    e = teaching_ev(check("build", "pass"), check("idle", "fail"),
                    check("timing", "fail", fix=["start the clock when the request has been "
                                                 "read", "<script>alert(1)</script>"]))
    render.write_pages(tmp_path, "x", e, None, FULL_W)
    dom = chromium_dom(tmp_path / "profile", tmp_path / "verdict.html")
    page = Sections()
    page.feed(dom)
    text = {k: " ".join(" ".join(v).split()) for k, v in page.text.items()}
    assert "check-idle" in text, dom[:2000]
    assert "What to fix: " + checks.BY_ID["idle"].fix in text["check-idle"]
    assert ("What to fix: start the clock when the request has been read "
            "<script>alert(1)</script>") in text["check-timing"]
    assert "What to fix" not in text["check-build"]
    assert "Idle (FAIL): do not read in the accepting thread" in text["what-to-fix"]
    assert "How it is counted" in text["how"] and "script" not in page.tags


def test_visibility_from_the_weights_reaches_results_json(tmp_path):
    w = tmp_path / "w.toml"
    w.write_text('[points]\nbuild = 5\ntiming = 4\n[visibility]\ntiming = "after_due_date"\n'
                 'results = "after_published"\n')
    weights = score.load_weights(w)
    e = ev(build="pass", timing="fail")
    res = gradescope.gradescope(e, score.of(e, weights))
    vis = {t["name"]: t["visibility"] for t in res["tests"]}
    assert vis == {"Build": "visible", "Timing": "after_due_date"}
    assert res["visibility"] == "after_published"


def test_an_unknown_visibility_is_refused_with_one_line(tmp_path):
    import pytest
    w = tmp_path / "w.toml"
    w.write_text('[points]\nbuild = 5\n[visibility]\nbuild = "sometimes"\n')
    with pytest.raises(score.WeightsError, match="visibility.build must be one of"):
        score.load_weights(w)


def test_a_page_reads_raw_without_backslashes_before_ordinary_punctuation():
    for e in (failing_ev(), partial_ev()):
        md = markdown.markdown("x", e, None, score.of(e, FULL_W))
        assert not re.findall(r"\\[-:/.,()';%]", md), re.findall(r".{20}\\[-:/.,()';%].{20}", md)


def test_a_version_table_changes_its_points_and_no_other_versions(tmp_path):
    w = tmp_path / "w.toml"
    w.write_text('[points]\ndesign = 10\nbuild = 5\n[lab."2024+".points]\ndesign = 20\n')
    weights = score.load_weights(w)
    e = ev(design="pass", build="pass")
    for lab, design_max in (("2024+", 20), ("2019-2023", 10), (None, 10)):
        if lab:
            e["lab"] = {"name": lab}
        assert {c["id"]: c["max_points"] for c in score.score(e, weights)} == \
            {"design": design_max, "build": 5}, lab
        assert f"| {design_max:g} |" in markdown.markdown("x", e, None, score.of(e, weights))


def test_the_shipped_weights_give_main_any_of_the_four_designs():
    weights = score.load_weights(score.DEFAULT_WEIGHTS)
    for one in ("2024+", "2018"):
        assert tuple(weights["labs"][one]["designs"]) == labs.ANY_DESIGN
    assert "2019-2023" not in weights["labs"]


@pytest.mark.parametrize("table, words", [
    ('[lab."2017"]\ndesigns = ["one mutex"]\n', "lab.'2017' is not a version of the lab"),
    ('[lab."2019-2023"]\ndesigns = ["one mutex"]\n', "has the design of its number"),
    ('[lab."2024+"]\ndesigns = ["a spinlock"]\n', "designs must list some of"),
    ('[lab."2024+"]\ndesigns = []\n', "designs must list some of"),
    ('[lab."2024+"]\nweights = 3\n', "may hold only points and designs"),
    ('[lab."2024+".points]\ndesign = -1\n', "lab.'2024+'.points.design must be a number"),
    ('[lab."2024+".points]\ndesign = true\n', "must be a number >= 0"),
])
def test_a_bad_version_table_is_refused_with_one_line(tmp_path, table, words):
    w = tmp_path / "w.toml"
    w.write_text("[points]\nbuild = 5\n" + table)
    with pytest.raises(score.WeightsError, match=re.escape(words)):
        score.load_weights(w)
