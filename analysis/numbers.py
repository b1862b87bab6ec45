"""The one rule for numbers on every Python command line of lockbench (the runner, the
grader, the benchmark programs): decimal only (no leading zeros, no sign but a leading
'-', no 0x/0o, no '_', no spaces), finite, inside the range the program behind accepts.
A refusal names the value and what is allowed; argparse adds the option and exits 2."""

import argparse
import re

_INT_RE = re.compile(r"-?(0|[1-9][0-9]*)", re.ASCII)
_FLOAT_RE = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?|-?\.[0-9]+", re.ASCII)


def _number_in(lo, hi, pattern, convert, what: str, interval: str, above: bool = False):
    """A number spelled as pattern allows, convert(text) inside [lo, hi] (or (lo, hi] when
    `above`); the bounds are finite, so 1e999 is refused too."""
    allowed = f"allowed: {what} in {interval}"

    def parse(t):
        if not pattern.fullmatch(t):
            raise argparse.ArgumentTypeError(f"{t!r} is not {what}; {allowed}")
        v = convert(t)
        if not (lo < v if above else lo <= v) or not v <= hi:
            raise argparse.ArgumentTypeError(f"{t} is out of range; {allowed}")
        return v
    parse.bounds = (lo, hi, convert)  # for the table-driven test of every command line
    return parse


def int_in(lo: int, hi: int):
    """A decimal integer in lo..hi."""
    return _number_in(lo, hi, _INT_RE, int, "a decimal integer", f"{lo}..{hi}")


def float_in(lo: float, hi: float):
    """A finite decimal number in [lo, hi]."""
    return _number_in(lo, hi, _FLOAT_RE, float, "a decimal number", f"[{lo:g}, {hi:g}]")


def float_above(lo: float, hi: float):
    """A finite decimal number in (lo, hi]: a duration that must not be zero."""
    return _number_in(lo, hi, _FLOAT_RE, float, "a decimal number", f"({lo:g}, {hi:g}]",
                      above=True)


def one_of(names, what: str):
    """One of `names` (a `what`: said in the refusal with every name)."""
    def parse(t):
        if t not in names:
            raise argparse.ArgumentTypeError(f"unknown {what} {t!r} ({', '.join(names)})")
        return t
    return parse


def list_of(conv, distinct_sorted: bool = False):
    """A comma list of values conv accepts (none empty); sorted without repeats when
    `distinct_sorted`."""
    def parse(text):
        items = [t.strip() for t in text.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError(f"{text!r} is an empty list")
        if not all(items):
            raise argparse.ArgumentTypeError(f"{text!r} has an empty item")
        values = [conv(t) for t in items]
        return sorted(set(values)) if distinct_sorted else values
    parse.item = conv
    return parse
