"""Names and text from untrusted submissions, made safe for where the grader shows them.

A submission's folder name and everything its build and servers print are chosen by a
student, who may be hostile: such text must not overwrite another submission's results,
run script in a browser, forge lines in Markdown or on a terminal, or become a formula in
a spreadsheet. Every function here is pure.
"""

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from analysis.text import console, visible  # noqa: F401  (this module's callers use them)

MAX_LEN = 60
FALLBACK = "submission"
# Names the grader writes beside the submissions' folders in --out (compared lower-case:
# case-insensitive file systems would merge "Reference" with "reference").
RESERVED = frozenset({"reference", "index", "summary", "index.html", "summary.csv",
                      "names.csv", "gradescope_scores.csv", "similarity.html",
                      "similarity.csv", "similarity", "gradescope_scores"})
SAFE_NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._-]{{0,{MAX_LEN - 1}}}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# The form of a suffixed name: a bare name of that form could equal another's suffixed one.
_SUFFIXED = re.compile(r"-[0-9a-f]{6,}$", re.IGNORECASE)
_HASH_LENGTHS = (6, 16, 40)


def _base(name: str) -> str:
    """The name in the safe alphabet: no leading '.' or '-' (hidden files, options)."""
    s = _UNSAFE.sub("_", name).lstrip(".-")[:MAX_LEN]
    return s or FALLBACK


def _tag(path: str, occurrence: int) -> str:
    """A hash of the resolved path: the same submission gets the same suffix in every run.
    A path given twice gets a different one for each repeat (only repeats can share it)."""
    key = path if occurrence == 0 else f"{path}\0{occurrence}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _resolve(p) -> Path:
    """The absolute path with symbolic links resolved; for a path the system cannot take (a
    surrogate no file name decodes to, a NUL) the absolute path as written."""
    try:
        return Path(p).resolve()
    except (UnicodeError, ValueError):
        return Path(os.path.abspath(p))


def _bare_ok(base: str, original: str, count: int, taken: set) -> bool:
    low = base.lower()
    return (base == original and count == 1 and low not in RESERVED and low not in taken
            and not _SUFFIXED.search(base))


def assign(paths: list[Path], taken: Iterable[str] = ()) -> list[str]:
    """An output folder name for every submission folder, in the order given.

    Each name is in [A-Za-z0-9._-], at most MAX_LEN characters, never empty, never starting
    with '.' or '-', never a RESERVED name nor one of `taken` (case-insensitively), and the
    names are distinct even case-insensitively. A folder keeps its own name when that is
    already safe and no other folder of the list has the same one; otherwise it becomes
    NAME-HASH with HASH from its resolved path, so that it does not depend on the order of
    the list or on its other members: a name is always either the bare one or that suffixed
    one (longer hashes only when two suffixes of six hex digits meet)."""
    taken_low = {t.lower() for t in taken}
    resolved = [_resolve(p) for p in paths]
    seen: Counter = Counter()
    items = []
    for r in resolved:
        items.append((r.name, _base(r.name), _tag(str(r), seen[str(r)])))
        seen[str(r)] += 1
    counts = Counter(base.lower() for _, base, _ in items)
    out: list = [base if _bare_ok(base, orig, counts[base.lower()], taken_low) else None
                 for orig, base, _ in items]
    todo = [i for i, n in enumerate(out) if n is None]
    used = taken_low | {n.lower() for n in out if n is not None}
    for k in _HASH_LENGTHS:
        trial = {i: f"{items[i][1][:MAX_LEN - 1 - k]}-{items[i][2][:k]}" for i in todo}
        clash = Counter(n.lower() for n in trial.values())
        todo = [i for i in todo if clash[trial[i].lower()] > 1 or trial[i].lower() in used]
        for i, n in trial.items():
            if i not in todo:
                out[i] = n
        used |= {out[i].lower() for i in trial if i not in todo}
        if not todo:
            break
    if todo:  # 40 hex digits of SHA-256 alike for different paths: not to be expected
        raise ValueError(f"no distinct names for {[str(paths[i]) for i in todo]}")
    return out


def is_safe(name: str) -> bool:
    """True when `name` has the form of an assign() name (safe in a path and in a URL)."""
    return bool(SAFE_NAME.fullmatch(name)) and name.lower() not in RESERVED


