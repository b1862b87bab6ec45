"""The title and the Setup section: machine, build and parameters, from metadata.json."""

from analysis import STRATEGIES, describe, server_order
from analysis.report.sections.base import ReportData, Section


def meta_rows(meta: dict) -> list:
    """(name, value) rows of the setup table, from the recorded metadata."""
    m, b, g = meta.get("machine", {}), meta.get("build", {}), meta.get("git", {})
    sessions = meta.get("sessions", [])
    flags = " ".join(f for f in (b.get("cxx_flags", "").strip(),
                                 b.get("cxx_flags_build_type", "").strip()) if f)
    build = (f"{b['build_type'] or '(no build type)'}, flags `{flags or '(none)'}`"
             if "build_type" in b else "unknown (no CMakeCache.txt next to the binaries)")
    if b.get("sanitize"):
        build += f", sanitizers {b['sanitize']}"
    compiler = " ".join(x for x in (b.get("cxx_compiler_id"), b.get("cxx_compiler_version")) if x)
    dirty = " (uncommitted changes)" if g.get("dirty") else ""
    started = sessions[0]["started_utc"] if sessions else meta.get("created_utc", "unknown")
    packages = ", ".join(f"{k} {v}" for k, v in sorted(m.get("packages", {}).items()))
    return [
        ("CPU", f"{m.get('cpu_model', 'unknown')}, {m.get('cores', '?')} logical cores"),
        ("Kernel / OS", f"{m.get('kernel', 'unknown')} / {m.get('os', 'unknown')}"),
        ("Compiler", compiler or "unknown"),
        ("Build", build),
        ("Git commit", f"{g.get('commit', 'unknown')}{dirty}"),
        ("Client", meta.get("client_version", "unknown")),
        ("Run started (UTC)", started),
        ("Sessions (1 + resumes)", str(len(sessions)) if sessions else "unknown"),
        ("Python packages", packages or "unknown"),
        *host_rows(meta),
    ]


def host_rows(meta: dict) -> list:
    """One row per host of a run across machines (--server-host, --client-host): its
    role, CPU, cores and kernel, collected over the prefix. None for a one-machine run."""
    return [(f"Host: {h.get('role', '?')}",
             f"`{h.get('prefix', '?')}`{' (' + h['hostname'] + ')' if h.get('hostname') else ''}"
             f": {h.get('cpu_model', 'unknown')}, {h.get('cores') or '?'} logical cores, "
             f"kernel {h.get('kernel', 'unknown')}")
            for h in (meta.get("server_setup") or {}).get("hosts") or []]


def parameter_lines(meta: dict, prose) -> list:
    """One bullet per experiment (lab, sweeps) that the metadata records."""
    p = meta.get("parameters", {})
    out = []
    lab = p.get("lab")
    if lab:
        out.append(prose("parameters_lab", servers=", ".join(lab["servers"]),
                         n=", ".join(str(n) for n in lab["n"]), runs=lab["runs"],
                         delay_us=lab["delay_us"], pause_s=lab.get("pause_s", 0),
                         trace_limit=lab.get("trace_limit", 0)))
    sw = p.get("sweeps")
    if sw:
        values = "; ".join(f"{k} = {', '.join(str(v) for v in vals)}"
                           for k, vals in sw.get("values", {}).items()
                           if k in sw.get("kinds", []))
        out.append(prose("parameters_sweeps", servers=", ".join(sw["servers"]),
                         duration_s=sw["duration_s"], warmup_s=sw["warmup_s"], reps=sw["reps"],
                         n=sw["n"], delay_us=sw["delay_us"], read_ratio=sw["read_ratio"],
                         threads=sw["threads"], connection=sw["connection"], values=values))
    return out


def section(data: ReportData) -> Section:
    meta = data.meta
    mb = f"`{data.microbench_shown}`" if data.microbench_shown else "not included"
    rows = [*meta_rows(meta), ("Microbenchmarks", mb)]
    params = meta.get("parameters", {})
    extra = [s for s in server_order([*params.get("lab", {}).get("servers", []),
                                      *params.get("sweeps", {}).get("servers", [])])
             if s not in STRATEGIES]
    strategies = "; ".join([f"`{s}` = {d}" for s, d in STRATEGIES.items()]
                           + [f"`{s}` = {describe(s)}" for s in extra])
    return Section().add(
        data.prose("title", results=data.results_shown),
        data.prose("setup", rows="\n".join(f"| {k} | {v} |" for k, v in rows),
                   parameters="\n".join(parameter_lines(meta, data.prose)),
                   strategies=strategies))
