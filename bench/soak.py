#!/usr/bin/env python3
"""Soak benchmark: drive one lockbench server for a fixed time with
mixed good and bad traffic, then report what it served and whether it held up.

Not a test: it takes minutes and prints figures (docs/reliability.md).

    bench/soak.py                          # main4, 10 minutes
    bench/soak.py --minutes 3 --server main2 --bin-dir build/release

Traffic, all on 127.0.0.1 at the same time:
  * good load: our client (`client --duration ... --rate ...`, open loop, one
    connection per request, kit request mix: 70% reads);
  * abuse workers (Python threads), each round picking one of:
      - keep-alive burst of valid writes+reads of self-checking values,
      - every bad input the servers must answer with an error (empty, no
        dash, one dash, non-numeric / negative / overflowing / out-of-range
        pos, is_read 2, binary text, no NUL in 100 bytes),
      - 1 KB-10 KB of random garbage on one connection (replies read back),
      - a reset (SO_LINGER 0) in the middle of a request or with replies
        unread,
      - connect and close at once;
  * one slowloris thread trickling a byte every 200 ms (cut off by the
    server's frame deadline, then reconnecting).
Every reply is classified; unexpected ones are counted by kind.

At the end: the array is read back (every slot must be its initial value or
a value some client wrote there, whole), the consistency checker runs
(`client --check`), the server gets SIGTERM (exit status, summary line and the
timing file's format are checked). RSS comes from /proc/PID/status: at start,
after the warm-up, every 10 s (max), and at the end.
Exit status 0 when everything held, 1 otherwise.
"""
import argparse
import itertools
import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from analysis.kitframe import FRAME, frame
from analysis.launch import server_spec as SS
from analysis.launch.procs import StartError, pick_port
from analysis.numbers import float_above, float_in, int_in


def bad_frames(n):
    return {
        "empty": frame(b""),
        "no_dash": frame(b"hello"),
        "one_dash": frame(b"3-1"),
        "pos_not_numeric": frame(b"x-1-"),
        "pos_negative": frame(b"-4-0-neg"),
        "pos_overflow": frame(b"184467440737095516160-0-overflow"),
        "pos_out_of_range": frame(str(n).encode() + b"-0-out of range"),
        "is_read_2": frame(b"1-2-"),
        "binary_text": frame(b"1-0-\x01\xfe\xff"),
        "no_nul": b"A" * FRAME,
        "binary_no_nul": b"\xff" * FRAME,
    }


