"""Writes fixtures/results_small/: a small synthetic results directory in the runner's
layout, for the report tests. Deterministic; rerun only when the layout changes:
    .venv/bin/python -m analysis.tests.make_fixtures
"""

import csv
import json
from pathlib import Path

from analysis.load import LAB_COLUMNS, SERVER_COLUMNS, SWEEP_COLUMNS

OUT = Path(__file__).parent / "fixtures" / "results_small"
BASE = {"main1": 8e-3, "main2": 4e-4, "main3": 6e-3, "main4": 3e-4}  # seconds
SERVERS = list(BASE)


def write(name, columns, rows):
    with open(OUT / name, "w", newline="") as f:
        w = csv.DictWriter(f, list(columns), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in columns})


def client(rep, tput, p95):
    return {"ok": 1000, "errors": 0, "elapsed_s": 1000 / tput, "throughput_rps": tput,
            "lat_mean_us": p95 / 2, "lat_p50_us": p95 / 2.5, "lat_p90_us": p95 * 0.9,
            "lat_p95_us": p95, "lat_p99_us": p95 * 1.5, "lat_p999_us": p95 * 2,
            "lat_max_us": p95 * 3, "saturated": "False"}


def main():
    (OUT / "traces").mkdir(parents=True, exist_ok=True)
    ns = [10, 100, 1000]
    lab, servers = [], []
    for s in SERVERS:
        for i, n in enumerate(ns):
            shrink = 1.0 if s in ("main1", "main3") else 1.0 / (1 + i)
            for rep in range(1, 6):
                lat = BASE[s] * shrink * (1 + 0.02 * ((rep * 7) % 5))
                lab.append({"server": s, "n": n, "rep": rep, "delay_us": 10.0, "read_ratio": 0.7,
                            "threads": 100, "requests": 1000, "connection": "per-request",
                            "port": 4242, "git_sha": "abc123", "latency_s": f"{lat:.6e}",
                            "time_lines": 1, **client(rep, 3000.0, lat * 2e6)})
            mean = BASE[s] * shrink * 1.04
            servers.append({"experiment": "lab", "value": "", "server": s, "n": n, "rep": 0,
                            "delay_us": 10.0, "port": 4242, "exit_code": 0,
                            "summary_requests": 5000, "summary_errors": 0,
                            "summary_mean_latency_s": mean, "summary_mean_wait_s": mean * 0.8,
                            "summary_mean_hold_s": mean * 0.15, "summary_mean_delay_slept_us": 63.0,
                            "summary": "synthetic"})
            with open(OUT / "traces" / f"{s}_n{n}.csv", "w") as f:
                f.write("pos,is_read,latency_ns,wait_ns,hold_ns\n")
                for k in range(30):
                    lat_ns = int(mean * 1e9 * (0.5 + k / 30))
                    f.write(f"{k % n},{int(k % 10 < 7)},{lat_ns},{int(lat_ns * 0.8)},"
                            f"{int(lat_ns * 0.15)}\n")
    write("lab.csv", LAB_COLUMNS, lab)
    write("lab_servers.csv", SERVER_COLUMNS, servers)

    points = {"threads": [1, 2, 4, 8], "n": [10, 1000, 100000], "read-ratio": [0.0, 0.7, 1.0],
              "delay": [0, 10, 100], "connection": ["per-request", "keepalive"]}
    field = {"threads": "threads", "n": "n", "read-ratio": "read_ratio", "delay": "delay_us",
             "connection": "connection"}
    peak = {"main1": 2, "main2": 4, "main3": 2, "main4": 8}
    for kind, values in points.items():
        rows, srows = [], []
        for rep in (1, 2):
            for v in values:
                for s in SERVERS:
                    cfg = {"n": 1000, "delay_us": 10.0, "read_ratio": 0.7, "threads": 8,
                           "connection": "per-request"}
                    cfg[field[kind]] = v
                    t = cfg["threads"]
                    tput = 1000.0 * min(t, peak[s]) * (1 + 0.01 * rep)
                    p95 = 100.0 * t / min(t, peak[s])
                    value = v if isinstance(v, str) else f"{v:g}"
                    rows.append({"kind": kind, "value": value, "server": s, "rep": rep, **cfg,
                                 "duration_s": 1.0, "warmup_s": 0.25, "port": 4242,
                                 "git_sha": "abc123", **client(rep, tput, p95)})
                    lat = BASE[s] * (1 + cfg["delay_us"] / 10) / 2
                    srows.append({"experiment": kind, "value": value, "server": s,
                                  "n": cfg["n"], "rep": rep, "delay_us": cfg["delay_us"],
                                  "port": 4242, "exit_code": 0, "summary_requests": 2000,
                                  "summary_errors": 0, "summary_mean_latency_s": lat,
                                  "summary_mean_wait_s": lat * 0.8,
                                  "summary_mean_hold_s": lat * 0.15,
                                  "summary_mean_delay_slept_us": 63.0, "summary": "synthetic"})
        write(f"sweep_{kind}.csv", SWEEP_COLUMNS, rows)
        write(f"sweep_{kind}_servers.csv", SERVER_COLUMNS, srows)

    meta = {"tool": "lockbench-analysis", "schema": 1, "created_utc": "2025-01-01T00:00:00Z",
            "client_version": "lockbench-client synthetic",
            "git": {"commit": "abc123", "dirty": False},
            "build": {"build_type": "Release", "cxx_compiler_id": "GNU",
                      "cxx_compiler_version": "12.2.0", "cxx_flags": "",
                      "cxx_flags_build_type": "-O3 -DNDEBUG"},
            "machine": {"cpu_model": "Synthetic CPU", "cores": 2, "kernel": "6.0", "os": "Debian",
                        "packages": {}},
            "parameters": {
                "lab": {"servers": SERVERS, "n": ns, "runs": 5, "delay_us": 10.0, "pause_s": 0.0,
                        "trace_limit": 30},
                "sweeps": {"kinds": list(points), "servers": SERVERS, "n": 1000,
                           "delay_us": 10.0, "read_ratio": 0.7, "threads": 8,
                           "connection": "per-request", "duration_s": 1.0, "warmup_s": 0.25,
                           "reps": 2, "values": points}},
            "sessions": [{"started_utc": "2025-01-01T00:00:00Z", "argv": ["synthetic"]}]}
    (OUT / "metadata.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
