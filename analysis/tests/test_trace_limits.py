"""The grader's trace parser (analysis/grade/measure/design.py) against the tracer that writes
the trace (profile/lockprof_trace.cpp): the limits the parser assumes are read from the C++
source and compared, so that a change to one side without the other fails here."""

import inspect
import re
from pathlib import Path

from analysis.grade.measure import design

TRACER = Path(__file__).resolve().parents[2] / "profile" / "lockprof_trace.cpp"


def tracer_source() -> str:
    return TRACER.read_text()


def cpp_constant(name: str) -> int:
    """The value of `constexpr int NAME = N;` in the tracer."""
    m = re.search(rf"constexpr\s+int\s+{name}\s*=\s*(\d+)\s*;", tracer_source())
    assert m is not None, f"{name} not found in {TRACER}"
    return int(m.group(1))


def test_objects_per_request_are_the_tracers_table():
    assert cpp_constant("kTraceObjs") == design.MAX_OBJS


def test_request_prefix_is_the_tracers():
    prefix = cpp_constant("kTracePrefix")
    assert re.match(r"R \(\[!-~\]\{1,(\d+)\}\)", design._LINE.pattern).group(1) == str(prefix)


def test_longest_line_parsed_is_the_tracers_buffer():
    buffer = re.search(r"char\s+line\[(\d+)\s*\+\s*kTraceObjs\s*\*\s*(\d+)\]", tracer_source())
    assert buffer is not None, "the tracer's line buffer not found"
    bound = re.search(r"len\(line\)\s*<=\s*(\d+)\s*\+\s*MAX_OBJS\s*\*\s*(\d+)",
                      inspect.getsource(design))
    assert bound is not None, "the parser's line bound not found"
    assert bound.groups() == buffer.groups()


def test_parser_reads_past_the_tracers_default_cap():
    m = re.search(r"g_trace_max\s*=\s*(\d+)", tracer_source())
    assert m is not None, "the tracer's default cap (g_trace_max) not found"
    assert int(m.group(1)) <= design.MAX_RECORDS

