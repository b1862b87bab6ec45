"""The Method section: how the numbers were computed."""

from ..stats import SINGLE_RUN_BAND
from .base import ReportData, Section


def section(data: ReportData) -> Section:
    return Section().add(data.prose("method", band=f"{SINGLE_RUN_BAND:.0%}"))
