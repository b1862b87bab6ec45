"""names: output folder names and shown text from hostile submissions (pure)."""

import hashlib
import re
import string
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.grade.trust import names as N
from analysis.tests.helpers import Shown, gfm

# Paths that exist nowhere: Path.resolve() then only makes them absolute.
ROOT = Path("/nonexistent-lockbench-names")
HIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def paths(*rel) -> list:
    return [ROOT / r for r in rel]


# ---- assign: collisions, reserved names, stability ---------------------------------------

def test_colliding_folder_names_get_distinct_names():
    got = N.assign(paths("a/alice", "b/alice", "c/alice-2"))
    assert len(set(got)) == 3, got
    assert got[2] == "alice-2"
    assert all(re.fullmatch(r"alice-[0-9a-f]{6}", n) for n in got[:2]), got


def test_names_differing_in_case_or_only_before_sanitising_are_kept_apart():
    got = N.assign(paths("a/Alice", "b/alice", "c/a b", "d/a_b", "e/a:b"))
    assert len({n.lower() for n in got}) == 5, got


@pytest.mark.parametrize("name", ["reference", "Reference", "REFERENCE", "index", "summary",
                                  "index.html", "Index.HTML", "summary.csv", "names.csv",
                                  ".hidden", ".", "..", ".git"])
def test_reserved_names_never_come_out_bare(name):
    (got,) = N.assign([ROOT / "class" / name])
    assert got.lower() not in N.RESERVED and not got.startswith(".") and got != name
    assert N.is_safe(got)


def test_an_empty_submission_named_reference_keeps_off_the_reference_folder(tmp_path):
    (tmp_path / "reference").mkdir()
    (got,) = N.assign([tmp_path / "reference"])
    assert got != "reference" and got.startswith("reference-")


def test_taken_names_are_avoided_case_insensitively():
    assert N.assign(paths("a/alice"), taken={"ALICE"})[0] != "alice"


def test_the_suffix_is_a_hash_of_the_resolved_path_the_same_in_every_run():
    p = ROOT / "a" / "alice"
    want = "alice-" + hashlib.sha256(str(p).encode()).hexdigest()[:6]
    assert N.assign([p, ROOT / "b" / "alice"])[0] == want
    assert N.assign([ROOT / "b" / ".." / "a" / "alice", ROOT / "z" / "alice"])[0] == want


def test_unsafe_characters_are_replaced_and_the_length_is_bounded():
    got = N.assign(paths("x/javascript:alert(1)", "x/a\nalice: PASS", "x/-rf", "x/" + "é" * 99,
                         "x/=HYPERLINK(\"http:\\\\x\",\"y\")", "x/\u202egpj.exe"))
    for n in got:
        assert N.is_safe(n) and len(n) <= N.MAX_LEN and n[0] not in ".-", n


def test_a_folder_named_like_another_ones_suffixed_name_does_not_displace_it():
    twins = paths("a/alice", "b/alice")
    want = N.assign(twins)
    got = N.assign([*twins, ROOT / "c" / want[0], ROOT / "d" / want[1].upper()])
    assert got[:2] == want and len({n.lower() for n in got}) == 4, got


def test_names_no_file_system_could_hold_still_get_names():
    got = N.assign(paths("a/\ud800", "a/x\0y", "a/\udcff"))
    assert all(N.is_safe(n) for n in got) and len(set(got)) == 3


def test_a_folder_given_twice_gets_two_names():
    got = N.assign(paths("a/alice", "a/alice"))
    assert len(set(got)) == 2


def test_the_root_and_the_working_folder_get_names():
    got = N.assign([Path("/"), Path(".")])
    assert all(N.is_safe(n) for n in got) and len(set(got)) == 2


# Folder names a student could pick: printable and hostile characters alike ('/' and NUL
# cannot be in a file name).
NAME_CHARS = st.one_of(st.sampled_from(list("aAbB_-.` :|=\n\r\x1b\u202e\u2028é")),
                       st.characters(blacklist_characters="/\0"))
folder = st.text(NAME_CHARS, min_size=1, max_size=70).filter(lambda s: s not in (".", ".."))
member = st.tuples(st.sampled_from(["a", "b", "c", "a/b"]), folder)
members = st.lists(member, max_size=8, unique=True)


def as_paths(ms) -> list:
    return [ROOT / d / f for d, f in ms]


@given(members)
def test_assign_gives_distinct_safe_unreserved_names(ms):
    got = N.assign(as_paths(ms))
    assert len({n.lower() for n in got}) == len(got)
    for n in got:
        assert N.is_safe(n) and set(n) <= set(string.ascii_letters + string.digits + "._-")
        assert n.lower() not in N.RESERVED and not n.startswith((".", "-")) and n


