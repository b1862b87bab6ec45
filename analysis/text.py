"""Text that may come from anyone (a student's submission, a profiled program's dump) made
safe to show on one line: every control, format and line-breaking character written as an
escape. Pure, standard library only."""

import unicodedata

# Shown escaped: C0 and C1 controls and DEL (Cc), format characters such as the bidi
# overrides and isolates U+202A-U+202E, U+2066-U+2069 and zero-width ones (Cf), lone
# surrogates from undecodable file names (Cs: they cannot even be printed), and the line
# and paragraph separators U+2028, U+2029 (Zl, Zp).
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else (f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")


def visible(text) -> str:
    """`text` on one line with every control, format and line-breaking character written as
    an escape (\\n, \\x1b, \\u202e); backslashes are kept as they are (C source in a
    compiler's message stays readable). For text quoted inside a page."""
    return "".join(_escape(c) if unicodedata.category(c) in _HIDDEN else c for c in str(text))


def console(text) -> str:
    """`text` as one printable terminal line: as visible(), and a backslash doubled so that
    an escape shown always stands for the character it names."""
    return visible(str(text).replace("\\", "\\\\"))
