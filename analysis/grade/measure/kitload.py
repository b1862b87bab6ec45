"""The kit's wire protocol and workloads, driven from Python over raw sockets, recording a
history of every request (the kit's: one connection per request, 100-byte frames).

A Request records what was sent, when (time.monotonic, seconds), and what came back or what
went wrong. Nothing here opens a connection the kit would not open, except the probes that
the robustness checks ask for by name.
"""

import contextlib
import errno
import os
import random
import selectors
import socket
import string
import struct
import threading
import time
from dataclasses import dataclass

from analysis.kitframe import FRAME, frame

THREADS = 100        # COM_CLIENT_THREAD_COUNT
PER_THREAD = 10      # requests per thread: 1000 a run (COM_NUM_REQUEST)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value; Python 3.11 has no name
# A request's outcomes (Request.outcome), in the order the page lists them. The kit's client
# reads each reply with one read() and never looks at it, so it goes on after all but the
# last two: only they are failures as the kit counts them (a crash or a hang).
OUTCOMES = ("answered", "short", "empty", "reset", "timed out", "refused", "failed")
GOES_ON = ("answered", "short", "empty", "reset")
EMPTY = "closed without a reply"
RESET = "ConnectionResetError"
TIMED_OUT = "no reply within"
REFUSED = "connection refused"


@dataclass
class Request:
    thread: int
    pos: int
    is_read: bool
    text: str               # the written text ('' for a read)
    start: float = 0.0
    end: float = 0.0
    reply: str | None = None
    error: str = ""         # '' when a reply came back
    size: int = 0           # the reply's bytes (the kit accepts fewer than 100)

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def outcome(self) -> str:
        """What became of it, as OUTCOMES names it."""
        if not self.error:
            return "answered" if self.size >= FRAME else "short"
        if self.error == EMPTY:
            return "empty"
        if self.error.startswith(RESET):
            return "reset"
        if self.error.startswith(TIMED_OUT):
            return "timed out"
        return "refused" if self.error == REFUSED else "failed"

    @property
    def goes_on(self) -> bool:
        """Whether the kit's client goes on after it: its one read() returned what it
        returned (a reply, 0 bytes, or -1 on a reset) and the thread sends its next
        request. A refused connection (the server is gone) or no reply at all (the kit's
        client would wait for ever) ends the thread's run."""
        return self.outcome in GOES_ON

    def describe(self) -> str:
        op = f"read slot {self.pos}" if self.is_read else f"write slot {self.pos} := {self.text!r}"
        got = f"got {self.reply!r}" if self.reply is not None else f"failed: {self.error}"
        return f"thread {self.thread}: {op}; {got}"


def request_text(pos: int, is_read: bool, text: str) -> str:
    return f"{pos}-{1 if is_read else 0}-{text}"


