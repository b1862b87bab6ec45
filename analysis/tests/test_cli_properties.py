"""Property-based tests (Hypothesis) of `python -m analysis lab/sweep/all/report`: for
generated values of every option, the command is either refused with exit 2 and exactly
one line on stderr, or it starts and ends within a bound (exit 0, or 1 with one error
line); a traceback is a failure, and no server or client outlives the runner.

Two properties: the parser in-process over the full value ranges (hundreds of examples,
milliseconds each), and the real command end to end against the real build with tiny
settings (a few dozen examples). Total well under 2 minutes."""

import contextlib
import io
import math
import os
import signal
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis import __main__ as M
from analysis.runner import cli as RC
from analysis.tests.helpers import PY, RELEASE, REPO, link_real_binaries
from analysis.tests.test_runner import procs_of

ADVERSARIAL = ["nan", "NaN", "inf", "-inf", "infinity", "1e999", "-1e999", "0x10", "0o17",
               "010", "03000", "1_000", " 1", "1 ", "", "-1", "0", "-0", "1.5", "0.5", "2.0",
               "1e3", "65536", "4097", "1000001", "10000001", "١٢", "+5", ".5", "5.",
               "9" * 30, "-", ",", "1,,2", "a", "main5", "%s", "\\n"]

# option -> (kind, lo, hi): the contract a value that gets through the parser must meet.
NUMERIC = {
    "--port": ("int", 1, 65535), "--client-timeout": ("float", 1, 86400),
    "--n": ("ints", 1, RC.MAX_N), "--runs": ("int", 1, 1_000_000),
    "--delay-us": ("intf", 0, RC.MAX_DELAY_US), "--pause": ("float", 0, 3600),
    "--trace-limit": ("int", 0, 1_000_000_000), "--base-n": ("int", 1, RC.MAX_N),
    "--base-delay-us": ("intf", 0, RC.MAX_DELAY_US), "--read-ratio": ("float", 0, 1),
    "--threads": ("int", 1, RC.MAX_THREADS), "--duration": ("float", 0.01, 86400),
    "--warmup": ("float", 0, 86400), "--reps": ("int", 1, 1000),
}
LABELS = ["main1", "main2", "main3", "main4", "one-mutex", "striped-mutex:2",
          "seqlock-per-slot", "seqlock-per-slot:3", "striped-rwlock:0", "no-such-lock", "MAIN1"]
FLAGS = {"--quick", "--no-progress", "--no-sweeps", "--svg"}
OTHER = {"--servers", "--sweep-servers", "--kind", "--values", "--connection", "--bin-dir",
         "--results-dir", "--resume", "--results", "--out", "--microbench", "--server-cmd",
         "--client", "--server-host", "--client-host", "--server-addr"}
# Host prefixes that run nothing harmful: this machine (env), a prefix that runs nothing
# (true, false), one that does not exist, and unsplittable or empty ones.
HOST_PREFIXES = ["env", "env X=1", "true", "false", "/nonexistent/ssh h", "'unclosed", ""]
ADDRESSES = ["127.0.0.1", "::1", "10.77.0.9", "nope", "", "1.2.3", "127.0.0.1:80"]
SERVER_CMDS = ["{bin} {n} {ip} {port}", "{bin} {n} {ip} {port} --no-twin", "{bin} {n} {ip}",
               "{bin} {port} {nope}", "{bin} {n} {ip} {port:x}", "'{bin} {port}", "{}",
               "{0} {port}", "sh -c 'exit 3' sh {port}", "/nonexistent/server {port}",
               "{{ {port}", "{bin} {n} {ip} {port} --delay-us 0.5"]


def options_of(cmd: str) -> set:
    sub = next(a for a in M.build_parser()._actions if hasattr(a, "choices")
               and isinstance(a.choices, dict)).choices[cmd]
    return {s for a in sub._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


def test_every_option_has_a_generator():
    for cmd in ("lab", "sweep", "all", "report"):
        assert options_of(cmd) <= set(NUMERIC) | FLAGS | OTHER, cmd


def _num_text(lo, hi, small=None):
    """Numbers in and around [lo, hi] as text, floats in every form, adversarial strings."""
    top = hi if small is None else small
    return st.one_of(
        st.integers(int(lo), int(top)).map(str),
        st.integers(-10**12, 10**12).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f)),
        st.floats(min_value=lo, max_value=top).map(lambda f: f"{f:g}"),
        st.sampled_from(ADVERSARIAL),
        st.text(alphabet="0123456789.eExX_+- ,", max_size=8),
    )


def _list_text(items):
    return st.lists(items, min_size=1, max_size=3).map(",".join)


