"""The Method section: how the numbers were computed."""

from .base import ReportData, Section


def section(data: ReportData) -> Section:
    return Section().add(data.prose("method"))
