"""render: verdict pages and Gradescope JSON from evidence (pure)."""

import json

from analysis.grade import render

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