@given(members, st.randoms(use_true_random=False))
def test_assign_does_not_depend_on_the_order(ms, rnd):
    ps = as_paths(ms)
    shuffled = list(ps)
    rnd.shuffle(shuffled)
    by_path = dict(zip(ps, N.assign(ps)))
    assert [by_path[p] for p in shuffled] == N.assign(shuffled)


@given(members, members)
def test_adding_other_submissions_changes_a_name_only_to_its_own_suffixed_form(ms, more):
    ps = as_paths(ms)
    extra = [p for p in as_paths(more) if p not in ps]
    alone = N.assign(ps)
    together = N.assign(ps + extra)[:len(ps)]
    for p, a, t in zip(ps, alone, together):
        # The suffixed form: what the name becomes beside a folder of the same name.
        twin = N.assign([p, ROOT / "twin-of" / p.name])[0]
        assert t in (a, twin), (p, a, t, twin)
        if t != a:  # then one of the others alone has the same effect
            assert any(N.assign([p, q])[0] == t for q in extra), (p, a, t)


# ---- console --------------------------------------------------------------------------

def test_a_newline_in_a_name_cannot_print_a_second_line():
    line = N.console("x\nalice: PASS 100/100")
    assert "\n" not in line and line == "x\\nalice: PASS 100/100"


@pytest.mark.parametrize("ch,shown", [("\r", "\\r"), ("\x1b", "\\x1b"), ("\x7f", "\\x7f"),
                                      ("\x85", "\\x85"), ("\x9b", "\\x9b"), ("\u2028", "\\u2028"),
                                      ("\u2029", "\\u2029"), ("\u202a", "\\u202a"),
                                      ("\u202e", "\\u202e"), ("\u2066", "\\u2066"),
                                      ("\u2069", "\\u2069"), ("\t", "\\t"), ("\udcff", "\\udcff"),
                                      ("\\", "\\\\")])
def test_console_escapes_controls_separators_and_bidi_overrides(ch, shown):
    assert N.console(f"a{ch}b") == f"a{shown}b"


@given(st.text(st.one_of(st.characters(), st.sampled_from(list("\n\r\x1b\x85\u2028\u202e\\")))))
def test_console_gives_one_line_without_control_characters(text):
    line = N.console(text)
    assert not any(unicodedata.category(c) in HIDDEN for c in line)
    assert len(line.splitlines()) <= 1
    line.encode("utf-8")  # printable on a UTF-8 terminal: no lone surrogates


@given(st.text(), st.text())
def test_console_keeps_different_texts_apart(a, b):
    if a != b:
        assert N.console(a) != N.console(b)


# ---- CSV cells ----------------------------------------------------------------------------

@pytest.mark.parametrize("cell", ['=HYPERLINK("http://x","y")', "+1", "-1+2", "@SUM(A1)",
                                  "\t=1", "\r=1", "\uff1d1+1"])
def test_formula_starts_are_neutralised(cell):
    assert N.csv_cell(cell) == "'" + cell


@pytest.mark.parametrize("value", [3, -2.5, 0, "alice", "a=b", "", "'quoted"])
def test_numbers_and_plain_text_are_left_alone(value):
    assert N.csv_cell(value) == value


# ---- Markdown -------------------------------------------------------------------------

def code_span_content(md: str) -> str | None:
    """The text CommonMark shows for `md` when it is exactly one code span, else None."""
    m = re.fullmatch(r"(`+)(?!`)(.+?)(?<!`)\1", md, re.DOTALL)
    if not m or len(m.group(1)) in [len(r) for r in re.findall(r"`+", m.group(2))]:
        return None  # not a span, or one that ends at the first run as long as its fence
    s = m.group(2)
    if len(s) >= 2 and s[0] == " " and s[-1] == " " and s.strip(" "):
        s = s[1:-1]
    return s


@pytest.mark.parametrize("text", ["<h1>Verdict: PASS</h1>", "a`b", "``x``", "`", " `x` ",
                                  "  ", " a ", "a | b", "x\\", "**bold** [l](javascript:x)"])
def test_md_code_is_one_code_span_showing_the_text(text):
    assert code_span_content(N.md_code(text)) == text


def test_md_code_shows_line_breaks_as_escapes():
    assert code_span_content(N.md_code("a\n# Verdict: PASS")) == "a\\n# Verdict: PASS"


