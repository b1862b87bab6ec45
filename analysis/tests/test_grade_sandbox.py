"""What keeps a submission's files out of the grader's own processes
(analysis/grade/trust/sandbox.py): the isolated Python the launcher and the worker start
with, and in container mode the submission's own /tmp. Each test plants what a hostile submission
would and checks it is never run or never reaches the shared place."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import ports
from analysis.grade.trust import sandbox as S

VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"


def test_the_grader_python_runs_nothing_a_submission_can_plant(tmp_path):
    ran = tmp_path / "ran"
    plant = f'import os; open({str(ran)!r}, "a").write(os.path.basename(__file__) + "\\n")\n'
    home = tmp_path / "home"
    site = home / ".local" / "lib" / VERSION / "site-packages"
    site.mkdir(parents=True)
    (site / "planted.pth").write_text(plant.replace("os.path.basename(__file__)", '"pth"'))
    for folder in ("cwd", "pythonpath"):  # a module shadowing one the grader imports
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "json.py").write_text(plant)
    (tmp_path / "startup.py").write_text(plant)
    code = tmp_path / "code"
    code.mkdir()
    (code / "probe.py").write_text("import json, sys\nprint(json.dumps(sys.flags.isolated))\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(tmp_path / "pythonpath"),
           "PYTHONSTARTUP": str(tmp_path / "startup.py"), "PYTHONUSERBASE": str(home / ".local")}
    p = subprocess.run(S.python_argv(sys.executable, "probe", str(code)), cwd=tmp_path / "cwd",
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
    assert not ran.exists(), f"planted code ran: {ran.read_text()}"
    # the same plant, run by a Python that is not isolated, does run: the test can fail
    subprocess.run([sys.executable, "-c", "import json"], cwd=tmp_path / "cwd", env=env,
                   capture_output=True, timeout=60)
    assert ran.exists()


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace and another uid need root")
def test_in_container_mode_a_run_has_its_own_tmp(tmp_path):
    if not S.private_tmp_ready():
        pytest.skip("this machine allows no mount namespace")
    own = tmp_path / "own-tmp"
    own.mkdir(mode=0o700)
    os.chown(own, 65534, 65534)
    os.chmod(tmp_path, 0o755)
    name = f"lockbench-own-tmp-{os.getpid()}"
    cmd, cwd, env = S.direct({}, {}, str(tmp_path), ["/bin/sh", "-c",
                             f'echo x > /tmp/{name} && echo "$TMPDIR"'], S.Limits(), 65534,
                             tmp=str(own), own_tmp=True)
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip() == str(own)
        assert (own / name).is_file() and not Path(f"/tmp/{name}").exists()
    finally:
        Path(f"/tmp/{name}").unlink(missing_ok=True)


def test_gradings_side_by_side_draw_disjoint_ports():
    # container mode: every grading shares the container's loopback; two that drew the same
    # port had one server fail to bind and the other grading drive it (a student's verdict
    # spoiled by the grader's own choice of port)
    every = list(ports.sequence())
    shares = [list(ports.sequence(g, ports.GROUPS)) for g in range(ports.GROUPS)]
    assert sorted(p for share in shares for p in share) == sorted(every)
    seen: set = set()
    for share in shares:
        mine = set(share) | {ports.twin(p) for p in share}
        assert not mine & seen and len(share) > 700
        assert all(1024 <= p < 32768 for p in mine)
        seen |= mine
