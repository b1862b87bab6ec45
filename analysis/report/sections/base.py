"""What a report section gets and gives back.

A section is a pure function `section(data: ReportData) -> Section | None` (None: nothing
to report, e.g. no sweeps). It reads files never and writes files never: report.py loads
everything into ReportData, and writes every file the sections return.
"""

import re
from dataclasses import dataclass, field
from string import Template

import pandas as pd

_BLOCK = re.compile(r"^<!-- block ([a-z0-9_]+) -->$", re.M)


class Prose:
    """The fixed wording of the report (report/templates/report.md), by block name."""

    def __init__(self, text: str):
        parts = _BLOCK.split(text)
        self.blocks = {name: body.strip("\n") for name, body in zip(parts[1::2], parts[2::2])}

    def __call__(self, block: str, /, **fields) -> str:
        """The template block named `block` with its $fields filled (KeyError if one is
        missing)."""
        return Template(self.blocks[block]).substitute(fields)


@dataclass(frozen=True)
class Fig:
    """A figure of the report: saved as figures/<name>.png (and .svg with --svg),
    numbered in order of appearance and shown with its caption where the section puts
    it."""
    name: str
    caption: str
    figure: object  # matplotlib.figure.Figure


@dataclass
class Section:
    """blocks: Markdown strings and Figs in reading order (one blank line between blocks);
    files: extra files relative to the report directory (tables) -> their text."""
    blocks: list = field(default_factory=list)
    files: dict = field(default_factory=dict)

    def add(self, *blocks) -> "Section":
        self.blocks.extend(b for b in blocks if b != "" and b is not None)
        return self

    def bullets(self, sentences) -> "Section":
        """A Markdown list of sentences (nothing if there are none)."""
        if sentences:
            self.blocks.append("\n".join(f"- {s}" for s in sentences))
        return self


@dataclass(frozen=True)
class ReportData:
    """Everything the sections may use, loaded by report.py.

    results: load.load_results of the results directory; results_shown: how the report
    names it; microbench: microbench.parse_benchmarks rows or None; microbench_context:
    the JSON's "context" (the machine the benchmarks ran on); prose: the template."""
    results: dict
    results_shown: str
    prose: Prose
    microbench: pd.DataFrame | None = None
    microbench_context: dict = field(default_factory=dict)
    microbench_shown: str | None = None
    perf: tuple | None = None          # (runs, meta) of a bench/perf.py run, or None
    perf_shown: str | None = None

    @property
    def meta(self) -> dict:
        return self.results.get("metadata") or {}