def value_for(option: str, paths: dict, small: bool):
    if option in NUMERIC:
        kind, lo, hi = NUMERIC[option]
        cap = {"--n": 50, "--runs": 2, "--delay-us": 20, "--pause": 0.05, "--trace-limit": 50,
               "--base-n": 50, "--base-delay-us": 20, "--threads": 4, "--duration": 0.1,
               "--warmup": 0.05, "--reps": 2, "--client-timeout": 20,
               "--port": hi}.get(option) if small else None
        one = _num_text(lo, hi, cap)
        return _list_text(one) if kind == "ints" else one
    if option in ("--servers", "--sweep-servers"):
        return st.one_of(_list_text(st.sampled_from(LABELS)), st.sampled_from(ADVERSARIAL))
    if option == "--kind":
        return st.one_of(st.sampled_from(["threads", "read-ratio", "n", "delay", "connection",
                                          "colour", "threads,n"]), st.sampled_from(ADVERSARIAL))
    if option == "--values":
        return st.one_of(_list_text(st.sampled_from(["1", "2", "0", "0.5", "10", "keepalive",
                                                     "per-request", "nan", "-1", "010"])),
                         st.sampled_from(ADVERSARIAL))
    if option == "--server-cmd":
        return st.one_of(st.sampled_from(SERVER_CMDS), st.text(max_size=12))
    if option == "--connection":
        return st.sampled_from(["per-request", "keepalive", "KEEPALIVE", "", "nan"])
    if option in ("--server-host", "--client-host"):
        return st.sampled_from(HOST_PREFIXES)
    if option == "--server-addr":
        return st.sampled_from(ADDRESSES)
    return st.sampled_from(paths[option])


def _check_value(option, value):
    kind, lo, hi = NUMERIC[option]
    vals = value if kind == "ints" else [value]
    for v in vals:
        assert isinstance(v, float if kind in ("float", "intf") else int), (option, v)
        assert math.isfinite(v) and lo <= v <= hi, (option, v)
        if kind == "intf":
            assert v == int(v), (option, v)


# ---- 1. the parser, in-process, over the full ranges ----------------------------------------

@pytest.fixture(scope="module")
def parse_paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("parse")
    (d / "file").write_text("")
    (d / "full").mkdir()
    (d / "full" / "x").write_text("")
    (d / "res").mkdir()
    (d / "res" / "metadata.json").write_text("{}")
    common = [str(d / "file"), str(d / "full"), str(d / "new"), "/nonexistent/x", ""]
    return {"--bin-dir": [str(RELEASE), *common], "--results-dir": common,
            "--client": [str(RELEASE / "client"), *common],
            "--resume": [str(d / "res"), *common], "--results": [str(d / "res"), *common],
            "--out": [str(d / "out"), *common],
            "--microbench": ["none", "NONE", str(d / "file"), *common]}


@st.composite
def parse_argv(draw, paths, small=False):
    cmd = draw(st.sampled_from(["lab", "sweep", "all", "report"]))
    opts = sorted(options_of(cmd))
    argv = [cmd]
    for option in draw(st.lists(st.sampled_from(opts), min_size=1, max_size=3)):
        if option in FLAGS:
            argv.append(option)
        else:
            # "--opt=value" so that a value beginning with '-' reaches the type check.
            argv.append(f"{option}={draw(value_for(option, paths, small))}")
    if cmd == "report" and not any(a.startswith("--results=") for a in argv):
        argv.append(f"--results={paths['--results'][0]}")
    return argv


