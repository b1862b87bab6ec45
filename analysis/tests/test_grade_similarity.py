"""similarity: pairwise code similarity of submissions with the real copydetect.

The fixtures in fixtures/similarity are small lab 2 servers written for these tests: kit/
(the course's common.h), alice (thread per connection), bob_copy (alice's code renamed,
reordered, recommented and reformatted), carol (an independent thread-pool server), dave and
erin (two small different servers that both carry the kit's common.h verbatim). A hostile
submission is built in a temporary folder from alice's code.
"""

import csv
import io
import os
import re
from itertools import combinations
from pathlib import Path

import pytest

from analysis.grade.pages import similarity as report
from analysis.grade.similarity import compare as S
from analysis.grade.trust import sources as SRC

FIX = Path(__file__).parent / "fixtures" / "similarity"
KIT = FIX / "kit"
HONEST = ("alice", "bob_copy", "carol", "dave", "erin")
EVIL = '=HYPERLINK("http://evil.example/x","open")'
SCRIPT_FILE = "<script>alert(1)</script>.c"
PASSWD_MARK = "root:x:0:"


def _hostile(root: Path) -> Path:
    """A submission that copies alice under a script-like file name and carries every trap:
    markup in code, invalid UTF-8, links out of the folder, a FIFO, a build folder."""
    sub = root / "mallory"
    (sub / "<script>alert(1)<").mkdir(parents=True)
    code = (FIX / "alice" / "server.c").read_text()
    at = code.index("static void *connection_thread")
    (sub / SCRIPT_FILE).write_text(code[:at] + "/* </pre><script>alert(2)</script> */\n"
                                   + code[at:])
    (sub / "notes.h").write_bytes(b"static int x = 1; /* \xff\xfe\xc3( bad bytes */\n")
    (sub / "junk.c").write_bytes(bytes(range(256)) * 2)
    (sub / "rtl\u202egnp.c").write_text("int rtl;\n")
    (sub / "leak.c").symlink_to("/etc/passwd")
    (sub / "etc").symlink_to("/etc")
    os.mkfifo(sub / "pipe.c")
    (sub / "build").mkdir()
    (sub / "build" / "generated.c").write_text("int generated_by_cmake = 1;\n")
    return sub


