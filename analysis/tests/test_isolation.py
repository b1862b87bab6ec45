"""isolation.kill_as refuses any uid that is not one of the grader's slots: issued as root, or
as a person's uid, kill(-1, SIGKILL) would end everything of theirs on the machine; and
processes_of tells live processes from zombies."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.grade.trust import isolation


@pytest.mark.parametrize("uid", [0, 1000, 65534, isolation.UID_BASE - 1,
                                 isolation.UID_BASE + 2 * isolation.SLOTS])
def test_kill_as_refuses_a_uid_outside_the_slots(uid):
    with pytest.raises(ValueError, match="is not one of the grader's"):
        isolation.kill_as(uid)


def test_live_processes_leave_out_a_zombie():
    # the sweep between turns (launcher op_sweep) looks for live processes only: a zombie
    # runs nothing and no signal removes it, so looking for it would only spin until the
    # container's init reaps it
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 5
        while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not end"
            time.sleep(0.01)
        uid = {os.geteuid()}
        assert pid in isolation.processes_of(uid)
        assert pid not in isolation.processes_of(uid, live=True)
        assert os.getpid() in isolation.processes_of(uid, live=True)
    finally:
        os.waitpid(pid, 0)


TAKE = ("import sys; from analysis.grade.trust import isolation as i; "
        "i.LOCK_DIRS = (sys.argv[1],); s = i.acquire_slot(); print(s.index); "
        "sys.stdout.flush(); sys.stdin.read()")


def test_two_graders_with_their_own_run_folders_take_different_slots(tmp_path):
    # A grader in a chroot (its own /run and /tmp, the host's processes) took the slot the
    # host's grader held, and each ended the other's worker as a killed grader's leftovers:
    # the slot's abstract socket name is seen by both.
    graders, indices = [], []
    try:
        for run in ("host-run", "chroot-run"):
            p = subprocess.Popen([sys.executable, "-c", TAKE, str(tmp_path / run)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 cwd=Path(__file__).resolve().parents[2])
            graders.append(p)
            index = p.stdout.readline().strip()
            assert index.isdigit(), index
            indices.append(int(index))
        assert indices[0] != indices[1]
    finally:
        for p in graders:
            p.communicate("")
    # both gone: the first slot that was free is free again, lock file and socket name
    again = isolation._claim(indices[0])
    assert again is not None
    again.close()
