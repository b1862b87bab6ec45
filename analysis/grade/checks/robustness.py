"""The robustness check: malformed frames and clients that leave early, each on a fresh
server that must then serve the next request and a whole batch."""

import contextlib
import socket
import time
from concurrent.futures import ThreadPoolExecutor

from analysis.grade import records as C
from analysis.grade.context import check
from analysis.grade.measure import kitload as K
from analysis.grade.measure.sandboxed import start

MALFORMED = [
    ("empty connection (connect, send nothing, close)", None),
    ("frame with no '-'", K.frame("hello")),
    ("position out of range", K.frame("100000000-1-")),
    ("negative position", K.frame("-5-1-")),
    ("100 bytes without a NUL", b"7" * 100),
    ("is_read neither 0 nor 1", K.frame("3-7-x")),
    ("client leaves before the reply (RST)", "early"),
]


def _send_probe(port: int, payload) -> None:
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=2)
        if payload == "early":
            c.sendall(K.frame("3-1-"))
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
        elif payload is not None:
            c.sendall(payload)
            c.settimeout(1)
            with contextlib.suppress(OSError):
                c.recv(100)
        c.close()
    except OSError:
        pass


def probe(ctx, bin_dir, name, payload, i) -> tuple:
    """(True survived | False did not | None not checked, what happened). After the probe
    the next request, then a whole batch of the kit workload (a kit-style server may
    survive the probe and crash when that batch completes), then a look that it lives."""
    s, why = start(ctx, bin_dir, name, 10, f"{name}_probe{i}")
    if why:
        s.stop()
        return None, f"not checked: the fresh server did not start ({why})"
    _send_probe(s.port, payload)
    time.sleep(0.15)
    _, err = K.exchange(s.port, K.frame("2-1-"), 2)
    if not err and s.alive():
        done, _ = K.drive(s.port, K.kit_plan(10), ctx.cfg["request_timeout_s"])
        time.sleep(0.3)
        failed = [q for q in done if not q.ok]
        if not s.alive():
            out = (False, "answered the next request, then died when the batch of 1000 "
                          f"requests that followed completed: {s.death()}")
        elif failed:
            out = (False, f"answered the next request, then {len(failed)} of the following "
                          f"1000 failed, e.g. {failed[0].describe()}")
        else:
            out = (True, "survived; the next request and a batch of 1000 served")
    elif not s.alive():
        out = (False, f"server died: {s.death()}")
    else:
        out = (False, f"server stopped answering ({err})")
    s.stop()
    return out


def check_robustness(ctx, bin_dir, _present=None) -> dict:
    """Each probe on a fresh server (main1, or the lab's one server); a probe that could
    not run is not checked and costs nothing."""
    ev, findings, checked = [], [], 0
    who, name = C.title("robustness", ctx.lab), ctx.lab.first
    with ThreadPoolExecutor(len(MALFORMED)) as pool:  # independent fresh servers
        outs = list(pool.map(lambda a: probe(ctx, bin_dir, name, a[1][1], a[0]),
                             enumerate(MALFORMED)))
    for (what, _payload), (ok, text) in zip(MALFORMED, outs):
        ev.append(f"{what}: {text}")
        if ok is not None:
            checked += 1
        if ok is False:
            findings.append(what)
    if not checked:
        return check("robustness", who, "undetermined", ev, judged=0)
    return check("robustness", who, "fail" if findings else "pass", ev,
                 findings=findings, fraction=1 - len(findings) / checked, judged=checked)
