"""The report's sections, in reading order.

Each entry is a pure function `section(data: ReportData) -> Section | None` (see base.py):
it gets everything report.py loaded and returns Markdown blocks, figures and table files,
or None when it has nothing to show. Adding a section is one such function plus one line
in SECTIONS; its fixed wording goes into report/templates/report.md as `<!-- block ... -->`
blocks (docs/analysis.md, "Adding a report section").
"""

from analysis.report.sections import (
    agents,
    lab,
    method,
    microbench,
    performance,
    setup,
    sweeps,
    which_lock,
)

SECTIONS = [
    setup.section,
    lab.tables_section,
    lab.figures_section,
    sweeps.section,
    microbench.section,
    which_lock.section,
    agents.section,
    performance.section,
    method.section,
]