def _empty(root: Path) -> Path:
    sub = root / "empty"
    sub.mkdir()
    (sub / "README.md").write_text("I did not finish.\n")
    (sub / "a.out").write_bytes(b"\x7fELF")
    return sub


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One comparison of everything with the kit as boilerplate, and its written report."""
    root = tmp_path_factory.mktemp("similarity")
    subs = {n: FIX / n for n in HONEST}
    subs[EVIL] = _hostile(root)
    subs["empty"] = _empty(root)
    result = S.compare(subs, boilerplate=KIT)
    out = root / "out"
    report.write(out, result)
    return result, out


def pair(result, a, b):
    found = [p for p in result.pairs if {p.a, p.b} == {a, b}]
    assert len(found) == 1, (a, b, result.pairs)
    return found[0]


def html_of(world) -> str:
    return (world[1] / "similarity.html").read_text(encoding="utf-8")


# ---- who copied ----------------------------------------------------------------------------

def test_renamed_reordered_copy_is_flagged(world):
    result, _ = world
    p = pair(result, "alice", "bob_copy")
    assert p.flagged
    assert min(p.score_a, p.score_b) >= 0.8, p
    assert p.tokens_overlap >= 10 * S.MIN_OVERLAP
    assert "bob_copy" in S.flagged(result)["alice"]
    assert result.per_submission["alice"].partner in {"bob_copy", EVIL}


def test_independent_solution_is_not_flagged(world):
    result, _ = world
    for other in ("alice", "bob_copy"):
        p = pair(result, other, "carol")
        assert not p.flagged
        assert p.score < 0.25, p
    assert "carol" not in S.flagged(result)


def test_kit_only_sharing_is_not_flagged_with_boilerplate(world):
    result, _ = world
    with_kit = pair(result, "dave", "erin")
    without = pair(S.compare({"dave": FIX / "dave", "erin": FIX / "erin"}), "dave", "erin")
    assert not with_kit.flagged and with_kit.score < 0.35, with_kit
    # The kit's common.h alone makes them look copied: leaving it out is what clears them.
    assert without.flagged and without.score >= S.DEFAULT_THRESHOLD + 0.15, without
    assert without.score > with_kit.score + 0.3
    assert "dave" not in S.flagged(result) and "erin" not in S.flagged(result)


def test_boilerplate_folder_is_named_in_the_report(world):
    result, _ = world
    assert "common.h" in result.boilerplate
    assert "common.h" in html_of(world)


def test_one_pair_per_unordered_pair_most_similar_first(world):
    result, _ = world
    compared = [n for n in result.per_submission if n != "empty"]
    assert sorted(tuple(sorted((p.a, p.b))) for p in result.pairs) == sorted(
        tuple(sorted(c)) for c in combinations(compared, 2))
    scores = [p.score for p in result.pairs]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for p in result.pairs for s in (p.score_a, p.score_b))
    assert result.threshold == S.DEFAULT_THRESHOLD


def test_per_submission_and_flag_column(world):
    result, _ = world
    assert set(result.per_submission) == {*HONEST, EVIL, "empty"}
    assert result.per_submission["empty"] == S.Best(0.0, None)
    assert result.per_submission["carol"].score < 0.4
    flags = S.flagged(result)
    assert set(flags) == {"alice", "bob_copy", EVIL}
    assert re.search(r"alice \(\d+%\)", flags["bob_copy"])


def test_threshold_is_a_parameter():
    subs = {"alice": FIX / "alice", "bob_copy": FIX / "bob_copy"}
    assert not S.compare(subs, threshold=1.01).pairs[0].flagged
    assert S.compare(subs, threshold=0.1).pairs[0].flagged


# ---- hostile submissions -------------------------------------------------------------------

def test_submission_without_sources_gets_a_note(world):
    result, out = world
    assert any(n.startswith("empty: no C/C++ sources") for n in result.notes), result.notes
    assert all("empty" not in (p.a, p.b) for p in result.pairs)
    assert "empty: no C/C++ sources" in html_of(world)


def test_links_fifos_and_build_outputs_are_not_read(world):
    result, out = world
    paths = {s.path for s in result.sources[EVIL]}
    assert SCRIPT_FILE in paths and "notes.h" in paths
    assert not paths & {"leak.c", "pipe.c", "build/generated.c"}
    assert not any(p.startswith("etc/") for p in paths)
    for name in ("similarity.html", "similarity.csv"):
        assert PASSWD_MARK not in (out / name).read_text(encoding="utf-8")
    notes = " | ".join(result.notes)
    assert "symbolic links not followed: 2" in notes
    assert "special files (FIFOs, devices, sockets) not read: 1" in notes


def test_invalid_utf8_is_replaced_not_fatal(world):
    result, out = world
    text = {s.path: s.text for s in result.sources[EVIL]}
    assert "\ufffd" in text["notes.h"] and "\ufffd" in text["junk.c"]
    (out / "similarity.html").read_bytes().decode("utf-8")  # strictly valid UTF-8


def test_html_escapes_file_names_and_code(world):
    page = html_of(world)
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.c" in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(2)" in page
    assert "\u202e" not in page and "rtl\\u202egnp.c" in page
    assert "&lt;" in page and "=HYPERLINK(&quot;http://evil.example/x&quot;" in page


ALLOWED_TAGS = {"!doctype", "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3",
                "p", "table", "tr", "th", "td", "a", "ul", "li", "div", "details", "summary",
                "pre", "mark"}


def test_html_is_self_contained(world):
    page = html_of(world)
    tags = re.findall(r"<\s*(/?)\s*([!A-Za-z][A-Za-z0-9]*)([^>]*)>", page)
    assert {t[1].lower() for t in tags} <= ALLOWED_TAGS
    attrs = " ".join(t[2] for t in tags)
    assert not re.search(r"\bsrc\s*=|https?:|//|url\(|@import", attrs, re.IGNORECASE), attrs
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', page))
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    assert "url(" not in style and "@import" not in style
    assert "default-src 'none'" in page


def test_html_highlights_the_copied_code_side_by_side(world):
    page = html_of(world)
    section = page.split('id="pair-')[1]  # the most similar pair
    assert "alice" in section.split("</h2>")[0]
    marked = "".join(re.findall(r"<mark>(.*?)</mark>", page, re.S))
    assert page.count("<mark>") == page.count("</mark>") > 10
    for line in ("pthread_attr_setdetachstate", "getContent(", "setsockopt"):
        assert line in marked, line
    assert 'class="pair"' in page and page.count('class="side"') >= 2


def test_html_stays_bounded(world, monkeypatch):
    result, out = world
    monkeypatch.setattr(report, "SHOWN_PAIRS", 1)
    monkeypatch.setattr(report, "SHOWN_CHARS", 300)
    report.write(out / "small", result)
    page = (out / "small" / "similarity.html").read_text(encoding="utf-8")
    assert page.count('id="pair-') == 1
    assert "Only the first 1 flagged pairs" in page
    assert "[cut: the " in page


def test_csv_rows_quoted_and_formulas_neutralised(world):
    result, out = world
    raw = (out / "similarity.csv").read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(raw)))
    assert rows[0] == ["a", "b", "score_a", "score_b", "flagged", "tokens_overlap"]
    assert len(rows) == 1 + len(result.pairs)
    evil = [c for r in rows[1:] for c in r[:2] if "HYPERLINK" in c]
    assert evil and all(c == "'" + EVIL for c in evil)
    assert not re.search(r'(^|,)"?[=+\-@\t\r]', raw, re.MULTILINE)
    for line in raw.splitlines():
        a_b_flag = re.fullmatch(r'"[^"]*(""[^"]*)*","[^"]*(""[^"]*)*",[0-9.]+,[0-9.]+,'
                                r'"(yes|no)",\d+', line)
        assert a_b_flag or line.startswith('"a"'), line
    top = rows[1]
    assert {top[0], top[1]} <= {"alice", "bob_copy", "'" + EVIL} and top[4] == "yes"


def test_big_files_are_cut_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr(SRC, "FILE_CAP", 4096)
    monkeypatch.setattr(SRC, "SUBMISSION_CAP", 6000)
    sub = tmp_path / "huge"
    sub.mkdir()
    (sub / "a.c").write_text("int a_variable = 1;\n" * 1000)
    (sub / "b.c").write_text("int b_variable = 2;\n" * 1000)
    (sub / "c.c").write_text("int c_variable = 3;\n")
    result = S.compare({"huge": sub, "alice": FIX / "alice"})
    assert sum(len(s.text) for s in result.sources["huge"]) == 6000
    notes = " | ".join(result.notes)
    assert "a.c cut: only the first 4096 of its 20000 bytes read" in notes
    assert "b.c cut: only the first 1904 of its 20000 bytes read" in notes
    assert "sources past the caps not read: 1" in notes


def test_no_or_one_submission(tmp_path):
    for subs in ({}, {"alice": FIX / "alice"}):
        result = S.compare(subs)
        assert result.pairs == [] and S.flagged(result) == {}
        report.write(tmp_path / str(len(subs)), result)
        assert (tmp_path / str(len(subs)) / "similarity.csv").read_text().count("\n") == 1


def test_missing_folder_is_a_note(tmp_path):
    result = S.compare({"ghost": tmp_path / "nowhere", "alice": FIX / "alice"})
    assert any(n.startswith("ghost: not a readable folder") for n in result.notes)
    assert result.pairs == []


# ---- bounds: a source the tokenizer is slow on ---------------------------------------------

def tokenizer_bomb(root: Path, name: str = "bomb") -> Path:
    """A submission whose main.c Pygments' C lexer takes minutes on ("int", 64 KiB of
    blanks, "f("), well under the size caps."""
    d = root / name
    d.mkdir()
    (d / "main.c").write_text("int" + " " * (64 << 10) + "f(\n")
    return d


def test_a_submission_the_tokenizer_is_slow_on_is_named_and_the_rest_compared(tmp_path):
    subs = {"bomb": tokenizer_bomb(tmp_path), **{n: FIX / n for n in ("alice", "bob_copy")}}
    result = S.compare(subs, boilerplate=KIT, limits=S.Limits(per_submission_s=2))
    assert "bomb: not fingerprinted within 2 s (a file the tokenizer is slow on?): compared " \
           "with no one" in result.notes, result.notes
    assert [(p.a, p.b) for p in result.pairs] == [("alice", "bob_copy")]
    assert result.pairs[0].flagged and result.per_submission["bomb"].partner is None


def test_the_phase_limit_leaves_out_whoever_it_did_not_reach(tmp_path):
    subs = {"bomb": tokenizer_bomb(tmp_path), "alice": FIX / "alice"}
    result = S.compare(subs, limits=S.Limits(per_submission_s=30, phase_s=1))
    assert "bomb: not fingerprinted within 1 s (a file the tokenizer is slow on?): compared " \
           "with no one" in result.notes, result.notes
    assert "alice: not fingerprinted: the phase's 1 s were up; compared with no one" \
        in result.notes, result.notes
    assert result.pairs == []


def test_a_file_over_the_tokenise_cap_is_left_out_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "TOKENISE_CAP", 1024)
    d = tmp_path / "big"
    d.mkdir()
    (d / "huge.c").write_text("int x;\n" * 1000)
    (d / "main.c").write_text("int main(void) { return 0; }\n")
    result = S.compare({"big": d, "carol": FIX / "carol"})
    assert "big: huge.c left out: 7000 bytes, over the 1 KiB a file may have to be compared" \
        in result.notes, result.notes