def exchange(port: int, payload: bytes, timeout: float, ip: str = "127.0.0.1"):
    """One connection: send payload, read the reply as the kit's client does (one read of
    up to 100 bytes). Returns (reply_text or None, error or ''). Never raises for network
    errors."""
    try:
        with socket.create_connection((ip, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(payload)
            data = s.recv(FRAME)
    except TimeoutError:
        return None, f"{TIMED_OUT} {timeout:g} s"
    except OSError as e:
        return None, _os_error(e)
    return _reply(data)


def _os_error(e: OSError) -> str:
    if isinstance(e, ConnectionRefusedError):
        return REFUSED
    return f"{type(e).__name__}: {e.strerror or e}"


def _reply(data: bytes) -> tuple:
    """The kit client's reading of what its one read() of up to 100 bytes got: (the text
    as far as the first NUL, ''); (None, why not) when the server closed without a byte.
    A reply shorter than 100 bytes is the kit's to accept: short() names it, no failure."""
    if not data:
        return None, EMPTY
    return data.split(b"\0", 1)[0].decode("utf-8", "replace"), ""


def short(done: list) -> list:
    """The answered requests whose reply was shorter than the kit's 100-byte frame."""
    return [q for q in done if q.ok and q.size < FRAME]


def read_slots(port: int, slots, timeout: float) -> dict:
    """slot -> value for each of slots read over its own connection; a slot whose read
    failed is left out."""
    values = {}
    for p in slots:
        got, err = exchange(port, frame(request_text(p, True, "")), timeout)
        if not err:
            values[p] = got
    return values


def _rand_r(state: list) -> int:
    """glibc rand_r (the kit seeds it with the thread index), state in a one-item list."""
    nxt = state[0]
    nxt = (nxt * 1103515245 + 12345) & 0xFFFFFFFF
    result = (nxt // 65536) % 2048
    nxt = (nxt * 1103515245 + 12345) & 0xFFFFFFFF
    result = (result << 10) ^ ((nxt // 65536) % 1024)
    nxt = (nxt * 1103515245 + 12345) & 0xFFFFFFFF
    result = (result << 10) ^ ((nxt // 65536) % 1024)
    state[0] = nxt
    return result


def kit_plan(n: int, threads: int = THREADS, per_thread: int = PER_THREAD) -> list:
    """The kit client's requests, per thread in order: pos = rand_r % n, then read if
    rand_r % 100 < 70; write text 'String[pos] has been modified by thread T'."""
    plan = []
    for t in range(threads):
        state, mine = [t], []
        for _ in range(per_thread):
            pos = _rand_r(state) % n
            is_read = _rand_r(state) % 100 < 70
            text = "" if is_read else f"String[{pos}] has been modified by thread {t}"
            mine.append(Request(t, pos, is_read, text))
        plan.append(mine)
    return plan


def attack_plan(n: int, seed: int = 1, requests: int = 1000) -> list:
    """The attacker's shape: for positions 0, n/4, 2n/4, 3n/4, 7 writers write random
    strings from a pool of 4 (alphanumeric, ~95 - log10 n long) while 1 reader reads;
    requests/8 each. Unlike the kit, every written string is unique per slot (a suffix),
    so a history names which write a read saw."""
    rng = random.Random(seed)
    length = 95 - len(str(n))
    pool = ["".join(rng.choice(string.ascii_letters + string.digits) for _ in range(length - 6))
            for _ in range(4)]
    plan, tid = [], 0
    for k in range(4):
        pos = k * n // 4
        for w in range(8):
            mine = []
            for i in range(requests // 8):
                if w == 7:
                    mine.append(Request(tid, pos, True, ""))
                else:
                    mine.append(Request(tid, pos, False, f"{rng.choice(pool)}{w}{i:05d}"))
            plan.append(mine)
            tid += 1
    return plan


class _Lane:
    """One of the kit client's threads: its requests in order, one connection at a time.
    `sent` and `data` are the current request's bytes out and in; `deadline` moves on at
    each step that made progress (as a blocking socket's timeout applies per call)."""
    __slots__ = ("reqs", "i", "sock", "payload", "sent", "data", "deadline")

    def __init__(self, reqs):
        self.reqs, self.i, self.sock = reqs, 0, None
        self.payload, self.sent, self.data, self.deadline = b"", 0, b"", 0.0

    @property
    def req(self) -> Request:
        return self.reqs[self.i]


class _Driver:
    """The plan's lanes over non-blocking sockets in one thread (epoll): a hundred Python
    threads, one per lane, spent more of a grading's CPU time handing each other the GIL
    than the servers under test spent serving them."""

    def __init__(self, port: int, timeout: float, stop):
        self.port, self.timeout, self.stop = port, timeout, stop
        self.sel = selectors.DefaultSelector()
        self.done: list = []
        self.live: set = set()

    def begin(self, lane: _Lane) -> None:
        """Starts lane's current request: a non-blocking connect, the frame sent once it
        is up."""
        r = lane.req
        r.start = time.monotonic()
        lane.payload = frame(request_text(r.pos, r.is_read, r.text))
        lane.sent, lane.data, lane.deadline = 0, b"", r.start + self.timeout
        lane.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lane.sock.setblocking(False)
        err = lane.sock.connect_ex(("127.0.0.1", self.port))
        if err not in (0, errno.EINPROGRESS):
            lane.sock.close()
            lane.sock = None
            return self.finish(lane, None, _os_error(OSError(err, os.strerror(err))))
        self.sel.register(lane.sock, selectors.EVENT_WRITE, lane)
        self.live.add(lane)

    def finish(self, lane: _Lane, reply, error: str) -> None:
        r = lane.req
        r.end, r.reply, r.error, r.size = time.monotonic(), reply, error, len(lane.data)
        if lane.sock is not None:
            self.sel.unregister(lane.sock)
            lane.sock.close()
            lane.sock = None
        self.live.discard(lane)
        self.done.append(r)
        lane.i += 1
        if r.goes_on and lane.i < len(lane.reqs) and not (self.stop and self.stop.is_set()):
            self.begin(lane)

    def step(self, lane: _Lane) -> None:
        """Moves lane on as far as its socket allows: connected, frame sent, reply read."""
        try:
            if lane.sent < len(lane.payload):
                err = lane.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, os.strerror(err))
                lane.sent += lane.sock.send(lane.payload[lane.sent:])
                if lane.sent == len(lane.payload):
                    self.sel.modify(lane.sock, selectors.EVENT_READ, lane)
            else:
                lane.data = lane.sock.recv(FRAME)   # the kit's one read()
                return self.finish(lane, *_reply(lane.data))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as e:
            return self.finish(lane, None, _os_error(e))
        lane.deadline = time.monotonic() + self.timeout
        return None

    def run(self, lanes: list, give_up: float) -> None:
        for lane in lanes:
            if lane.reqs and not (self.stop and self.stop.is_set()):
                self.begin(lane)
        while self.live and time.monotonic() < give_up:
            first = min(lane.deadline for lane in self.live)
            wait = min(max(0.0, first - time.monotonic()), give_up - time.monotonic(), 0.25)
            for key, _ in self.sel.select(max(0.0, wait)):
                if key.data in self.live:
                    self.step(key.data)
            now = time.monotonic()
            for lane in [x for x in self.live if x.deadline <= now]:
                self.finish(lane, None, f"{TIMED_OUT} {self.timeout:g} s")
        for lane in list(self.live):   # past give_up: abandoned, as a stuck thread was
            self.sel.unregister(lane.sock)
            lane.sock.close()
        self.sel.close()


def drive(port: int, plan: list, timeout: float = 5.0, stop: threading.Event | None = None):
    """Runs the plan as the kit's client does: each entry one client thread, its requests
    in order, one connection each, every entry at once. A thread goes on whatever its
    replies were, as the kit's does (Request.goes_on), and stops at a refused connection
    (the server is gone) or a request without a reply in time; with `stop` set no request
    starts (those under way finish). A request's start is taken before its connect and
    its end after its reply was read. Returns (all requests that were attempted, in the
    order they ended, wall seconds)."""
    t0 = time.monotonic()
    longest = max((len(reqs) for reqs in plan), default=1)
    d = _Driver(port, timeout, stop)
    d.run([_Lane(reqs) for reqs in plan], t0 + timeout * longest + 5)
    return d.done, time.monotonic() - t0


def _open_all(port: int, n: int, timeout: float) -> list:
    """n connections, opened one after another, all within `timeout` seconds together."""
    socks, deadline = [], time.monotonic() + timeout
    try:
        for _ in range(n):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=left))
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks


def _rx_time(sock, want: int) -> tuple:
    """(bytes, when the kernel received them, time.time() seconds) from a socket with
    SO_TIMESTAMPNS set: the reply's arrival, however late this process reads it."""
    data, anc, _, _ = sock.recvmsg(want, socket.CMSG_SPACE(16))
    for level, kind, raw in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
            sec, nsec = struct.unpack("qq", raw[:16])
            return data, sec + nsec * 1e-9
    return data, time.time()


def _accepted(queued, timeout: float):
    """Waits (at most timeout) until queued() says no connection waits to be accepted;
    what it says then (None without queued)."""
    deadline = time.monotonic() + timeout
    while queued is not None and queued() and time.monotonic() < deadline:
        time.sleep(0.005)
    return None if queued is None else queued()


def _take_reply(key, got: dict, reqs: list) -> None:
    """Reads the reply on key's connection as the kit does (one read of up to 100 bytes):
    the request's end, reply and size are set. A connection closed without a byte ends
    its request there (the kit's read() returns 0 and its client goes on): the server is
    done with it, and its time counts as the others'."""
    i = key.data
    try:
        chunk, when = _rx_time(key.fileobj, FRAME)
    except ConnectionResetError as e:
        chunk, when, reqs[i].error = b"", time.time(), _os_error(e)
    got.pop(i)
    reqs[i].end, reqs[i].size = when, len(chunk)
    if chunk:
        reqs[i].reply = chunk.split(b"\0", 1)[0].decode("utf-8", "replace")
    elif not reqs[i].error:
        reqs[i].error = EMPTY


def window(port: int, reqs: list, outstanding: int, timeout: float, queued=None,
           before_last=None) -> tuple:
    """The grader's clock probe: one connection per request, all opened first (a kit-style
    server accepts each and parks a thread in read()); then `outstanding` requests are
    sent at once and every reply sends the next, in the order the connections were opened,
    until the last `outstanding` requests, of which one goes out every second reply. So
    the server holds a long queue of requests through the batch while new ones keep
    arriving, and the queue runs down before the last arrival: under one lock a request
    waits for the ones queued before it, and a clock that leaves that wait out (started
    after the lock, or a start time another thread wrote) shows a small part of it.
    Sets each request's start (sent), end (its reply reached this host's kernel: our own
    delays are not counted), both time.time() seconds, and reply. queued() (optional)
    counts the connections not accepted yet: the first send waits (at most `timeout`)
    for 0; before_last() (optional) just before the last request is sent. Returns ('' or
    the first failure, which ends it; that count then, or None)."""
    try:
        socks = _open_all(port, len(reqs), timeout)
    except OSError as e:
        return f"opening {len(reqs)} connections: {type(e).__name__}: {e.strerror or e}", None
    frames = [frame(request_text(r.pos, r.is_read, r.text)) for r in reqs]
    left = _accepted(queued, timeout)
    sel = selectors.DefaultSelector()
    got: dict = {}
    nxt, replies, taper = 0, 0, len(reqs) - outstanding

    def send_next():
        nonlocal nxt
        if nxt == len(reqs) - 1 and before_last is not None:  # what a server wrote by now
            before_last()                                    # cannot be about the batch
        reqs[nxt].start = time.time()
        socks[nxt].sendall(frames[nxt])
        sel.register(socks[nxt], selectors.EVENT_READ, nxt)
        got[nxt] = b""
        nxt += 1

    try:
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        while nxt < min(outstanding, len(reqs)):
            send_next()
        while got:
            events = sel.select(timeout)
            if not events:
                return f"{len(got)} replies missing after {timeout:g} s", left
            for key, _ in events:
                _take_reply(key, got, reqs)
                sel.unregister(key.fileobj)
                key.fileobj.close()
                replies += 1
                if nxt < len(reqs) and (nxt < taper or replies % 2 == 0 or not got):
                    send_next()
        return "", left
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}", left
    finally:
        sel.close()
        for s in socks:
            s.close()


SETTLE_AFTER_S = 0.003   # from the last accept to the threads parked in read()


def _settle(settle_s: float, queued) -> None:
    end = time.monotonic() + settle_s
    while queued is not None and time.monotonic() < end:
        waiting = queued()
        if waiting is None:
            break
        if waiting == 0:
            time.sleep(min(SETTLE_AFTER_S, max(0.0, end - time.monotonic())))
            return
        time.sleep(0.001)
    time.sleep(max(0.0, end - time.monotonic()))


def burst(port: int, positions: list, timeout: float, settle_s: float = 0.05,
          read: bool = False, queued=None):
    """The grader's own concurrency measurement: one connection per position, all opened
    first (a kit-style server accepts each and parks a thread in read()), then one write
    (or read) request sent on every connection at once; returns (seconds from the first send
    to the last reply, '') or (None, what went wrong). A connection closed without a reply
    ends its request as a reply would (a server that died doing so is the caller's to see).
    With one lock held across each access's usleep the replies come out one delay apart;
    with a lock per slot they overlap.
    queued(): connections still waiting to be accepted (None: unknown). With it the
    requests go out SETTLE_AFTER_S after the server accepted every connection, at most
    settle_s after they were opened; without it, settle_s after."""
    socks, sel = [], selectors.DefaultSelector()
    try:
        for _ in positions:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=timeout))
        _settle(settle_s, queued)
        frames = [frame(request_text(p, read, "" if read else f"burst {p}"))
                  for p in positions]
        t0 = time.monotonic()
        for s, f in zip(socks, frames):
            s.sendall(f)
        got = {}
        for s in socks:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
            got[s] = 0
        last, deadline = t0, t0 + timeout
        while got:
            events = sel.select(max(0.0, deadline - time.monotonic()))
            if not events:
                return None, f"{len(got)} of {len(positions)} replies missing after {timeout:g} s"
            for key, _ in events:
                s = key.fileobj
                with contextlib.suppress(ConnectionResetError):
                    s.recv(FRAME)   # the kit's one read(): a reply, 0 bytes or a reset,
                last = time.monotonic()   # the server is done with the request each way
                sel.unregister(s)
                del got[s]
        return last - t0, ""
    except OSError as e:
        return None, f"{type(e).__name__}: {e.strerror or e}"
    finally:
        sel.close()
        for s in socks:
            s.close()
