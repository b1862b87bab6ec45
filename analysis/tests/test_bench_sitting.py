"""What the benchmark sittings share (bench/sitting.py): their name and purpose read from
the program's docstring, the refusals before anything starts (a missing yardstick or
binary: exit 2, one line, no results folder), a server started in the sitting's work
folder, and the yardstick loadgen's result line."""

import socket
import subprocess

import pytest

from analysis.launch import procs
from analysis.launch import server_spec as SS
from analysis.tests.helpers import PY, RELEASE, REPO, skip_unless_built
from analysis.tests.test_numbers import Capture, bench

sitting = bench("sitting")
PROGRAMS = {"perf": ("main1", "main2", "main3", "main4", "client"), "request_costs": ("main4",)}


@pytest.mark.parametrize("prog", PROGRAMS)
def test_a_sittings_name_and_purpose_are_its_docstrings(prog):
    mod = bench(prog)
    parser = Capture(mod.parse_args)
    first = mod.__doc__.strip().splitlines()[0]
    assert first.startswith(f"bench/{prog}.py: ")
    a = parser.parse_args([])
    assert a.sitting == prog and a.needs == PROGRAMS[prog]
    helps = {act.dest: act.help for act in parser._actions}
    assert f"results/{prog}/<UTC>" in helps["out"]
    assert ", ".join(PROGRAMS[prog]) in helps["bin_dir"]


def run(prog: str, *argv) -> subprocess.CompletedProcess:
    return subprocess.run([PY, str(REPO / "bench" / f"{prog}.py"), *argv], capture_output=True,
                          text=True, timeout=60, cwd=REPO, env={"PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("prog", PROGRAMS)
def test_a_missing_yardstick_or_binary_is_refused_before_anything_starts(prog, tmp_path):
    out = tmp_path / "out"
    empty = tmp_path / "empty"
    empty.mkdir()
    p = run(prog, "--yardstick", str(empty), "--out", str(out))
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"{prog}: --yardstick: "), p.stderr
    assert "loadgen" in p.stderr and not out.exists()

    ys = tmp_path / "ys"  # a yardstick folder that passes the check
    ys.mkdir()
    for name in sitting.PROGRAMS:
        (ys / name).write_text("#!/bin/sh\n")
        (ys / name).chmod(0o755)
    p = run(prog, "--yardstick", str(ys), "--bin-dir", str(empty), "--out", str(out))
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"{prog}: --bin-dir: "), p.stderr
    assert f"{', '.join(PROGRAMS[prog])} missing in {empty}" in p.stderr
    assert not out.exists()


def test_the_loadgen_result_line_is_read_and_its_absence_is_one_line():
    text = ("warming up\nRESULT label=x rps=1234.5 done=1000 err_connect=1 err_io=2 "
            "lat n=1000 mean_us=80.5 p50_us=70 p99_us=300\n")
    assert sitting.loadgen_result(text) == {"rps": 1234.5, "done": 1000, "errors": 3,
                                            "p50_us": 70.0, "p99_us": 300.0,
                                            "mean_us": 80.5}
    with pytest.raises(sitting.Error, match="^loadgen printed no RESULT line$"):
        sitting.loadgen_result("RESULTS are in\n")


def test_a_server_starts_in_the_sittings_work_folder_or_says_why_not(tmp_path):
    skip_unless_built()
    port = procs.pick_port()
    spec = SS.ServerSpec("main4", "lockbench", RELEASE / "main4")
    srv = sitting.start_server(spec, 10, port, tmp_path, tmp_path / "main4.log",
                               SS.Options(0.0, extra=("--no-twin",)))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        srv.stop()
    assert (tmp_path / "main4.log").is_file()
    bad = SS.ServerSpec("nothing", "lockbench", tmp_path / "no_such_server")
    with pytest.raises(sitting.Error, match="^nothing: cannot start .*no_such_server: No such"):
        sitting.start_server(bad, 10, port, tmp_path, tmp_path / "bad.log", SS.Options())
