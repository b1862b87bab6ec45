"""One number rule for every Python command line (analysis/numbers.py), table-driven: every
option of every parser that takes a number is found by looking at the parsers themselves,
so an option added with a bare int or float type fails here; each refuses the same bad
spellings (exit 2, one line naming the value) and takes its lowest allowed value."""

import argparse
import contextlib
import importlib.util
import io
import sys
from pathlib import Path

import pytest

from analysis import __main__ as runner_cli
from analysis.grade import cli as grade_cli

BAD = ["+5", "0x10", "1_0", " 5", "", "nan", "inf", "-inf", "1e999", "07", "٣"]
BAD_INT_ONLY = ["1.5", "1e3"]


def parsers():
    """(name, parser, the words before the option) for every command line."""
    top = runner_cli.build_parser()
    subs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    out = [(f"python -m analysis {name}", p, []) for name, p in subs.choices.items()
           if name != "grade"]
    out.append(("python -m analysis.grade", grade_cli.build_parser(), []))
    for prog in ("perf", "soak", "lockprof_cost", "request_costs"):
        out.append((f"bench/{prog}.py", Capture(bench(prog).parse_args), []))
    return out


def bench(name: str):
    """A benchmark program as a module (loading it starts nothing), its folder first on the
    module path while it loads, as when it runs as a script (perf.py imports perf_cells)."""
    folder = Path(__file__).resolve().parents[2] / "bench"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", folder / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(folder))
    return mod


class Capture:
    """The argparse parser a program's parse_args(argv) builds, caught as it is made."""

    def __init__(self, parse_args):
        self.parse_args = parse_args
        made = []
        real = argparse.ArgumentParser.parse_args

        def keep(parser, *args, **kw):
            made.append(parser)
            raise SystemExit(0)
        argparse.ArgumentParser.parse_args = keep
        try:
            with contextlib.suppress(SystemExit):
                parse_args([])
        finally:
            argparse.ArgumentParser.parse_args = real
        self._actions = made[0]._actions


def numeric_options():
    rows = []
    for name, parser, before in parsers():
        for act in parser._actions:
            if not act.option_strings or act.type is None:
                continue
            assert act.type not in (int, float), f"{name} {act.option_strings[0]}: a bare " \
                "int/float type; use analysis.numbers"
            conv = getattr(act.type, "item", act.type)
            if hasattr(conv, "bounds"):
                rows.append((name, parser, before, act.option_strings[-1], conv,
                             hasattr(act.type, "item")))
    return rows


ROWS = numeric_options()


def parse(parser, argv) -> tuple:
    """(exit status or None, what it said on stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(argv)
        except SystemExit as e:
            return e.code, err.getvalue()
    return None, err.getvalue()


def test_every_command_line_has_numeric_options_to_check():
    assert len(ROWS) >= 20
    assert {r[0] for r in ROWS} >= {"python -m analysis lab", "python -m analysis.grade",
                                    "bench/perf.py", "bench/soak.py"}


@pytest.mark.parametrize("name, parser, before, option, conv, is_list", ROWS,
                         ids=[f"{r[0]} {r[3]}" for r in ROWS])
def test_each_numeric_option_refuses_bad_spellings_and_takes_its_lowest(name, parser, before,
                                                                        option, conv, is_list):
    lo, hi, kind = conv.bounds
    tail = ["somewhere"] if "grade" in name else []
    bad = BAD + (BAD_INT_ONLY if kind is int else [])
    if is_list:  # a comma list may have spaces after its commas: "10, 100"
        bad = [b for b in bad if b != " 5"]
    for value in bad:
        code, said = parse(parser, [*before, f"{option}={value}", *tail])
        assert code == 2, f"{name} {option}={value!r} was accepted"
        lines = [x for x in said.splitlines() if "error:" in x]
        assert len(lines) == 1 and option in lines[0], said
    out_of_range = str(int(hi) + 1) if kind is int else repr(float(hi) * 2 + 1)
    code, said = parse(parser, [*before, f"{option}={out_of_range}", *tail])
    assert code == 2 and "out of range" in said, said
    code, said = parse(parser, [*before, f"{option}={kind(lo) if lo > 0 or kind is int else 1}",
                                *tail])
    assert code is None, said


@pytest.mark.parametrize("prog, names", [
    ("perf", ("throughput", "timing", "lab", "clients")),
    ("request_costs", ("nullsrv_tpc", "thread", "epoll-1-loop", "uring")),
])
def test_a_sittings_only_takes_its_own_names_and_refuses_any_other(prog, names):
    """--only of the benchmark sittings (bench/sitting.py): a list of known names, spaces
    after the commas allowed; an unknown or empty name is refused with one line naming it
    and every name it could be."""
    parser = Capture(bench(prog).parse_args)
    a = parser.parse_args(["--only", f"{names[0]}, {names[-1]}"])
    assert a.only == [names[0], names[-1]]
    assert parser.parse_args([]).only == []
    for bad in ("nope", f"{names[0]},", f"{names[0]},{names[1].upper()}"):
        code, said = parse(parser, ["--only", bad])
        lines = [x for x in said.splitlines() if "error:" in x]
        assert code == 2 and len(lines) == 1 and "--only" in lines[0], said
    code, said = parse(parser, ["--only", "nope"])
    assert "'nope'" in said and all(n in said for n in names), said
