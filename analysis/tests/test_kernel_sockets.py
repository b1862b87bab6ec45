"""kernel_sockets against real sockets opened by the test (and by child processes it
starts): LISTEN seen in /proc/net/tcp{,6}, restricted to a process tree, the byte-swapped
twin, a process that exits or is killed first, a timeout, and no connection ever made."""

import socket
import subprocess
import sys

import pytest

from analysis.kernel_sockets import (
    describe_exit,
    listening_ports,
    parse_table,
    process_tree,
    wait_for_port,
)
from analysis.launch.procs import pick_port
from analysis.ports import twin

# A child that listens on argv[1] (after argv[2] seconds) until a line arrives on its
# stdin, then prints "connected" if anyone connected meanwhile, else "untouched".
LISTENER = """
import socket, sys, time
time.sleep(float(sys.argv[2]))
s = socket.socket(socket.AF_INET6 if sys.argv[3] == "6" else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::1" if sys.argv[3] == "6" else "127.0.0.1", int(sys.argv[1])))
s.listen()
sys.stdin.readline()
s.setblocking(False)
try:
    s.accept()
    print("connected", flush=True)
except BlockingIOError:
    print("untouched", flush=True)
"""


def listener(port, delay=0.0, family="4", via_shell=False):
    argv = [sys.executable, "-c", LISTENER, str(port), str(delay), family]
    if via_shell:  # the listener is a grandchild: sh -> python
        argv = ["sh", "-c", '"$@"; exit 0', "sh", *argv]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def wait(ports, p, timeout):
    """The one readiness wait on process p's tree, as the launcher waits for a server."""
    return wait_for_port(ports, lambda: listening_ports([p.pid]), lambda: p.poll() is None,
                         timeout, 0.01)


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_own_listener_seen_ipv4_and_ipv6_bound_only_not():
    port4, port6, bound = pick_port(), pick_port(), pick_port()
    with socket.socket() as a, socket.socket(socket.AF_INET6) as b, socket.socket() as c:
        a.bind(("127.0.0.1", port4))
        a.listen()
        b.bind(("::1", port6))
        b.listen()
        c.bind(("127.0.0.1", bound))  # bound, not listening
        up = listening_ports()
        assert port4 in up and port6 in up
        assert bound not in up
    assert port4 not in listening_ports()  # closed: gone from the table


def test_restricted_to_process_tree(procs):
    mine = pick_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", mine))
        s.listen()
        port = pick_port()
        p = listener(port, via_shell=True)
        procs.append(p)
        assert wait([port], p, timeout=30) == (port, "")
        tree_ports = listening_ports([p.pid])
        assert port in tree_ports       # held by the grandchild
        assert mine not in tree_ports   # ours, not the tree's
        assert len(process_tree([p.pid])) >= 2
        assert p.communicate("go\n", timeout=30)[0].strip() == "untouched"


def test_twin_and_order(procs):
    port = pick_port()
    p = listener(twin(port), delay=0.2, family="6")
    procs.append(p)
    assert wait([port, twin(port)], p, timeout=30) == (twin(port), "")
    assert p.communicate("go\n", timeout=30)[0].strip() == "untouched"  # never connected to


def test_exit_before_listening_names_status(procs):
    p = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    procs.append(p)
    assert wait([pick_port()], p, timeout=10) == (None, "exited")
    assert p.returncode == 3
    assert describe_exit(p.returncode) == "exit status 3"


def test_killed_by_signal_names_it(procs):
    p = subprocess.Popen([sys.executable, "-c",
                          "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    procs.append(p)
    assert wait([pick_port()], p, timeout=10) == (None, "exited")
    assert "SIGSEGV" in describe_exit(p.returncode) and p.returncode == -11


def test_timeout_leaves_process_running(procs):
    # a wait that did not keep to its timeout would see the exit, 30 s later ("exited")
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    procs.append(p)
    assert wait([pick_port()], p, timeout=0.3) == (None, "timeout")
    assert p.poll() is None


def test_parse_table_and_describe_exit():
    text = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
            "timeout inode\n"
            "   0: 0100007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0 0 "
            "4242 1 0 100 0 0 10 0\n"
            "garbage line\n")
    assert parse_table(text) == [(3000, "0A", 4242)]
    assert describe_exit(0) == "exit status 0"
    assert describe_exit(-15) == "killed by signal SIGTERM (15)"


def test_netlink_and_proc_agree_on_listeners_and_their_accept_queues():
    # the grader polls through sock_diag netlink; /proc/net/tcp{,6} is the fallback
    from pathlib import Path

    from analysis import kernel_sockets as ks

    with socket.socket() as four, socket.socket(socket.AF_INET6) as six:
        four.bind(("127.0.0.1", pick_port()))
        four.listen(8)
        six.bind(("::1", pick_port()))
        six.listen(8)
        waiting = [socket.create_connection(four.getsockname()[:2]) for _ in range(3)]
        try:
            via_netlink = ks.listeners()
            assert via_netlink is not None, "sock_diag netlink unavailable here"
            via_proc = [(p, q) for p, st, q in ks._tables(Path("/proc/net"), queue=True)
                        if st == ks._LISTEN]
            assert sorted(set(via_netlink)) == sorted(set(via_proc))
            assert ks.accept_queue(four.getsockname()[1]) == 3
            assert ks.accept_queue(six.getsockname()[1]) == 0
            assert {four.getsockname()[1], six.getsockname()[1]} <= listening_ports()
        finally:
            for c in waiting:
                c.close()
