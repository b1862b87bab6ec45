"""lockbench analysis: experiment runner, tables, figures and the generated lab report.

Layout (one idea per module):
  stats.py    Student-t quantiles and confidence intervals (pure, no scipy).
  load.py     Read raw result files into checked DataFrames.
  tables.py   Summaries and the report tables (pure DataFrame -> DataFrame / text).
  figures.py  plot_* helpers: draw on a given Axes, return artists.
  observe.py  Observations for the report, computed from the summaries.
  report.py   Writes report/ (tables, figures, REPORT.md) from a results directory.
  procs.py    Server and client processes: free ports, start, stop, parse output.
  runner.py   The lab experiment and the sweeps; incremental CSV, resume, metadata.
  progress.py Progress line with ETA on stderr.
  __main__.py The command line: python -m analysis {lab,sweep,report,all}.
"""

SERVERS = ("main1", "main2", "main3", "main4")

STRATEGIES = {
    "main1": "one mutex",
    "main2": "mutex per string",
    "main3": "one rwlock",
    "main4": "rwlock per string",
}
