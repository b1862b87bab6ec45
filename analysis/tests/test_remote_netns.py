"""Servers and load agents on other hosts: the runner's --server-host and
--client-host prefixes, the agents' merged histograms, and a real run across network
namespaces joined by veth pairs on a bridge (root only; traffic stays in namespaces this
test creates, addresses 10.77.0.0/24 that exist only there)."""

import contextlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from analysis.runner import agents as AG
from analysis.runner import remote as RM
from analysis.tests.helpers import cli
from analysis.tests.test_runner import interrupt_lab, procs_of, rows

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.netns]

T = 120


# ---- pure parts -----------------------------------------------------------------------------

def test_split_and_shares():
    assert AG.split(100, 2) == [50, 50] and AG.split(7, 3) == [3, 2, 2]
    sh = AG.agent_shares(100, 1000, None, 2)
    assert [(x["threads"], x["requests"]) for x in sh] == [(50, 500), (50, 500)]
    sh = AG.agent_shares(3, None, 300.0, 2)      # open loop: rate in proportion to threads
    assert [(x["threads"], x["rate"]) for x in sh] == [(2, 200.0), (1, 100.0)]
    assert len(AG.agent_shares(1, 10, None, 3)) == 1   # no agent without a thread


def test_merge_adds_buckets_and_never_averages_percentiles():
    fast = {"count": 3, "sum_ns": 30, "min_ns": 10, "max_ns": 10, "buckets": [[10, 10, 3]]}
    slow = {"count": 1, "sum_ns": 1000, "min_ns": 1000, "max_ns": 1000,
            "buckets": [[996, 999, 0], [1000, 1003, 1]]}
    m = AG.merge_histograms([fast, slow])
    assert m["count"] == 4 and m["sum_ns"] == 1030 and (m["min_ns"], m["max_ns"]) == (10, 1000)
    # p50 of the merged samples is 10 ns (3 of 4 samples); averaging the agents' medians
    # would say 505.
    assert AG.percentile_ns(m, 0.5) == 10 and AG.percentile_ns(m, 0.99) == 1000
    lat = AG.latency_us(m)
    assert lat["mean"] == pytest.approx(1030 / 4 / 1e3) and lat["p50"] == 0.01


@pytest.mark.parametrize("text,ok", [("ssh user@host", True), ("ip netns exec x", True),
                                     ("", False), ("'unclosed", False)])
def test_host_prefix_parse(text, ok):
    if ok:
        assert RM.Host.parse(text).prefix == tuple(text.split())
    else:
        with pytest.raises(ValueError):
            RM.Host.parse(text)


