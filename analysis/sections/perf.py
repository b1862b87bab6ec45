"""Performance: lockbench against the physical limit (bench/perf.py, issue 11).

The numbers come from the newest bench/perf.py run under results/perf/ (report.py loads it;
analysis/perf.py computes the targets, the ratio table and the split of the lab metric)."""

from .. import figures as F
from .. import perf as P
from ..tables import frame_csv
from .base import Fig, ReportData, Section


def section(data: ReportData) -> Section | None:
    if data.perf is None:
        return None
    runs, meta = data.perf
    return perf_section(runs, meta, data.perf_shown)


def perf_section(runs, meta: dict, shown: str) -> Section:
    """The section from one bench/perf.py run (runs, meta) kept in the folder `shown`."""
    sec = Section(files={"tables/perf_ratios.csv": frame_csv(P.ratio_table(runs)),
                         "tables/perf_split.csv": frame_csv(P.split_table(runs))})
    sec.add(P.section_markdown(runs, meta).rstrip("\n")
            + f"\n\nRaw results: `{shown}`.")
    tp = runs[runs["kind"] == "throughput"]
    if len(tp):
        ndelay = max(1, tp["delay_us"].nunique())
        fig, axes = F.new_figure(2, ndelay, figsize=(6 * ndelay, 9), squeeze=False)
        P.plot_throughput(axes, runs)
        sec.add(Fig("perf_throughput", "Throughput per configuration (bench/perf.py): median "
                    "over the interleaved rounds, min-max whiskers; references in grey.", fig))
    return sec
