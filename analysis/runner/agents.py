"""The load agents: the client run on other hosts (remote.Host) at once, started together
at an agreed wall-clock time, each writing its latency histogram, and their results merged
(the shares of threads, requests and rate; the histograms summed; the percentiles of the
merged histogram)."""

import json
import math
import shlex
import subprocess
import time
from pathlib import Path

from analysis.launch.procs import RunError

HIST_MARK = "@@lockbench-histogram@@"


def split(total: int, parts: int) -> list:
    """total split into `parts` whole shares differing by at most one (larger first)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def agent_shares(threads: int, requests: int | None, rate: float | None, agents: int) -> list:
    """Each agent's [threads, requests, rate]: threads split evenly; requests split the
    same way; an open-loop rate in proportion to the agent's threads. Agents that would get
    no thread get no share (fewer threads than agents)."""
    t = [x for x in split(threads, agents) if x > 0]
    r = split(requests, len(t)) if requests else [None] * len(t)
    return [{"threads": ti, "requests": ri,
             "rate": rate * ti / threads if rate else None} for ti, ri in zip(t, r)]


def _client_script(client: Path, args: list) -> str:
    return ("H=$(mktemp) || exit 97\n"
            f"{shlex.join([str(client), *args])} --histogram-out \"$H\" </dev/null\n"
            f"rc=$?\necho {HIST_MARK}\ncat \"$H\" 2>/dev/null\nrm -f \"$H\"\nexit $rc\n")


def run_agents(hosts: list, client: Path, n: int, addr: str, port: int, common: list,
               shares: list, timeout: float, lead_s: float) -> list:
    """Runs one client per share on its host (share i on hosts[i]), all told to start at
    the same wall-clock time `lead_s` from now. Returns [(client JSON, histogram JSON)].
    RunError naming the agent if one fails."""
    start_at = time.time_ns() + int(lead_s * 1e9)
    procs = []
    try:
        for host, sh in zip(hosts, shares):
            args = [str(n), addr, str(port), *common, "--threads", str(sh["threads"])]
            if sh["requests"]:
                args += ["--requests", str(sh["requests"])]
            if sh["rate"]:
                args += ["--rate", f"{sh['rate']:.6g}"]
            args += [*sh.get("extra", []), "--format", "json", "--quiet",
                     "--start-at", str(start_at)]
            procs.append((host, host.popen(_client_script(client, args),
                                           stderr=subprocess.PIPE)))
        out = []
        deadline = time.monotonic() + timeout + lead_s
        for i, (host, p) in enumerate(procs):
            try:
                stdout, stderr = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RunError(f"agent {i + 1} ({host.label}): client did not finish within "
                               f"{timeout:g} s") from None
            body, _, hist = stdout.partition(HIST_MARK)
            if p.returncode != 0:
                msg = (stderr.strip().splitlines() or ["no message"])[-1]
                raise RunError(f"agent {i + 1} ({host.label}): client exited with code "
                               f"{p.returncode} ({msg})")
            try:
                doc, h = json.loads(body), json.loads(hist)
            except json.JSONDecodeError as exc:
                raise RunError(f"agent {i + 1} ({host.label}): client output is not JSON "
                               f"({exc})") from None
            out.append((doc, h))
        return out
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


# ---- merging ------------------------------------------------------------------------------

def merge_histograms(hists: list) -> dict:
    """Adds histograms of the client's --histogram-out layout (one run point each):
    bucket counts added per [lo, hi], count and sum added, min and max of all."""
    buckets: dict = {}
    for h in hists:
        for lo, hi, c in h["buckets"]:
            buckets[(lo, hi)] = buckets.get((lo, hi), 0) + c
    counts = [h["count"] for h in hists if h["count"]]
    return {"count": sum(h["count"] for h in hists), "sum_ns": sum(h["sum_ns"] for h in hists),
            "min_ns": min((h["min_ns"] for h in hists if h["count"]), default=0),
            "max_ns": max((h["max_ns"] for h in hists), default=0) if counts else 0,
            "buckets": [[lo, hi, c] for (lo, hi), c in sorted(buckets.items())]}


def percentile_ns(h: dict, q: float) -> int:
    """Nearest-rank percentile as the client computes it (LatencyHistogram::Percentile):
    the midpoint of the bucket holding rank ceil(q*count), clamped to [min, max]."""
    count = h["count"]
    if count == 0:
        return 0
    rank = min(max(math.ceil(q * count), 1), count)
    seen = 0
    for lo, hi, c in h["buckets"]:
        seen += c
        if seen >= rank:
            return min(max(lo + (hi - lo) // 2, h["min_ns"]), h["max_ns"])
    return h["max_ns"]


QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def latency_us(h: dict) -> dict:
    out = {"mean": h["sum_ns"] / h["count"] / 1e3 if h["count"] else 0.0,
           "min": h["min_ns"] / 1e3, "max": h["max_ns"] / 1e3}
    out.update({k: percentile_ns(h, q) / 1e3 for k, q in QUANTILES.items()})
    return out


def merge_agents(results: list) -> dict:
    """[(client JSON, histogram JSON)] of the agents of one run -> one client-like JSON:
    counts and throughputs summed, the window the longest, latency percentiles from the
    merged histogram (never averaged), `agents` the per-agent results."""
    docs = [d for d, _ in results]
    hists = [h["runs"][0] for _, h in results]
    merged = merge_histograms(hists)
    res = [d["results"] for d in docs]
    errors = {}
    for r in res:
        e = r.get("errors", {})
        for k, v in (e.items() if isinstance(e, dict) else [("total", e)]):
            if isinstance(v, (int, float)):
                errors[k] = errors.get(k, 0) + v
    cfg = dict(docs[0].get("config", {}))
    cfg["threads"] = sum(d["config"].get("threads") or 0 for d in docs)
    reqs = [d["config"].get("requests") for d in docs]
    cfg["requests"] = sum(reqs) if all(x is not None for x in reqs) else None
    cfg["agents"] = len(docs)
    return {"tool": docs[0].get("tool"), "version": docs[0].get("version"), "config": cfg,
            "results": {"requests": sum(r["requests"] for r in res),
                        "ok": sum(r["ok"] for r in res), "errors": errors,
                        "elapsed_s": max(r["elapsed_s"] for r in res),
                        "throughput_rps": sum(r["throughput_rps"] for r in res),
                        "latency_us": latency_us(merged),
                        "saturated": any(bool(r.get("saturated")) for r in res),
                        "merged_from_agents": len(docs)},
            "agents": docs}