def test_client_start_at_and_histogram_out(real_bin, tmp_path):
    """The client's two options for agents: --start-at waits for the wall-clock time before
    the run (the wait is not in the measured window); --histogram-out holds every answered
    request once; a bad or too-far --start-at is refused with exit 2."""
    import time

    from analysis.launch.procs import pick_port
    from analysis.launch.server_spec import Options, Place, ServerSpec, launch
    client = str(real_bin / "client")
    port = pick_port()
    spec = ServerSpec("main1", "lockbench", real_bin / "main1")
    with launch(spec, 10, port, Place(tmp_path), log_file=tmp_path / "log",
                opts=Options(time_file=tmp_path / "t")):
        hist = tmp_path / "h.json"
        t0 = time.time_ns()
        r = subprocess.run([client, "10", "127.0.0.1", str(port), "--threads", "4",
                            "--requests", "200", "--format", "json", "--quiet",
                            "--start-at", str(t0 + 700_000_000), "--histogram-out", hist],
                           capture_output=True, text=True, timeout=60)
        waited = (time.time_ns() - t0) / 1e9
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    # the measured window opens at --start-at, so the process lasted the wait and the window
    # (a window that held the wait would leave only the start-up outside it); a lower bound,
    # which no load can break (5 ms: the window's rounding)
    assert waited >= 0.7 + doc["results"]["elapsed_s"] - 0.005
    h = json.loads(hist.read_text())["runs"]
    assert len(h) == 1 and h[0]["count"] == doc["results"]["ok"] == 200
    assert sum(c for _, _, c in h[0]["buckets"]) == 200
    assert all(lo <= hi for lo, hi, _ in h[0]["buckets"])
    for bad in ("abc", "-1", str(time.time_ns() + 2 * 86400 * 10**9)):
        r = subprocess.run([client, "10", "127.0.0.1", str(port), "--start-at", bad],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
        assert "--start-at" in r.stderr


def test_histogram_out_matches_the_clients_own_percentiles(real_bin, tmp_path):
    """One agent's histogram, read back by the merger, gives exactly the client's own
    percentiles: the layouts agree."""
    res = tmp_path / "r"
    r = cli("sweep", "--kind", "threads", "--values", "4", "--sweep-servers", "main1",
            "--base-n", "10", "--duration", "0.3", "--warmup", "0", "--reps", "1",
            "--no-progress", "--bin-dir", real_bin, "--results-dir", res,
            "--server-host", "env", "--server-addr", "127.0.0.1", "--client-host", "env",
            timeout=T)
    assert r.returncode == 0, r.stderr
    doc = json.loads((res / "sweep_threads_client.jsonl").read_text())["client"]
    own = doc["agents"][0]["results"]["latency_us"]
    merged = doc["results"]["latency_us"]
    for k in ("p50", "p90", "p99", "p999", "max", "min"):
        assert merged[k] == own[k], k
    assert merged["mean"] == pytest.approx(own["mean"], rel=1e-9)
    assert procs_of(real_bin) == []


def test_server_host_and_two_agents_through_env(real_bin, tmp_path):
    """`env` as the prefix runs on this machine: the remote code path without root."""
    res = tmp_path / "r"
    r = cli("lab", "--servers", "main2", "--n", "10", "--runs", "2", "--no-progress",
            "--bin-dir", real_bin, "--results-dir", res, "--server-host", "env",
            "--server-addr", "127.0.0.1", "--client-host", "env", "--client-host", "env",
            timeout=T)
    assert r.returncode == 0, r.stderr
    lab = rows(res / "lab.csv")
    assert [x["ok"] for x in lab] == ["1000", "1000"] and all(
        x["time_lines"] == "1" and float(x["latency_s"]) > 0 for x in lab)
    ag = rows(res / "agents.csv")
    assert [(x["rep"], x["agent"], x["ok"]) for x in ag] == [
        ("1", "1", "500"), ("1", "2", "500"), ("1", "all", "1000"),
        ("2", "1", "500"), ("2", "2", "500"), ("2", "all", "1000")]
    srv = rows(res / "lab_servers.csv")
    assert srv[0]["exit_code"] == "0" and "summary" in srv[0]["summary"]
    assert len((res / "time" / "time_s2_n10").read_text().splitlines()) == 2
    assert (res / "traces" / "main2_n10.csv").stat().st_size > 0
    meta = json.loads((res / "metadata.json").read_text())
    assert [h["role"] for h in meta["server_setup"]["hosts"]] == [
        "server", "client agent 1", "client agent 2"]
    assert procs_of(real_bin) == []


def test_interrupt_stops_the_remote_server_and_resume_finishes(real_bin, tmp_path):
    res = tmp_path / "r"
    interrupt_lab(real_bin, res, "--server-host", "env", "--server-addr", "127.0.0.1",
                  "--client-host", "env")
    assert procs_of(real_bin) == []          # neither the server nor an agent is left
    log = (res / "logs" / "lab_main1_n10.log").read_text()
    assert "# exit=0" in log and "main1: summary" in log   # SIGTERM over the prefix
    r = cli("lab", "--resume", res, "--bin-dir", real_bin, "--no-progress", timeout=T)
    assert r.returncode == 0, r.stderr
    assert [int(x["rep"]) for x in rows(res / "lab.csv")] == list(range(1, 21))
    assert len([a for a in rows(res / "agents.csv") if a["agent"] == "all"]) >= 20
    assert procs_of(real_bin) == []


def test_kit_style_server_on_a_host(real_bin, tmp_path):
    """Anyone's lab server through a prefix: the kit's command line there, its
    server_output_time_aggregated read there and brought back, SIGTERM a normal stop."""
    from analysis.tests.test_runner_foreign import build_fixture, kit_procs
    kit = build_fixture("correct", tmp_path)
    res = tmp_path / "r"
    r = cli("lab", "--servers", "main3", "--n", "10", "--runs", "2", "--no-progress",
            "--bin-dir", kit, "--client", real_bin / "client", "--results-dir", res,
            "--server-host", "env", "--server-addr", "127.0.0.1", "--client-host", "env",
            "--client-host", "env", timeout=T)
    assert r.returncode == 0, r.stderr
    lab = rows(res / "lab.csv")
    assert [x["ok"] for x in lab] == ["1000", "1000"] and all(
        x["time_lines"] == "1" and x["delay_us"] == "" for x in lab)
    assert len((res / "time" / "time_s3_n10").read_text().splitlines()) == 2
    assert [x["exit_code"] for x in rows(res / "lab_servers.csv")] == ["-15"]
    assert kit_procs(kit) == []


def test_host_refusals_exit_2(real_bin, tmp_path):
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "sha256sum").write_text("#!/bin/sh\nfor f; do [ \"$f\" = -- ] || "
                                    "echo \"0000000000000000  $f\"; done\n")
    (fake / "sha256sum").chmod(0o755)
    cases = [
        (["--server-host", "env"], "needs --server-addr"),
        (["--server-addr", "10.0.0.1"], "needs --server-host"),
        (["--client-host", "env"], "needs --server-host"),
        (["--server-host", "env", "--server-addr", "nope"], "not a numeric"),
        (["--server-host", "false", "--server-addr", "127.0.0.1"], "does not answer"),
        (["--server-host", f"env PATH={fake}:/usr/bin:/bin", "--server-addr", "127.0.0.1"],
         "differs from this machine's"),
    ]
    for extra, needle in cases:
        r = cli("lab", "--servers", "main1", "--n", "10", "--runs", "1", "--bin-dir",
                real_bin, "--results-dir", tmp_path / "r", *extra, timeout=T)
        err = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(err) == 1 and needle in err[0], (extra, r.stderr)
        assert not (tmp_path / "r").exists()