def test_parser_property(parse_paths):
    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(argv=parse_argv(parse_paths))
    def prop(argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                ns = M.build_parser().parse_args(argv)
            except SystemExit as e:
                lines = err.getvalue().splitlines()
                assert e.code == 2 and len(lines) == 1, (argv, err.getvalue())
                assert lines[0].startswith("python -m analysis") and ": error: " in lines[0]
                return
        for option in NUMERIC:
            dest = option[2:].replace("-", "_")
            dest = {"kind": "kinds"}.get(dest, dest)
            if getattr(ns, dest, None) is not None and any(
                    a.startswith(option + "=") for a in argv):
                _check_value(option, getattr(ns, dest))
    prop()


# ---- 2. the real command, end to end, tiny settings -----------------------------------------

BOUND = 60.0     # seconds a started run may take before it is interrupted
BASE = {
    "lab": ["--servers", "main1", "--n", "10", "--runs", "1", "--delay-us", "0",
            "--trace-limit", "0", "--client-timeout", "10", "--no-progress"],
    "sweep": ["--kind", "threads", "--values", "1", "--sweep-servers", "main1", "--base-n", "10",
              "--base-delay-us", "0", "--duration", "0.05", "--warmup", "0", "--reps", "1",
              "--client-timeout", "10", "--no-progress"],
    "report": ["--microbench", "none"],
}
BASE["all"] = [*BASE["lab"], *BASE["sweep"][:-2], "--microbench", "none"]


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e")
    bin_dir = link_real_binaries(d / "bin")
    res = d / "done"
    r = subprocess.run([PY, "-m", "analysis", "lab", *BASE["lab"], "--bin-dir", str(bin_dir),
                        "--results-dir", str(res)], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    (d / "file").write_text("")
    (d / "full").mkdir()
    (d / "full" / "x").write_text("")
    return {"dir": d, "bin": bin_dir, "results": res, "count": [0]}


def e2e_paths(env):
    d = env["dir"]
    common = [str(d / "file"), str(d / "full"), "/nonexistent/x", ""]
    return {"--bin-dir": [str(env["bin"]), *common], "--results-dir": ["NEW", *common],
            "--client": [str(env["bin"] / "client"), *common],
            "--resume": [str(env["results"]), *common], "--results": [str(env["results"]),
                                                                      *common],
            "--out": ["NEWOUT", *common], "--microbench": ["none", str(d / "file"), *common]}


def run_bounded(argv, cwd) -> tuple[int, str, float]:
    """Runs the CLI; past BOUND it gets SIGINT (Ctrl-C) and must end within 15 s: 130, or
    killed by SIGINT if it came as the interpreter was exiting anyway."""
    import time
    t0 = time.monotonic()
    p = subprocess.Popen([PY, "-m", "analysis", *argv], cwd=cwd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env={**os.environ,
                                                                 "PYTHONPATH": str(REPO)})
    try:
        _, err = p.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)
        try:
            _, err = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            pytest.fail(f"did not end within {BOUND + 15} s even after Ctrl-C: {argv}")
        assert p.returncode in (130, -signal.SIGINT), (argv, err)
    return p.returncode, err, time.monotonic() - t0


@pytest.mark.slow  # starts the runner end to end, 25 times
def test_cli_end_to_end_property(e2e):
    env, paths = e2e, e2e_paths(e2e)

    @settings(max_examples=25, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def prop(data):
        cmd = data.draw(st.sampled_from(["lab", "sweep", "all", "report"]))
        opts = sorted(options_of(cmd))
        extra = []
        for option in data.draw(st.lists(st.sampled_from(opts), min_size=1, max_size=2)):
            if option in FLAGS:
                extra.append(option)
            else:
                extra.append(f"{option}={data.draw(value_for(option, paths, True))}")
        env["count"][0] += 1
        k = env["count"][0]
        fresh = {"NEW": str(env["dir"] / f"r{k}"), "NEWOUT": str(env["dir"] / f"o{k}")}
        extra = [a.split("=", 1)[0] + "=" + fresh.get(a.split("=", 1)[1], a.split("=", 1)[1])
                 if "=" in a else a for a in extra]
        where = (["--results", str(env["results"]), "--out", fresh["NEWOUT"]] if cmd == "report"
                 else ["--bin-dir", str(env["bin"]), "--results-dir", fresh["NEW"]]
                 + (["--out", fresh["NEWOUT"]] if cmd == "all" else []))
        if any(a.startswith("--resume=") for a in extra):
            where = [w for w in where if w not in ("--results-dir", fresh["NEW"])]
        argv = [cmd, *BASE[cmd], *where, *extra]
        code, err, _ = run_bounded(argv, env["dir"])
        assert "Traceback" not in err and "internal error" not in err, (argv, err)
        errors = [ln for ln in err.splitlines() if ": error: " in ln]
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and len(errors) == 1, (argv, err)
        elif code == 1:
            assert len(errors) == 1, (argv, err)
        else:
            assert code in (0, 130, -signal.SIGINT), (argv, code, err)
        assert (REPO / "report").resolve() not in [Path(fresh["NEWOUT"]).resolve()]
        assert procs_of(env["bin"]) == [], argv
    prop()


@pytest.mark.parametrize("command", ["lab", "grade", "profile", "compare"])
def test_every_entry_points_help_answers_without_the_venv(command):
    # ./lockbench X --help runs the system's python3, which has none of the venv's packages:
    # nothing the command line imports may import pandas, numpy or matplotlib at load time
    p = subprocess.run([str(REPO / "lockbench"), command, "--help"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "usage:" in p.stdout, p.stderr[-2000:]
