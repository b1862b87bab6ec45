"""The load agents of a run across machines (--client-host): each agent's share of the
throughput and its latency next to the merged result, so a saturated agent shows."""

from analysis.report.sections.base import ReportData, Section
from analysis.report.tables import frame_csv, pipe_table

KEYS = ["experiment", "kind", "value", "server", "n", "agent"]
HEAD = ["point", "server", "agent", "host", "threads", "throughput (req/s)", "share",
        "p50 (us)", "p99 (us)"]


def summary(agents):
    """Median over the repetitions of each agent's (and the merged row's) throughput,
    share and p50/p99 latency, per experiment point."""
    df = agents.copy()
    for k in KEYS:
        df[k] = df[k].fillna("").astype(str)
    out = (df.groupby(KEYS, sort=False)
           .agg(host=("host", "first"), runs=("rep", "count"),
                threads=("threads", "median"), throughput_rps=("throughput_rps", "median"),
                throughput_share=("throughput_share", "median"),
                lat_p50_us=("lat_p50_us", "median"), lat_p99_us=("lat_p99_us", "median"),
                saturated=("saturated", "any"))
           .reset_index())
    return out


def section(data: ReportData) -> Section | None:
    agents = data.results.get("agents")
    if agents is None or agents.empty:
        return None
    s = summary(agents)
    rows = []
    for r in s.itertuples():
        point = r.experiment if r.experiment == "lab" else f"{r.kind}={r.value}"
        agent = "**merged**" if r.agent == "all" else r.agent
        host = f"`{r.host}`" if isinstance(r.host, str) and r.host else ""
        rows.append([f"{point} n={r.n}", str(r.server), str(agent), host, f"{r.threads:g}",
                     f"{r.throughput_rps:.0f}", f"{r.throughput_share:.0%}",
                     f"{r.lat_p50_us:.1f}", f"{r.lat_p99_us:.1f}"])
    table = pipe_table(HEAD, rows, left=HEAD[:4]).rstrip("\n")
    return Section(files={"tables/agents.csv": frame_csv(s)}).add(
        data.prose("agents", table=table))