# ---- across network namespaces --------------------------------------------------------------

def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=30)


def _netns_list() -> set:
    return {ln.split()[0] for ln in _ip("netns", "list").stdout.splitlines() if ln.strip()}


def _rx_packets(ns: str) -> int:
    return json.loads(_ip("-n", ns, "-j", "-s", "link", "show", "eth0").stdout)[0][
        "stats64"]["rx"]["packets"]


def _delete(names):
    for ns in names:
        _ip("netns", "delete", ns, check=False)


@pytest.fixture
def lab_net(request):
    """A bridge namespace and three namespaces (server, two clients), each joined to the
    bridge by a veth pair; 10.77.0.1 server, .2 and .3 clients. Names carry the pid.
    Deleted by the finalizer (also on an error or Ctrl-C inside the test)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not shutil.which("ip"):
        pytest.skip("iproute2 (ip) missing")
    tag = f"lb{os.getpid()}"
    br, names = f"{tag}br", {"server": f"{tag}s", "c1": f"{tag}c1", "c2": f"{tag}c2"}
    made = [br, *names.values()]
    request.addfinalizer(lambda: _delete(made))
    # Can this system host a network namespace at all (a chroot without /run and /sys
    # mounted cannot)? If not, skip with its reason; past this point a failure is one.
    probe = _ip("netns", "add", br, check=False)
    if probe.returncode == 0:
        probe = _ip("-n", br, "link", "set", "lo", "up", check=False)
    if probe.returncode != 0:
        _delete([br])
        pytest.skip("cannot make a network namespace here: "
                    + ((probe.stderr or "").strip().splitlines() or ["ip failed"])[-1])
    try:
        for ns in made:
            if ns != br:
                _ip("netns", "add", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", br, "link", "add", "br0", "type", "bridge")
        _ip("-n", br, "link", "set", "br0", "up")
        for i, ns in enumerate(names.values(), start=1):
            _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"p{i}",
                "netns", br)
            _ip("-n", br, "link", "set", f"p{i}", "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"10.77.0.{i}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
        # netem where the kernel has it: 2 ms each way on every client link.
        netem = subprocess.run(["ip", "netns", "exec", names["c1"],
                                shutil.which("tc") or "tc", "qdisc", "add", "dev", "eth0",
                                "root", "netem", "delay", "2ms"],
                               capture_output=True, text=True, timeout=30)
        delay_ms = 0.0
        if netem.returncode == 0:
            for ns in (names["c2"], names["server"]):
                subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev",
                                "eth0", "root", "netem", "delay", "2ms"], check=True,
                               timeout=30)
            delay_ms = 4.0    # a client's round trip: its link and the server's, each 2 ms
        else:
            why = (netem.stderr.strip().splitlines() or ["tc failed"])[-1]
            print(f"\nnote: no netem on this kernel ({why}): the links have no emulated "
                  "delay and the latency-floor check is skipped", file=sys.stderr)
        ping = subprocess.run(["ip", "netns", "exec", names["c2"], "ping", "-c", "1", "-W",
                               "2", "10.77.0.1"], capture_output=True, timeout=30)
        if shutil.which("ping") and ping.returncode != 0:
            pytest.fail("the namespaces do not reach each other")
    except BaseException:
        _delete(made)
        raise
    yield {"names": names, "made": made, "delay_ms": delay_ms}
    _delete(made)


def test_lab_and_two_agent_keepalive_sweep_across_namespaces(lab_net, real_bin, tmp_path,
                                                             capsys):
    names = lab_net["names"]
    hosts = ["--server-host", f"ip netns exec {names['server']}", "--server-addr", "10.77.0.1",
             "--client-host", f"ip netns exec {names['c1']}",
             "--client-host", f"ip netns exec {names['c2']}"]
    try:
        rx = {ns: _rx_packets(ns) for ns in names.values()}
        res = tmp_path / "lab"
        r = cli("lab", "--servers", "main1,main4", "--n", "10", "--runs", "2", "--no-progress",
                "--bin-dir", real_bin, "--results-dir", res, *hosts, timeout=T)
        assert r.returncode == 0, r.stderr
        lab = rows(res / "lab.csv")
        assert len(lab) == 4 and all(x["ok"] == "1000" and x["errors"] == "0"
                                     and x["time_lines"] == "1" for x in lab)
        ag = rows(res / "agents.csv")
        for x in lab:   # request counts add up across the two agents
            mine = [a for a in ag if (a["server"], a["rep"]) == (x["server"], x["rep"])]
            per = [int(a["ok"]) for a in mine if a["agent"] != "all"]
            assert len(per) == 2 and sum(per) == int(x["ok"])
        # Real links: 4 x 1000 requests, one connection each, crossed the server's veth,
        # and each client namespace's veth carried its agents' half.
        got = {ns: _rx_packets(ns) - rx[ns] for ns in names.values()}
        assert got[names["server"]] >= 4 * 1000 * 3, got
        assert got[names["c1"]] >= 4 * 500 * 2 and got[names["c2"]] >= 4 * 500 * 2, got
        for line in (res / "logs" / "lab_main1_n10.log").read_text().splitlines():
            if line.startswith("# ") and "main1 10 " in line:
                assert " 10 10.77.0.1 " in line      # bound to the namespace's address
        res2 = tmp_path / "sweep"
        r = cli("sweep", "--kind", "threads", "--values", "4", "--connection", "keepalive",
                "--sweep-servers", "main3", "--base-n", "100", "--duration", "0.4",
                "--warmup", "0.1", "--reps", "1", "--no-progress", "--bin-dir", real_bin,
                "--results-dir", res2, *hosts, timeout=T)
        assert r.returncode == 0, r.stderr
        sw = rows(res2 / "sweep_threads.csv")
        ag = rows(res2 / "agents.csv")
        per = [a for a in ag if a["agent"] != "all"]
        assert len(sw) == 1 and len(per) == 2 and all(int(a["ok"]) > 0 for a in per)
        assert sum(int(a["ok"]) for a in per) == int(sw[0]["ok"])
        assert float(sw[0]["throughput_rps"]) == pytest.approx(
            sum(float(a["throughput_rps"]) for a in per))
        assert float(sw[0]["lat_max_us"]) == max(float(a["lat_max_us"]) for a in per)
        assert (min(float(a["lat_p50_us"]) for a in per) <= float(sw[0]["lat_p50_us"])
                <= max(float(a["lat_p50_us"]) for a in per))
        if lab_net["delay_ms"]:
            assert float(sw[0]["lat_min_us"] if "lat_min_us" in sw[0] else
                         sw[0]["lat_p50_us"]) >= lab_net["delay_ms"] * 1e3
        else:
            with capsys.disabled():
                print("\nnote: netem missing: latency floor vs emulated round trip not "
                      "checked", file=sys.stderr)
        # The report's setup lists every host with its role.
        out = tmp_path / "report"
        r = cli("report", "--results", res, "--out", out, "--microbench", "none", timeout=T)
        assert r.returncode == 0, r.stderr
        md = (out / "REPORT.md").read_text()
        for role in ("server", "client agent 1", "client agent 2"):
            assert f"| Host: {role} |" in md, md[:3000]
        # ... and each agent's throughput next to the merged row.
        assert "## Load agents" in md and md.count("| **merged** |") == 2   # main1, main4
        assert md.count(f"`ip netns exec {names['c1']}`") == 3   # setup row, 2 agent rows
        assert (out / "tables" / "agents.csv").is_file()
        assert procs_of(real_bin) == []
    finally:
        with contextlib.suppress(Exception):
            _delete(lab_net["made"])
    assert not (set(lab_net["made"]) & _netns_list()), "namespaces left behind"
