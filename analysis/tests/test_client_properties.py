"""Property-based tests (Hypothesis) of the client's command line: for
generated values of every option of `client --help`, the client either refuses with exit 2
and exactly one line on stderr, or it starts and ends within its bound (exit 0, or 1 with one
error line); a hang, a crash signal or abort text is a failure.

Two properties, both on the real binary: the parser over the full value ranges against a port
nobody listens on (a valid command line ends at once with 'cannot reach the server'), and
real runs against a real `main4` with small bounds added (--requests, --time-limit,
--timeout-ms) unless the generated options set them. Tests 3 and 4 pin the two client bugs
the properties found (and which they step around, so they go on finding others). Total about
40 s."""

import re
import signal
import subprocess
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from analysis.launch.procs import pick_port
from analysis.launch.server_spec import Options, Place, ServerSpec, launch
from analysis.tests.helpers import RELEASE, skip_unless_built

pytestmark = [pytest.mark.slow]

N = 10
WALL = 20.0       # seconds any client run may take (the added bounds keep valid runs ~1 s)

HOSTILE = ["nan", "NaN", "inf", "-inf", "infinity", "1e999", "-1e999", "0x10", "0x1p3", "0o17",
           "010", "1_000", " 1", "1 ", "", "-1", "0", "-0", "1.5", "0.5", "1e3", "1e-3", "+5",
           ".5", "5.", "9" * 30, "-" + "9" * 30, "١٢", "²", "-", ",", "1,,2", "1,", "a", "%s",
           "\\n", "１", "1e", "e1"]

# option -> (lo, hi, whole, small): the documented range (--help, docs/client.md), whether a
# whole number is required, and the top of the values real runs draw (hostile ones aside).
NUMERIC = {
    "--threads": (1, 4096, True, 4), "--requests": (1, 2**50, True, 300),
    "--duration": (0.001, 86400, False, 0.3), "--warmup": (0, 86400, False, 0.2),
    "--time-limit": (0.001, 86400, False, 3), "--connections": (1, 65536, True, 8),
    "--rate": (0.001, 1e9, False, 1e9), "--read-ratio": (0, 1, False, 1),
    "--seed": (0, 2**64 - 1, True, 2**64 - 1), "--check-requests": (1, 10_000_000, True, 50),
    "--timeout-ms": (1, 600_000, True, 5000),
}
# Values that would make a valid run last long (a day-long time limit with 2^50 requests,
# a start a day ahead): drawn by the parser property only, whose runs never reach a server.
LONG = {"--time-limit": ["86400", "1000", "1e3", "010"], "--duration": ["86400"],
        "--warmup": ["86400"]}
FLAGS = {"--help", "--version", "--timeline", "--quiet", "--check", "--real-port"}
OTHER = {"--connection", "--dist", "--text-len", "--format", "--histogram-out", "--start-at"}

# The once-a-second progress lines of a run past 3 s without --quiet (load_generator.cpp).
PROGRESS = re.compile(r"^client: \d+ s(, warming up| of \d+ s, \d+ requests|, \d+ of \d+ "
                      r"requests)$")

# Text values: anything but control characters (a refusal echoes the value; one with a line
# break in it is test 4's, kept apart so the property goes on finding other faults).
PRINTABLE = st.characters(blacklist_categories=("Cc", "Cs"))

BOUNDS = {"--requests": "200", "--time-limit": "2", "--timeout-ms": "2000"}


CWD = {"dir": None}     # the client's working directory: where a relative path would land


@pytest.fixture(scope="module", autouse=True)
def client_cwd(tmp_path_factory):
    CWD["dir"] = tmp_path_factory.mktemp("ccwd")


def client_bin():
    from analysis.runner.binaries import find_binary
    return str(find_binary(RELEASE, "client"))


