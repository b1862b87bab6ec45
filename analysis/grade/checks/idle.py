"""The idle check: a client that connects and sends nothing must not stop the others being
served; a whole batch of 1000 beside it tells a server that joins its batch before
accepting again (a finding)."""

import socket
import time
from concurrent.futures import ThreadPoolExecutor

from analysis.grade import records as C
from analysis.grade.context import check
from analysis.grade.measure import kitload as K
from analysis.grade.measure.sandboxed import start

FILL_THREADS = 90   # with the first 20: 1100 requests, more than a batch of 1000 with the
                    # silent connection in it


def idle_one(ctx, bin_dir, name) -> tuple:
    """(True | False, evidence line, requests served beside the silent connection): 200
    kit requests must be served while a connection sits silent; then 900 more fill a whole
    batch of 1000 with the silent one in it, and a server that stalls there (it joins its
    batch before accepting again) is a finding, named with how many it served."""
    s, why = start(ctx, bin_dir, name, 10, f"{name}_idle")
    if why:
        s.stop()
        return False, f"{name}: not checked ({why})", 0
    try:
        idle = socket.create_connection(("127.0.0.1", s.port), timeout=2)
    except OSError as e:
        s.stop()
        return False, f"{name}: cannot connect ({e})", 0
    time.sleep(0.2)
    timeout = ctx.cfg["idle_timeout_s"]
    done, wall = K.drive(s.port, K.kit_plan(10, threads=20), timeout)
    served = sum(q.ok for q in done)
    line, fill = "", 0
    if served == 200:
        more, _ = K.drive(s.port, K.kit_plan(10, threads=FILL_THREADS), timeout)
        fill = sum(q.ok for q in more)
        line = "" if fill == len(more) == FILL_THREADS * K.PER_THREAD else (
            f"; finding: it stalled once a whole batch was open with the silent connection in "
            f"it: {200 + fill} of {200 + FILL_THREADS * K.PER_THREAD} requests served (each "
            f"given {timeout:g} s), as a server that accepts 1000 connections and joins them "
            "before accepting again does; the kit's client never leaves one silent")
    idle.close()
    s.stop()
    if served < 200:
        return False, (f"{name}: with one silent connection open, {served} of 200 kit requests "
                       f"were served (each given {timeout:g} s)"), served
    return True, (f"{name}: 200 of 200 requests served in {wall:.2f} s beside a silent "
                  "connection" + (line or f", and {fill} more after them, a whole batch "
                                          "with it")), served + fill


def check_idle(ctx, bin_dir, servers) -> dict:
    """A client that connects and sends nothing must not stop others being served (the
    servers are checked side by side: this is not a measurement)."""
    with ThreadPoolExecutor(len(servers)) as pool:
        res = list(pool.map(lambda name: idle_one(ctx, bin_dir, name), servers))
    ok = all(r[0] for r in res)
    return check("idle", C.title("idle"), "pass" if ok else "fail",
                 [r[1] for r in res], judged={name: r[2] for name, r in zip(servers, res)})
