"""lockbench analysis: experiment runner, tables, figures and the generated lab report.

Layout (one idea per module):
  stats.py    Student-t quantiles and confidence intervals (pure, no scipy).
  load.py     Read raw result files into checked DataFrames.
  tables.py   Summaries and the report tables (pure DataFrame -> DataFrame / text).
  figures.py  plot_* helpers: draw on a given Axes, return artists.
  observe.py  Observations for the report, computed from the summaries.
  microbench.py Microbenchmark JSON -> rows with spread, rankings with ties, findings.
  sections/   The report's sections: pure functions data -> (Markdown, figures, tables).
  report.py   Writes report/ (tables, figures, REPORT.md): the report's only reader/writer.
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

# Beyond main1..main4, a server label may name any strategy of the generic server
# (`lockserver --list-strategies`), optionally with a stripe count: "striped-mutex:8".
LOCKSERVER = "lockserver"
_LABEL = __import__("re").compile(r"^[a-z][a-z0-9-]*(:[1-9][0-9]*)?$")


def is_server_label(label: str) -> bool:
    """main1..main4, or a well-formed strategy label NAME or NAME:K (not checked against
    the binary: see runner.lockserver_strategies)."""
    if label in SERVERS:
        return True
    label = str(label)
    return bool(_LABEL.match(label)) and not label.startswith("main")


def server_command(label: str) -> tuple[str, list]:
    """(binary name, arguments before <n>) of a server label: main3 -> ("main3", []);
    striped-mutex:8 -> ("lockserver", ["--strategy", "striped-mutex", "--stripes", "8"])."""
    if label in SERVERS:
        return label, []
    name, _, k = label.partition(":")
    return LOCKSERVER, ["--strategy", name, *(["--stripes", k] if k else [])]


def server_order(servers) -> list:
    """Distinct server labels in the order they first appear (the runner writes rows in the
    order of --servers, so this is the order the user gave)."""
    return list(dict.fromkeys(str(s) for s in servers))


def server_label(server) -> str:
    """A server as legends, table rows and sentences name it: main1 (one mutex), a
    strategy label as is."""
    return f"{server} ({STRATEGIES[server]})" if server in STRATEGIES else str(server)


def describe(server: str) -> str:
    """What a server label means, for legends and table rows."""
    if server in STRATEGIES:
        return STRATEGIES[server]
    name, _, k = str(server).partition(":")
    return f"lockserver {name}" + (f", {k} stripes" if k else "")
