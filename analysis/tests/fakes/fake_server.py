#!/usr/bin/env python3
"""A stand-in for mainN with the same command line and outputs (listening line, time file,
trace, summary line), used to test the runner without the C++ build. Not a lock study:
every request gets a made-up latency. FAKE_DIE_AFTER=K (env) makes it exit with code 3
after K requests, to test a server dying mid-experiment."""

import argparse
import os
import random
import signal
import socket
import sys
import threading

name = os.path.basename(sys.argv[0])
ap = argparse.ArgumentParser(prog=name)
ap.add_argument("n", type=int)
ap.add_argument("ip")
ap.add_argument("port", type=int)
ap.add_argument("--delay-us", type=float, default=10)
ap.add_argument("--batch", type=int, default=1000)
ap.add_argument("--time-file", default="server_output_time_aggregated")
ap.add_argument("--trace")
ap.add_argument("--trace-limit", type=int, default=0)
ap.add_argument("--no-twin", action="store_true")
ap.add_argument("-q", action="store_true")
a = ap.parse_args()
if a.n < 1:
    ap.error("n must be >= 1")

die_after = int(os.environ.get("FAKE_DIE_AFTER", "0"))
base = {"main1": 8e-3, "main2": 4e-4, "main3": 6e-3, "main4": 3e-4}.get(name, 1e-3)
lock = threading.Lock()
state = {"count": 0, "batch": [], "sum": 0.0, "trace": []}
stop = threading.Event()
socks = []
ports = [a.port] if a.no_twin else sorted({a.port, ((a.port >> 8) | (a.port << 8)) & 0xFFFF})
for p in ports:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((a.ip, p))
    except OSError as e:
        print(f"{name}: bind {a.ip}:{p}: {e.strerror}", file=sys.stderr)
        sys.exit(1)
    s.listen(512)
    s.settimeout(0.2)
    socks.append(s)


def handle(c):
    with c:
        c.settimeout(2)
        try:
            while True:
                data = b""
                while len(data) < 100:
                    chunk = c.recv(100 - len(data))
                    if not chunk:
                        break
                    data += chunk
                if not data:
                    return
                text = data.split(b"\0")[0].decode(errors="replace")
                pos, is_read = text.split("-")[:2]
                lat = base * (1 + 0.2 * random.random())
                with lock:
                    state["count"] += 1
                    state["batch"].append(lat)
                    state["sum"] += lat
                    if a.trace and len(state["trace"]) < a.trace_limit:
                        state["trace"].append((int(pos), int(is_read), int(lat * 1e9),
                                               int(lat * 0.7e9), int(lat * 0.25e9)))
                    if len(state["batch"]) == a.batch:
                        with open(a.time_file, "a") as f:
                            f.write("%e\n" % (sum(state["batch"]) / a.batch))
                        state["batch"].clear()
                    if die_after and state["count"] >= die_after:
                        os._exit(3)
                c.sendall(f"String {pos}: reply".encode().ljust(100, b"\0"))
        except (OSError, ValueError):
            return


def serve(s):
    while not stop.is_set():
        try:
            c, _ = s.accept()
        except socket.timeout:
            continue
        except OSError:
            return
        threading.Thread(target=handle, args=(c,), daemon=True).start()


signal.signal(signal.SIGTERM, lambda *_: stop.set())
signal.signal(signal.SIGINT, lambda *_: stop.set())
for s in socks:
    threading.Thread(target=serve, args=(s,), daemon=True).start()
print(f"{name}: listening on {a.ip}:{a.port}", flush=True)
while not stop.wait(0.1):
    pass
if a.trace:
    with open(a.trace, "w") as f:
        f.write("pos,is_read,latency_ns,wait_ns,hold_ns\n")
        for row in state["trace"]:
            f.write(",".join(map(str, row)) + "\n")
cnt = state["count"]
mean = state["sum"] / cnt if cnt else 0.0
print(f"{name}: summary requests={cnt} errors=0 mean_latency_s={mean:.6e} "
      f"mean_wait_s={mean * 0.7:.6e} mean_hold_s={mean * 0.25:.6e} "
      f"mean_delay_slept_us={a.delay_us * 6.3:.1f}", flush=True)
sys.exit(0)
