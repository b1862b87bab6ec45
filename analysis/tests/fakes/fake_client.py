#!/usr/bin/env python3
"""A stand-in for the lockbench client (same command line subset, same JSON shape), used
to test the runner without the C++ build. Kit mode: 1000 requests over 10 threads."""

import argparse
import json
import socket
import sys
import threading
import time

ap = argparse.ArgumentParser(prog="client")
ap.add_argument("n", type=int)
ap.add_argument("ip")
ap.add_argument("port", type=int)
ap.add_argument("--threads", type=int, default=100)
ap.add_argument("--requests", type=int, default=1000)
ap.add_argument("--duration", type=float)
ap.add_argument("--warmup", type=float, default=0)
ap.add_argument("--connection", default="per-request")
ap.add_argument("--read-ratio", type=float, default=0.7)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--real-port", action="store_true")
ap.add_argument("--format", default="text")
ap.add_argument("--quiet", action="store_true")
a = ap.parse_args()
port = a.port if a.real_port else ((a.port >> 8) | (a.port << 8)) & 0xFFFF
lats, errors = [], [0]
lock = threading.Lock()


def one(i):
    t = time.perf_counter()
    try:
        with socket.create_connection((a.ip, port), timeout=2) as s:
            s.sendall(f"{i % a.n}-1-".encode().ljust(100, b"\0"))
            got = b""
            while len(got) < 100:
                chunk = s.recv(100 - len(got))
                if not chunk:
                    raise OSError("short")
                got += chunk
        with lock:
            lats.append((time.perf_counter() - t) * 1e6)
    except OSError:
        with lock:
            errors[0] += 1


try:
    socket.create_connection((a.ip, port), timeout=2).close()
except OSError as e:
    print(f"client: cannot connect to {a.ip}:{port}: {e}", file=sys.stderr)
    sys.exit(1)
t0 = time.perf_counter()
if a.duration:
    end = t0 + a.warmup + a.duration
    while time.perf_counter() < end:
        one(len(lats))
    total = len(lats) + errors[0]
else:
    per = a.requests // 10
    ths = [threading.Thread(target=lambda k=k: [one(k * per + j) for j in range(per)])
           for k in range(10)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    total = a.requests
elapsed = time.perf_counter() - t0
lats.sort()
q = lambda p: lats[min(len(lats) - 1, int(p * len(lats)))] if lats else 0.0  # noqa: E731
lat = {"mean": sum(lats) / len(lats) if lats else 0.0, "min": lats[0] if lats else 0.0,
       "p50": q(0.5), "p90": q(0.9), "p95": q(0.95), "p99": q(0.99), "p999": q(0.999),
       "max": lats[-1] if lats else 0.0}
doc = {"tool": "lockbench-client", "version": "fake",
       "config": {"n": a.n, "host": a.ip, "port": a.port, "connect_port": port, "mode": "closed",
                  "connection": a.connection, "threads": a.threads, "requests": total,
                  "duration_s": a.duration, "warmup_s": a.warmup, "rate": None,
                  "read_ratio": a.read_ratio, "distribution": "uniform", "seed": a.seed},
       "results": {"requests": total, "ok": len(lats),
                   "errors": {"total": errors[0], "connect": errors[0], "reset": 0, "timeout": 0,
                              "error_reply": 0, "short_reply": 0, "other": 0},
                   "elapsed_s": elapsed, "throughput_rps": len(lats) / elapsed,
                   "latency_us": lat, "uncorrected_latency_us": None, "target_rate": None,
                   "saturated": False}}
print(json.dumps(doc))
