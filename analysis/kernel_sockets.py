"""Which TCP ports listen, read from the kernel's socket table (never by connecting).

A kit-style server prints nothing when it is ready and may crash on an empty connection
(a kit-style server prints nothing when it listens), so readiness is seen the only way that does not
touch it: a socket in LISTEN state in /proc/net/tcp or /proc/net/tcp6.

With `pids`, only sockets held by those processes or their descendants count (matched by
socket inode from /proc/PID/fd), and the table is read through /proc/PID/net/, i.e. in the
process's own network namespace: a server started by bubblewrap with --unshare-net is seen
too. If none of the fds can be read (another user's process, not dumpable), every listening
socket of the processes' network namespaces counts.

Linux only. Pure reads of /proc; no state; safe from any thread.
"""

import os
import signal
import socket
import struct
import time
from pathlib import Path

_LISTEN = "0A"  # TCP_LISTEN in include/net/tcp_states.h, as /proc/net/tcp prints it
_TCP_LISTEN = 10
# sock_diag netlink (include/uapi/linux/{netlink,sock_diag,inet_diag}.h)
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY = 4, 20
_NLM_F_REQUEST, _NLM_F_DUMP, _NLMSG_ERROR, _NLMSG_DONE = 0x1, 0x300, 2, 3
_NLMSG_HDR = struct.Struct("=IHHII")           # length, type, flags, seq, pid
_DIAG_REQ = struct.Struct("=BBBBI48x")         # inet_diag_req_v2: family, protocol, ext,
                                               # pad, states; inet_diag_sockid left zero
_DIAG_MSG_LEN = 72                             # inet_diag_msg: state at 1, the port
                                               # (big-endian) at 4, rqueue at 56


def describe_exit(returncode: int) -> str:
    """Popen.returncode in words: 'exit status 3' or 'killed by signal SIGSEGV (11)'."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "signal"
        return f"killed by signal {name} ({-returncode})"
    return f"exit status {returncode}"


def parse_table(text: str, queue: bool = False) -> list:
    """The rows of a /proc/net/tcp{,6} file -> [(port, state, inode)] (state as the
    kernel prints it, e.g. '0A' for LISTEN), with queue=True [(port, state, rx_queue)]
    (for a LISTEN socket: connections waiting to be accepted). Malformed lines are
    skipped."""
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10:
            continue
        _, _, port_hex = f[1].rpartition(":")
        try:
            last = int(f[4].rpartition(":")[2], 16) if queue else int(f[9])
            out.append((int(port_hex, 16), f[3].upper(), last))
        except ValueError:
            continue
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _dump_rows(s: socket.socket, seq: int) -> list | None:
    """The (port, queued) rows of one sock_diag dump; None on an error reply."""
    rows = []
    while True:
        data, off = s.recv(1 << 16), 0
        while off + _NLMSG_HDR.size <= len(data):
            length, kind, _flags, mseq, _pid = _NLMSG_HDR.unpack_from(data, off)
            if kind == _NLMSG_DONE and mseq == seq:
                return rows
            if kind == _NLMSG_ERROR or length < _NLMSG_HDR.size:
                return None
            m = off + _NLMSG_HDR.size
            if mseq == seq and length >= _NLMSG_HDR.size + _DIAG_MSG_LEN and \
                    data[m + 1] == _TCP_LISTEN:
                rows.append((struct.unpack_from("!H", data, m + 4)[0],
                             struct.unpack_from("=I", data, m + 56)[0]))
            off += (length + 3) & ~3
        if not data:
            return None


def listeners() -> list | None:
    """[(port, connections waiting to be accepted)] of this network namespace's listening
    TCP sockets, IPv4 and IPv6, asked of the kernel by sock_diag netlink, which walks only
    the listening sockets: /proc/net/tcp formats every socket, and after a kit workload
    thousands sit in TIME_WAIT, so polling it costs the servers under test whole
    milliseconds of CPU. None where netlink is not available (the callers then read
    /proc)."""
    try:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG)
    except OSError:
        return None
    rows: list = []
    with s:
        s.settimeout(5)
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), 1):
            req = _DIAG_REQ.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN)
            try:
                s.send(_NLMSG_HDR.pack(_NLMSG_HDR.size + len(req), _SOCK_DIAG_BY_FAMILY,
                                       _NLM_F_REQUEST | _NLM_F_DUMP, seq, 0) + req)
                got = _dump_rows(s, seq)
            except OSError:
                return None
            if got is None:
                return None
            rows += got
    return rows


def _tables(net_dir: Path, queue: bool = False) -> list:
    return [row for name in ("tcp", "tcp6") for row in parse_table(_read(net_dir / name), queue)]


def _own_listeners() -> list:
    """listeners(), or the same rows from /proc where netlink is not available."""
    rows = listeners()
    if rows is None:
        rows = [(p, queued) for p, st, queued in _tables(Path("/proc/net"), queue=True)
                if st == _LISTEN]
    return rows


def accept_queue(port: int) -> int | None:
    """Connections waiting to be accepted on this namespace's listener on `port`, or None
    if nothing listens there."""
    return next((queued for p, queued in _own_listeners() if p == port), None)


def _children(pid: int) -> list | None:
    """pid's children from /proc/PID/task/*/children (None if the kernel lacks the file:
    CONFIG_PROC_CHILDREN)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue      # the thread ended meanwhile
            return None       # no children file: this kernel has no CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return out