def help_options() -> set:
    out = subprocess.run([client_bin(), "--help"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    return set(re.findall(r"(?:^|[\s,])(--[a-z][a-z0-9-]*)", out.stdout))


@pytest.fixture(scope="module")
def options():
    skip_unless_built()
    return sorted(help_options())


def test_every_option_has_a_generator(options):
    assert "--threads" in options and "--time-limit" in options, options
    assert set(options) <= set(NUMERIC) | FLAGS | OTHER, set(options) - (
        set(NUMERIC) | FLAGS | OTHER)


def _num_text(option, small: bool):
    lo, hi, whole, cap = NUMERIC[option]
    top = cap if small else hi
    gens = [st.sampled_from(HOSTILE), st.integers(-10**6, 10**6).map(str),
            st.sampled_from([str(lo), str(hi), str(hi + 1), str(lo - 1)]),
            st.floats(allow_nan=True, allow_infinity=True).map(repr),
            st.text(alphabet="0123456789.eExX_+- ,", max_size=8)]
    if whole:
        gens += [st.integers(int(lo), int(top)).map(str)] * 3
    else:
        gens += [st.floats(min_value=lo, max_value=top).map(lambda f: f"{f:g}")] * 3
    if not small:
        gens.append(st.sampled_from(LONG.get(option, ["1"])))
    one = st.one_of(*gens)
    if option == "--threads":
        return st.one_of(one, st.lists(one, min_size=2, max_size=3).map(",".join))
    return one


def value_for(option: str, paths: dict, small: bool):
    if option in NUMERIC:
        return _num_text(option, small)
    if option == "--connection":
        return st.sampled_from(["per-request", "keepalive", "KEEPALIVE", "keep-alive", "", "nan",
                                "per-request,keepalive"])
    if option == "--dist":
        return st.one_of(st.sampled_from([
            "uniform", "UNIFORM", "zipf:1.1", "zipf:0", "zipf:10", "zipf:10.01", "zipf:nan",
            "zipf:inf", "zipf:-1", "zipf:", "zipf", "zipf:1:2", "hotspot:0.1:0.9", "hotspot:0:1",
            "hotspot:1:1", "hotspot:1.5:0.5", "hotspot:0.5", "hotspot:a:b", "hotspot:nan:0.5",
            "", ":", "uniform:1"]), st.text(PRINTABLE, max_size=10),
            st.floats(allow_nan=True, allow_infinity=True).map(lambda f: f"zipf:{f!r}"))
    if option == "--text-len":
        return st.one_of(st.sampled_from([
            "kit", "KIT", "fixed:1", "fixed:99", "fixed:0", "fixed:100", "fixed:-1", "fixed:1.5",
            "fixed:", "fixed", "gamma:2:3", "gamma:0:1", "gamma:1:0", "gamma:nan:1",
            "gamma:1e300:1e300", "gamma:inf:1", "gamma:2", "gamma:2:3:4", ""]),
            st.integers(-5, 200).map(lambda i: f"fixed:{i}"), st.text(PRINTABLE, max_size=10))
    if option == "--format":
        return st.sampled_from(["text", "json", "csv", "JSON", "xml", "", "text,json"])
    if option == "--start-at":
        now = time.time_ns()
        vals = [str(now - 10**9), "0", "1", str(now + 300 * 10**6), str(now + 2 * 86400 * 10**9),
                str(2**63), str(2**64), "-1", "nan", "1.5e18", "0x10", "", "now", "9" * 30]
        return st.sampled_from(vals)
    if option == "--histogram-out":
        return st.sampled_from(paths["--histogram-out"])
    raise AssertionError(f"no generator for {option}")


@st.composite
def argv_of(draw, options, paths, small):
    argv = []
    for option in draw(st.lists(st.sampled_from(options), min_size=1, max_size=3)):
        if option in FLAGS:
            argv.append(option)
        else:
            # "--opt=value" so that a value beginning with '-' reaches the option's check.
            argv.append(f"{option}={draw(value_for(option, paths, small))}")
    return argv


def given_opts(argv) -> set:
    return {a.split("=", 1)[0] for a in argv}


def run_client(argv) -> tuple[int, str]:
    p = subprocess.Popen([client_bin(), *argv], cwd=CWD["dir"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, errors="replace")
    try:
        _, err = p.communicate(timeout=WALL)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"client did not end within {WALL} s: {argv}")
    return p.returncode, err


def check_outcome(argv, code, err, dead: bool):
    assert code >= 0, (argv, f"killed by signal {-code}", err)
    for bad in ("terminate called", "Aborted", "Segmentation", "what():", "AddressSanitizer",
                "runtime error:", "core dumped"):
        assert bad not in err, (argv, err)
    lines = [ln for ln in err.splitlines() if ln.strip() and not PROGRESS.match(ln)]
    if code == 2:
        assert len(err.strip("\n").splitlines()) == 1 and len(lines) == 1, (argv, err)
        assert lines[0].startswith("client: "), (argv, err)
    elif code == 1:
        assert len(lines) == 1 and lines[0].startswith("client: "), (argv, err)
    else:
        assert code == 0, (argv, code, err)
        assert not dead or "--help" in argv or "--version" in argv, (
            argv, "exit 0 although nobody listens", err)


def _paths(d):
    (d / "full").mkdir(exist_ok=True)
    (d / "full" / "x").write_text("")
    return {"--histogram-out": [str(d / "hist.json"), str(d / "full"), "/nonexistent/x", "",
                                "/proc/version", str(d / "ü h.json")]}


# ---- 1. the parser: full ranges, nobody listening ------------------------------------------

def test_parser_property(options, tmp_path_factory):
    paths = _paths(tmp_path_factory.mktemp("cparse"))
    dead = pick_port()      # nothing listens there nor on its twin

    @settings(max_examples=600, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(argv=argv_of(options, paths, small=False))
    def prop(argv):
        have = given_opts(argv)
        extra = [] if "--timeout-ms" in have else ["--timeout-ms=1000"]
        if "--rate" in have:
            # Workaround for the bug test 3 pins (an open-loop client lingers up to
            # threads/rate s after a refused connect, e.g. --rate=2: ~50 s): a 1 s limit
            # bounds the lingering; drop it once the client stops at once.
            assume("--time-limit" not in have)
            extra.append("--time-limit=1")
        full = [str(N), "127.0.0.1", str(dead), *argv, *extra]
        code, err = run_client(full)
        check_outcome(full, code, err, dead=True)
    prop()


# ---- 2. real runs against a real server, small bounds --------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory, options):
    from analysis.runner.binaries import find_binary
    d = tmp_path_factory.mktemp("cserver")
    port = pick_port()
    srv = launch(ServerSpec("main4", "lockbench", find_binary(RELEASE, "main4")), N, port,
                 Place(d), log_file=d / "main4.log", opts=Options(delay_us=0)).start()
    yield {"port": port, "dir": d, "paths": _paths(d)}
    srv.proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 15
    while srv.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    stopped_by_sigint = not srv.alive()
    srv.stop()
    assert stopped_by_sigint, "main4 did not stop after SIGINT"
    assert srv.exit_code == 0, srv.exit_code


def test_client_against_server_property(options, server):
    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(argv=argv_of(options, server["paths"], small=True))
    def prop(argv):
        have = given_opts(argv)
        extra = [f"{o}={v}" for o, v in BOUNDS.items() if o not in have
                 and not (o == "--requests" and ("--duration" in have or "--check" in have))]
        full = [str(N), "127.0.0.1", str(server["port"]), *argv, *extra]
        code, err = run_client(full)  # a run past WALL fails there
        check_outcome(full, code, err, dead=False)
    prop()


# ---- 3. a dead server is seen at once (docs/client.md), in open loop too -------------------

def test_dead_server_seen_at_once_open_loop(options):
    """Found by the parser property: with --rate and several threads, the first refused
    connect sets the stop flag, but the other threads sleep to their next intended send time
    (load_generator.cpp, SleepUntilNs) without looking at it, so the client lingers up to
    threads/rate seconds (`--rate 10`, 100 threads: ~8 s) instead of stopping at once.
    `--rate 1` over 100 threads would linger up to 100 s, far past WALL, where run_client
    fails it: how fast the client stops is not asserted."""
    dead = pick_port()
    for argv in (["--threads=1", "--rate=10"], ["--rate=1000"], ["--rate=1", "--requests=100"]):
        full = [str(N), "127.0.0.1", str(dead), "--quiet", *argv]
        code, err = run_client(full)
        assert code == 1 and "cannot reach the server" in err, (full, code, err)


# ---- 4. a refusal is one line even when the value has a line break in it -----------------

def test_refusal_of_a_value_with_a_line_break_is_one_line(options):
    """Found by the parser property (`--text-len=\\r`): a refusal quotes the value as given,
    so a value with a line break in it ('a\\nb', 'a\\rb') makes the one-line error two lines
    (client_options.cpp puts the raw value between quotes; it should escape it)."""
    for option in ("--threads", "--text-len", "--dist", "--format", "--connection", "--seed",
                   "--start-at", "--rate"):
        for value in ("a\nb", "a\rb"):
            full = [str(N), "127.0.0.1", "1", f"{option}={value}"]
            code, err = run_client(full)
            assert code == 2 and len(err.rstrip("\n").splitlines()) == 1, (full, code, err)
