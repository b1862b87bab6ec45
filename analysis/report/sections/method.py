"""The Method section: how the numbers were computed."""

from analysis.report.sections.base import ReportData, Section
from analysis.stats import SINGLE_RUN_BAND


def section(data: ReportData) -> Section:
    return Section().add(data.prose("method", band=f"{SINGLE_RUN_BAND:.0%}"))