def process_tree(pids) -> set:
    """The given pids and all their live descendants (from /proc/PID/task/*/children, or a
    scan of /proc/*/stat where the kernel lacks that file)."""
    seen, todo = set(), [int(p) for p in pids]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        kids = _children(p)
        if kids is None:
            return _process_tree_by_scan(pids)
        seen.add(p)
        todo.extend(kids)
    return seen


def _process_tree_by_scan(pids) -> set:
    children: dict = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        stat = _read(d / "stat")
        if not stat:
            continue
        try:  # "pid (comm) state ppid ...": comm may hold spaces and parentheses
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    seen, todo = set(), [int(p) for p in pids]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(children.get(p, []))
    return seen


def socket_inodes(pid: int) -> set | None:
    """Inodes of the sockets process `pid` holds open; None if its fds cannot be read."""
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return None
    out = set()
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def listening_ports(pids=None) -> set:
    """TCP ports (IPv4 and IPv6) in LISTEN state. pids=None: every listener of this
    process's network namespace. Otherwise only listeners held by those processes or their
    descendants, read in their own network namespaces; empty if they are all gone."""
    if pids is None:
        return {port for port, _ in _own_listeners()}
    tree = process_tree(pids)
    inodes, readable, rows, netns_seen = set(), False, [], set()
    for pid in tree:
        got = socket_inodes(pid)
        if got is not None:
            readable = True
            inodes |= got
        try:
            ns = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            ns = f"pid{pid}"
        if ns not in netns_seen:
            netns_seen.add(ns)
            rows += _tables(Path(f"/proc/{pid}/net"))
    return {port for port, st, inode in rows
            if st == _LISTEN and (inode in inodes or not readable)}


def wait_for_port(want, listening, alive, timeout: float, poll_s: float) -> tuple:
    """The one readiness wait of every server lockbench starts (here, in the grader's
    sandbox, on a remote host): polls `listening()` (the ports in LISTEN state where the
    server runs, read from the kernel's socket table: listening_ports([pid]) here, of the
    sandbox's own network namespace there, /proc/net/tcp on a remote host; never a
    connection, which a kit-style server would count toward its batch; for our own servers
    here, the ports their listening line names) until it holds one of `want`.
    Returns (that port, the first of `want` in order when several listen, '') or (None,
    'exited') once `alive()` is false or (None, 'timeout') after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        up = listening()
        for p in want:
            if p in up:
                return p, ""
        if not alive():
            return None, "exited"
        if time.monotonic() >= deadline:
            return None, "timeout"
        time.sleep(poll_s)