def status_number(pid, key):
    """The first number of the `key:` line of /proc/PID/status; -1 when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def rss_kb(pid):
    return status_number(pid, "VmRSS")


def threads_of(pid):
    return status_number(pid, "Threads")


def recv_exact(sock, count):
    buf = b""
    while len(buf) < count:
        chunk = sock.recv(count - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def reply_text(raw):
    return raw.split(b"\0", 1)[0]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = Counter()

    def add(self, key, k=1):
        with self.lock:
            self.c[key] += k


def soak_value(tid, count, pos):
    return f"soak t{tid} c{count} p{pos}".encode()


SOAK_RE = re.compile(rb"^soak t(\d+) c(\d+) p(\d+)$")
CLIENT_RE = re.compile(rb"^String\[(\d+)\] has been modified by thread (\d+)$")


ABUSE_KINDS = ["valid", "bad", "garbage", "reset_req", "reset_reply", "connect_close"]
ABUSE_WEIGHTS = [40, 35, 5, 8, 7, 5]


def abuse_valid(s, rng, tid, n, stats, published, counter):
    """A keep-alive burst of writes of self-checking values, each read back. published[tid]
    is raised before a value is sent: the array check accepts this worker's values up to
    it."""
    for _ in range(rng.randint(1, 20)):
        pos = rng.randrange(n)
        count = next(counter)
        value = soak_value(tid, count, pos)
        published[tid] = count
        s.sendall(frame(b"%d-0-%s" % (pos, value)))
        r = recv_exact(s, FRAME)
        stats.add("sent_valid")
        if r is None:
            stats.add("unexpected:closed_on_valid")
            break
        if reply_text(r) != value:
            stats.add("unexpected:wrong_write_reply")
        s.sendall(frame(b"%d-1-" % pos))
        r = recv_exact(s, FRAME)
        stats.add("sent_valid")
        if r is None or reply_text(r).startswith(b"ERROR "):
            stats.add("unexpected:bad_read_reply")
        else:
            stats.add("ok_valid", 2)


def abuse_bad(s, rng, bads, stats):
    """Bad frames on one connection, each of which must get an ERROR reply."""
    for _ in range(rng.randint(1, 10)):
        name, data = rng.choice(bads)
        s.sendall(data)
        r = recv_exact(s, FRAME)
        stats.add("sent_bad")
        if r is not None and reply_text(r).startswith(b"ERROR "):
            stats.add("error_reply:" + name)
        else:
            stats.add("unexpected:no_error_for_" + name)


def abuse_garbage(s, rng, stats):
    """Random bytes on one connection, sent from a second thread while this one reads the
    replies: every 100 bytes must be answered."""
    size = rng.randint(10, 100) * FRAME
    data = rng.randbytes(size)
    sender = threading.Thread(target=s.sendall, args=(data,))
    sender.start()
    errors = 0
    got = 0
    for _ in range(size // FRAME):
        r = recv_exact(s, FRAME)
        if r is None:
            break
        got += 1
        errors += reply_text(r).startswith(b"ERROR ")
    sender.join()
    stats.add("garbage_bytes", size)
    stats.add("garbage_frames_answered", got)
    if got != size // FRAME:
        stats.add("unexpected:garbage_not_fully_answered")
    if errors != got:
        stats.add("garbage_frames_valid_by_chance", got - errors)


def abuse_reset(s, rng, n, kind, stats):
    """A reset (SO_LINGER 0 at close) in the middle of a request, or with 50 replies
    unread."""
    if kind == "reset_req":
        s.sendall(b"5-0-half a request")
    else:
        s.sendall(b"".join(frame(b"%d-1-" % rng.randrange(n)) for _ in range(50)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    stats.add(kind)


def abuse_worker(tid, port, n, deadline, stats, published, timeout):
    """Until the deadline, one connection per round with one kind of abuse; whatever the
    server does that it should not is counted as unexpected:..."""
    rng = random.Random(tid)
    bads = list(bad_frames(n).items())
    counter = itertools.count(1)
    while time.monotonic() < deadline:
        kind = rng.choices(ABUSE_KINDS, weights=ABUSE_WEIGHTS)[0]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
                s.settimeout(timeout)
                if kind == "valid":
                    abuse_valid(s, rng, tid, n, stats, published, counter)
                elif kind == "bad":
                    abuse_bad(s, rng, bads, stats)
                elif kind == "garbage":
                    abuse_garbage(s, rng, stats)
                elif kind in ("reset_req", "reset_reply"):
                    abuse_reset(s, rng, n, kind, stats)
                else:
                    stats.add("connect_close")
        except TimeoutError:
            stats.add("unexpected:timeout_in_" + kind)
        except ConnectionRefusedError:
            stats.add("unexpected:connect_refused")
        except (ConnectionResetError, BrokenPipeError):
            stats.add("unexpected:reset_by_server_in_" + kind)
        except OSError as e:
            stats.add(f"unexpected:oserror_{e.errno}_in_{kind}")


def slowloris(port, deadline, stats):
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.settimeout(0.2)
                data = frame(b"1-0-slowloris")
                t0 = time.monotonic()
                # Leave with a reset, never a FIN: bytes followed by a
                # half-close are a (short) frame by design, e.g. "1-0-"
                # would write an empty string.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                             struct.pack("ii", 1, 0))
                for b in data:
                    if time.monotonic() >= deadline:
                        break
                    s.send(bytes([b]))
                    try:
                        r = s.recv(FRAME)
                        if r:
                            stats.add("slowloris_cut")
                            stats.add("slowloris_held_ms",
                                      int((time.monotonic() - t0) * 1000))
                            break
                    except TimeoutError:
                        pass
                else:
                    stats.add("unexpected:slowloris_frame_accepted")
        except OSError:
            stats.add("slowloris_reset")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float_above(0, 24 * 60), default=10.0)
    ap.add_argument("--server", default="main4")
    ap.add_argument("--bin-dir", default="build/release")
    ap.add_argument("--n", type=int_in(4, 10_000_000), default=1000)
    ap.add_argument("--rate", type=float_above(0, 1e7), default=2000.0,
                    help="good load, requests/s of the client (open loop)")
    ap.add_argument("--workers", type=int_in(0, 256), default=4, help="abuse threads")
    ap.add_argument("--warmup", type=float_in(0, 3600), default=10.0)
    ap.add_argument("--json", help="also write the figures here")
    return ap.parse_args(argv)


def start_server(server_bin, n, port, workdir):
    """The server, once it says it listens; None (and why, on stderr) if it does not. Its
    stderr (and its two stdout lines) go to workdir/server.log."""
    spec = SS.ServerSpec(Path(server_bin).name, "lockbench", Path(server_bin))
    srv = SS.launch(spec, n, port, SS.Place(Path(workdir)), log_file=Path(workdir) / "server.log",
                    opts=SS.Options(extra=("--no-twin",)))
    try:
        return srv.start()
    except StartError as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return None


def warning_lines(srv) -> int:
    """The lines the server wrote to stderr: its log less the launcher's notes (#) and the
    listening and summary lines of its stdout."""
    ours = ("#", f"{srv.prog}: listening on ", f"{srv.prog}: summary")
    return sum(1 for ln in srv.log_file.read_text(errors="replace").splitlines()
               if ln and not ln.startswith(ours))


def start_traffic(args, client_bin, port, duration, deadline, stats, published):
    """The good load (our client, open loop) and the abuse and slowloris threads, all
    started; returns (the client's process, the threads)."""
    load = subprocess.Popen(
        [client_bin, str(args.n), "127.0.0.1", str(port), "--real-port",
         "--duration", str(duration), "--rate", str(args.rate),
         "--format", "json", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    threads = [threading.Thread(target=abuse_worker,
                                args=(t, port, args.n, deadline, stats, published, 10))
               for t in range(args.workers)]
    threads.append(threading.Thread(target=slowloris, args=(port, deadline, stats)))
    for t in threads:
        t.start()
    return load, threads


def watch_server(pid, t0, deadline, warmup, figures):
    """Samples the server's RSS and threads every 10 s until the deadline (the RSS once
    after the warm-up into figures); returns (max RSS, max threads)."""
    rss_max = figures["rss_kb_start"]
    threads_max = 0
    warm_taken = False
    while time.monotonic() < deadline:
        time.sleep(min(10.0, max(0.1, deadline - time.monotonic())))
        rss = rss_kb(pid)
        rss_max = max(rss_max, rss)
        threads_max = max(threads_max, threads_of(pid))
        if not warm_taken and time.monotonic() - t0 >= warmup:
            figures["rss_kb_after_warmup"] = rss
            warm_taken = True
    return rss_max, threads_max


def end_traffic(load, threads, pid, rss_max, threads_max, figures):
    """Waits for the traffic to end, then the server's resources and the client's figures."""
    for t in threads:
        t.join()
    load_out, load_err = load.communicate(timeout=120)
    time.sleep(1.5)  # let cut-off connections finish
    figures["rss_kb_end"] = rss_kb(pid)
    figures["rss_kb_max"] = rss_max
    figures["threads_max"] = threads_max
    figures["threads_end"] = threads_of(pid)
    try:
        figures["client"] = json.loads(load_out)
    except ValueError:
        figures["client"] = {"raw": load_out[-2000:], "stderr": load_err[-2000:]}
    figures["client_exit"] = load.returncode


def slot_ok(pos, text, published):
    """Slot `pos` holds its initial value, or a whole value some client wrote there (an
    abuse worker's only up to the count it published)."""
    m, c = SOAK_RE.match(text), CLIENT_RE.match(text)
    return (text == b"String %d: the initial value" % pos
            or (m and int(m.group(3)) == pos
                and int(m.group(2)) <= published.get(int(m.group(1)), 0))
            or (c and int(c.group(1)) == pos))


def check_array(port, n, published, figures):
    """Reads every slot back on one connection; any other content (e.g. "slowloris": a
    cut-off frame must never land) makes the array not intact."""
    bad_slots = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        for pos in range(n):
            s.sendall(frame(b"%d-1-" % pos))
            text = reply_text(recv_exact(s, FRAME) or b"<closed>")
            if not slot_ok(pos, text, published):
                bad_slots.append((pos, text[:60].decode("latin-1")))
    figures["array_slots_bad"] = bad_slots[:10]
    figures["array_intact"] = not bad_slots


def run_checker(client_bin, n, port, figures):
    check = subprocess.run(
        [client_bin, str(n), "127.0.0.1", str(port), "--real-port", "--check"],
        capture_output=True, text=True, timeout=600)
    figures["checker_exit"] = check.returncode
    figures["checker_verdict"] = (check.stdout.strip().splitlines() or ["?"])[-1]


def stop_server(server, figures):
    """SIGTERM: how long the server takes to stop, its exit status and summary line."""
    t_stop = time.monotonic()
    summary = server.stop(timeout=10)
    figures["stop_seconds"] = round(time.monotonic() - t_stop, 3)
    figures["server_exit"] = server.exit_code
    figures["server_summary"] = summary
    figures["server_warning_lines"] = warning_lines(server)


def check_timing_file(workdir, figures):
    """Every line of the server's timing file is one number in the kit's format."""
    with open(os.path.join(workdir, "server_output_time_aggregated")) as f:
        lines = f.read().splitlines()
    figures["timing_lines"] = len(lines)
    figures["timing_lines_well_formed"] = all(
        re.fullmatch(r"-?\d\.\d{6}e[-+]\d{2,3}", ln) for ln in lines)


def verdict(stats, figures):
    """HELD or FAILED into figures, with the abuse counters; True when it held."""
    figures["abuse"] = dict(sorted(stats.c.items()))
    unexpected = {k: v for k, v in stats.c.items() if k.startswith("unexpected:")}
    figures["unexpected"] = unexpected
    held = (figures["array_intact"] and figures["checker_exit"] == 0
            and figures["server_exit"] == 0 and not unexpected
            and figures["timing_lines_well_formed"])
    figures["verdict"] = "HELD" if held else "FAILED"
    return held


def report(figures, json_path):
    text = json.dumps(figures, indent=2, sort_keys=True)
    print(text)
    if json_path:
        with open(json_path, "w") as f:
            f.write(text + "\n")


def main(argv=None):
    args = parse_args(argv)
    bin_dir = os.path.abspath(args.bin_dir)
    client_bin = os.path.join(bin_dir, "client")
    duration = args.minutes * 60
    port = pick_port()  # below 32768: clear of client TIME_WAIT sockets
    workdir = tempfile.mkdtemp(prefix="lockbench_soak_")
    server = start_server(os.path.join(bin_dir, args.server), args.n, port, workdir)
    if server is None:
        return 1
    pid = server.proc.pid
    figures = {"server": args.server, "n": args.n, "seconds": duration,
               "client_rate": args.rate, "abuse_workers": args.workers,
               "rss_kb_start": rss_kb(pid)}

    stats = Stats()
    published = {}
    t0 = time.monotonic()
    deadline = t0 + duration
    load, threads = start_traffic(args, client_bin, port, duration, deadline, stats,
                                  published)
    rss_max, threads_max = watch_server(pid, t0, deadline, args.warmup, figures)
    end_traffic(load, threads, pid, rss_max, threads_max, figures)
    check_array(port, args.n, published, figures)
    run_checker(client_bin, args.n, port, figures)
    stop_server(server, figures)
    check_timing_file(workdir, figures)
    held = verdict(stats, figures)
    report(figures, args.json)
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