# A spreadsheet takes a cell starting with one of these as a formula (OWASP's list, with
# newline and the full-width forms some spreadsheets accept as well).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def csv_cell(value):
    """A CSV cell that a spreadsheet shows as text: a string starting like a formula gets a
    leading single quote. Numbers are left alone (a negative number is not a formula)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    s = "" if value is None else str(value)
    return "'" + s if s.startswith(_FORMULA_START) else s


def _longest_run(text: str, ch: str = "`") -> int:
    runs = re.findall(re.escape(ch) + "+", text)
    return max(map(len, runs), default=0)


def md_code(text) -> str:
    """A Markdown code span showing `text` literally (line breaks and controls escaped as in
    visible()): its backtick fence is longer than any backtick run inside, and a space pads
    the content where CommonMark strips one (a backtick or a space at both ends)."""
    s = visible(text)
    if not s:
        return "` `"
    fence = "`" * (_longest_run(s) + 1)
    pad = " " if (s[0] == "`" or s[-1] == "`"
                  or (s[0] == " " and s[-1] == " " and s.strip(" "))) else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def md_cell(text) -> str:
    """md_code() for a table cell: a '|' would end the cell even inside a code span, so it
    is escaped; the backslashes right before it are doubled first, so that the '\\|' pair
    is read as an escaped pipe by GFM (which pairs backslashes) and markdown-it alike. The
    price: a backslash right before a '|' shows doubled."""
    return re.sub(r"(\\*)\|", lambda m: m.group(1) * 2 + "\\|", md_code(text))


# Where Markdown (CommonMark with GitHub's extensions) would read student text as markup, a
# backslash before the character shows it as itself; elsewhere the text is left as it is,
# so that a page read raw stays readable (`2026-11-27 23:43`, `grade_weights.toml`).
# Anywhere: code spans, emphasis, links and images, raw HTML and autolinks, strikethrough,
# table cells.
_MD_ANYWHERE = frozenset("`*[]<~|")
# At the start of a line: headings, block quotes, list items, setext underlines.
_MD_LINE_START = frozenset("#>-+=")
_MD_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _md_needs_escape(s: str, i: int) -> bool:
    c, prev = s[i], s[i - 1] if i else ""
    nxt = s[i + 1] if i + 1 < len(s) else ""
    if c in _MD_ANYWHERE:
        return not (c == "*" and prev == " " and nxt == " ")  # `a * b` is no emphasis
    if c == "\\":  # escapes punctuation; last, it would escape whatever follows the text
        return nxt in _MD_PUNCT or not nxt
    if c == "_":  # emphasis, except between letters or digits (`grade_weights`)
        return not (prev.isalnum() and nxt.isalnum())
    if c == "&":  # an entity or character reference
        return nxt == "#" or nxt.isalnum() or not nxt
    if c == ":":  # GitHub's autolinks: http://, https://
        return s.startswith("//", i + 1)
    if c == ".":  # GitHub's autolinks: www.
        return s[max(0, i - 3):i].lower() == "www"
    return False


def md_text(text) -> str:
    """`text` as Markdown prose that shows it literally (controls escaped as in visible()),
    with a backslash only where Markdown would read markup: see _md_needs_escape, and at
    the start (a heading, quote or list item there). Also safe in a table cell. One thing
    escaping cannot stop: GitHub's renderer links an e-mail address (`a@b.c`) to itself."""
    s = visible(text)
    out = ["\\" + c if _md_needs_escape(s, i) else c for i, c in enumerate(s)]
    lead = len(s) - len(s.lstrip(" "))   # up to 3 spaces may stand before line markup
    if lead <= 3 and s[lead:lead + 1] in _MD_LINE_START and s[lead:lead + 1]:
        out[lead] = "\\" + s[lead]
    m = re.match(r" {0,3}\d{1,9}([.)])", s)  # an ordered list item: `1. ` or `1) `
    if m:
        out[m.end() - 1] = "\\" + m.group(1)
    return "".join(out)


def md_fence(text) -> str:
    """A fenced code block showing the lines of `text` (each as visible()): the fence is
    longer than any backtick run inside, so no line of the text can close it."""
    lines = [visible(line) for line in str(text).split("\n")]
    fence = "`" * max(3, _longest_run("\n".join(lines)) + 1)
    return "\n".join([fence, *lines, fence])


def html_href(name: str) -> str:
    """The relative link to a submission's page: ./NAME/verdict.html, percent-encoded.
    ValueError unless `name` is an assign()-style name, so that it can never be a scheme
    ('javascript:'), an absolute URL or a way out of the folder ('..')."""
    if not is_safe(name):
        raise ValueError(f"not a safe submission name: {name!r}")
    return f"./{quote(name, safe='')}/verdict.html"