def test_md_cell_escapes_every_pipe_of_a_table_cell():
    cell = N.md_cell("a|b\\|c")
    # A pipe ends a cell unless an odd number of backslashes stands right before it.
    for m in re.finditer(r"(\\*)\|", cell):
        assert len(m.group(1)) % 2 == 1, cell


# Where md_text() stands on our pages: a paragraph of its own, after text, in a list item
# after a bold title, and in a table cell.
MD_PLACES = {"paragraph": ("{}", {"p"}), "inline": ("Why: {}.", {"p"}),
             "list": ("- **Build** (FAIL): {}", {"ul", "li", "strong"}),
             "cell": ("| check | verdict |\n|---|---|\n| {} | PASS |",
                      {"table", "thead", "tbody", "tr", "th", "td"})}
MARKUP = string.punctuation + "     aAbhptwx019é\u00a0\n\x1b"
WORDS = ["www.", "http://", "https://", "&amp;", "&#60;", "<b>", "</h1>", "<!--", "# ", "1. ",
         "- ", "> ", "***", "__", "~~", "```", "[a](b)", "![i](x)", "\\", "a_b", "x@y.z"]


def shown(place: str, text: str) -> tuple[str, list]:
    """What GitHub's renderer shows of md_text(text) in PLACE: (the text, unexpected tags)."""
    template, tags = MD_PLACES[place]
    page = Shown(gfm(template.format(N.md_text(text))))
    extra = [t for t in page.tags if t[0] not in tags]
    text_shown = "".join(page.parts).strip("\n")
    if place == "inline":
        text_shown = text_shown.removeprefix("Why: ").removesuffix(".")
    elif place == "list":
        text_shown = text_shown.strip("\n").removeprefix("Build (FAIL):")
    elif place == "cell":
        text_shown = text_shown.split("\n")[-2] if "\n" in text_shown else text_shown
    return text_shown, extra


def email_links(tags: list) -> list:
    """GitHub links an e-mail address (`a@b.c`) to itself: the one link escaping cannot
    stop (names.md_text). Such links are no markup of the student's."""
    return [t for t in tags if t[0] == "a" and re.fullmatch(
        r"(mailto|xmpp):[\w.+-]+@[\w.-]+", t[1].get("href", ""))]


@pytest.mark.parametrize("place", MD_PLACES)
@given(st.lists(st.sampled_from(WORDS) | st.text(MARKUP, max_size=4), max_size=8)
       .map("".join))
def test_md_text_is_shown_by_githubs_renderer_as_written_and_makes_no_markup(place, text):
    got, extra = shown(place, text)
    assert [t for t in extra if t not in email_links(extra)] == [], (N.md_text(text), extra)
    if place == "cell":  # a cell's text is its own, as a whole, stripped
        got = Shown(gfm(MD_PLACES["cell"][0].format(N.md_text(text)))).parts
        got = "".join(got).split("\n")
        want = N.visible(text).strip(" ")
        assert want in got or (not want and "" in got), (N.md_text(text), got)
        return
    assert got.strip(" ") == N.visible(text).strip(" "), N.md_text(text)


@pytest.mark.parametrize("text,raw", [
    ("2026-11-27 23:43", "2026-11-27 23:43"),
    ("/work/main/analysis/grade_weights.toml", "/work/main/analysis/grade_weights.toml"),
    ("main1/main2 median 1.02 (n = 1000); 5 x 1 = 5 / 5", None),
    ("the share of (server, n) settings whose runs all went well", None),
    ("<h1>*x*</h1>", "\\<h1>\\*x\\*\\</h1>"),
    ("## Verdict: PASS", "\\## Verdict: PASS"),
    ("1. x", "1\\. x"),
])
def test_md_text_escapes_only_what_markdown_would_read_as_markup(text, raw):
    assert N.md_text(text) == (text if raw is None else raw)


def test_md_fence_cannot_be_closed_by_the_text():
    block = N.md_fence("```\n# Verdict: PASS\n````")
    lines = block.split("\n")
    fence = lines[0]
    assert set(fence) == {"`"} and lines[-1] == fence
    assert all(not line.startswith(fence) for line in lines[1:-1])


# ---- links ----------------------------------------------------------------------------

def test_html_href_is_relative_and_refuses_unsafe_names():
    (name,) = N.assign(paths("x/javascript:alert(1)"))
    assert N.html_href(name) == f"./{name}/verdict.html"
    for bad in ("javascript:alert(1)", "..", ".x", "", "a/b", "//evil", "reference", "a b"):
        with pytest.raises(ValueError):
            N.html_href(bad)
