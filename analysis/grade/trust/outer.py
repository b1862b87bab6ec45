"""The host side of a grading's outer boundary: one bubblewrap sandbox (or, in container
mode, a private folder of the container) per submission, under a slot of its own (two
unprivileged uids, a cgroup), holding the launcher and the worker; what they hand back is
read from pipes with a cap, and every file of the submission's output folder is written
here, by the grader, never by anything that ran inside."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from analysis.grade import labs
from analysis.grade.trust import isolation, safeio, sandbox

REPO = Path(__file__).resolve().parents[3]
EVIDENCE_CAP = 32 << 20  # bytes of evidence a worker may hand back
RUNNING: set = set()  # the outer sandboxes now running (killed on Ctrl-C)


def copy_grading_code(dst: Path) -> None:
    """The `analysis` package without its tests and caches into dst/analysis: what the
    grader imports, whatever module it comes to import (the bundles, container mode)."""
    shutil.copytree(REPO / "analysis", dst / "analysis",
                    ignore=shutil.ignore_patterns("tests", "__pycache__", "*.pyc"))


def _python() -> str:
    """The system's Python (the outer sandbox sees /usr only; the worker needs no venv)."""
    real = os.path.realpath(sys.executable)
    return real if real.startswith("/usr/") else "/usr/bin/python3"


def _wait(p: subprocess.Popen, timeout: float) -> str:
    """'' when the outer sandbox ended by itself, else why it was stopped."""
    try:
        p.wait(timeout)
        return ""
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return f"grading did not finish within {timeout:g} s"
    except BaseException:  # Ctrl-C while waiting in this thread
        p.kill()
        raise


def run_worker(cfg: dict, out: Path, submission: Path | None = None,
               refbin: Path | None = None) -> dict:
    """One outer boundary (bubblewrap, or in container mode the container itself) holding
    the launcher and the worker, under a slot of its own (uids, cgroup); returns its
    evidence, or an error evidence. Everything it produced is read from pipes with a cap;
    every file in `out` is written here, by the grader."""
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o755)
    budget = sandbox.Budget()
    slot = isolation.acquire_slot()
    cg = isolation.make_cgroup(f"slot{slot.index}", budget.memory, budget.processes)
    uids = {slot.worker_uid, slot.sub_uid}
    # port_group: in container mode gradings side by side share the loopback
    wcfg = {**cfg, "worker_uid": slot.worker_uid, "sub_uid": slot.sub_uid,
            "port_group": slot.index}
    try:
        if cfg.get("sandbox") == "container":
            ev, scratch = _in_container(wcfg, out, cg, uids, submission, refbin, budget)
        else:
            ev = _in_bubblewrap(wcfg, out, cg, submission, refbin, budget)
            scratch = f"{budget.scratch >> 20} MiB tmpfs, gone after grading"
    finally:
        left = isolation.remove_cgroup(cg) + isolation.kill_uids(uids)
        isolation.release_slot(slot)
    ev["sandbox"] = {**cg.describe(), "left_behind": left, "scratch": scratch,
                     "mode": cfg.get("sandbox_note") or "bubblewrap",
                     "uids": "the worker and the submission each an unprivileged uid of "
                             "this grading's own"}
    return ev


# The grader's own programs beside a submission, from --bin-dir: the design check's lock
# tracer, and the kit-style servers a one-server lab's main is timed against.
TOOLS = ("liblockprof.so", "kitref1", "kitref4")


def _tools(cfg: dict) -> list:
    """The grader's programs (TOOLS) present in cfg['tools_dir']."""
    d = Path(cfg.get("tools_dir") or "/nonexistent")
    return [d / t for t in TOOLS if (d / t).is_file()]


def _in_bubblewrap(wcfg, out, cg, submission, refbin, budget) -> dict:
    binds = {REPO / "analysis": (f"{sandbox.CODE}/analysis", False)}
    if submission is not None:
        binds[submission.resolve()] = (sandbox.SUBMISSION, False)
        binds.update({t.resolve(): (f"{sandbox.REFERENCE}/{t.name}", False)
                      for t in _tools(wcfg)})
    if refbin is not None:
        binds[refbin.resolve()] = (sandbox.REFERENCE, False)
    inside = [f"{sandbox.CGROUPS}/{i}" for i in range(len(cg.dirs))]
    binds.update({d: (c, True) for d, c in zip(cg.dirs, inside)})
    env = {"PATH": "/usr/bin:/bin", "HOME": sandbox.HOME, "TMPDIR": sandbox.HOME,
           "LOCKBENCH_GRADE": json.dumps({**wcfg, "cgroups": inside})}
    cmd = sandbox.outer(binds, sandbox.python_argv(_python(), "analysis.grade.trust.launcher"), env,
                        budget)
    return _run_outer(cmd, wcfg["timeout_s"], out)


def _in_container(wcfg, out, cg, uids, submission, refbin, budget) -> tuple:
    """Container mode: the folders the outer sandbox would show are made for real in a
    private folder (the grading code and the reference copied, root-owned; the submission
    linked, only ever read by the launcher's copier; scratch a size-capped tmpfs when this
    container may mount one). Returns (evidence, what the scratch space was)."""
    root = Path(tempfile.mkdtemp(prefix="lockbench-grade-", dir=_root_base()))
    os.chmod(root, 0o755)
    scratch, mounted, own_tmp = root / "scratch", False, False
    try:
        copy_grading_code(root / "code")
        (root / "ref").mkdir()
        for f in ([refbin / m for m in labs.FOUR] if refbin else []) + (
                _tools(wcfg) if submission is not None else []):
            shutil.copy2(f, root / "ref" / f.name)
        if submission is not None:
            (root / "submission").symlink_to(submission.resolve())
        scratch.mkdir()
        (root / "home").mkdir()
        mounted = _mount_tmpfs(scratch, budget.scratch)
        for d in (root / "code", root / "ref", root / "home", scratch):
            os.chmod(d, 0o755)
        own_tmp = not root.is_relative_to("/tmp") and sandbox.private_tmp_ready()
        env = {"PATH": "/usr/bin:/bin", "HOME": str(root / "home"), "TMPDIR": str(root / "home"),
               "LOCKBENCH_GRADE_ROOT": str(root),
               "LOCKBENCH_GRADE": json.dumps({**wcfg, "own_tmp": own_tmp,
                                              "cgroups": [str(d) for d in cg.dirs]})}
        ev = _run_outer(sandbox.python_argv(_python(), "analysis.grade.trust.launcher",
                                            str(root / "code")),
                        wcfg["timeout_s"], out, env=env, cwd=str(root),
                        on_stop=lambda: isolation.kill_uids(uids))
    finally:
        isolation.kill_uids(uids)
        if mounted:
            subprocess.run(["umount", "-l", str(scratch)], capture_output=True, timeout=30)
        shutil.rmtree(root, ignore_errors=True)
    what = (f"{budget.scratch >> 20} MiB tmpfs, gone after grading" if mounted else
            "a folder of the container (no tmpfs could be mounted: each file capped at "
            f"{sandbox.Limits().file_size >> 20} MiB, not the total), gone after grading")
    what += ("; /tmp its own, in that space" if own_tmp else
             "; /tmp the container's, shared (no mount namespace here), $TMPDIR its own")
    return ev, what


def _root_base() -> str | None:
    """Where container mode makes its private folder: /var/tmp, outside the /tmp that a
    submission's run gets in its place (sandbox.direct's own_tmp); else the default."""
    base = Path("/var/tmp")
    return str(base) if base.is_dir() and not base.is_symlink() and os.access(
        base, os.W_OK) else None


def _mount_tmpfs(path: Path, size: int) -> bool:
    """A size-capped tmpfs on `path` where this container allows mounting (often not)."""
    try:
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                            str(path)], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0


def _run_outer(cmd: list, timeout: float, out: Path, env: dict | None = None,
               cwd: str = "/", on_stop=None) -> dict:
    """Runs the launcher; on_stop ends what outlives it when it is stopped (in container
    mode the worker and the submission, whose pipes would otherwise stay open)."""
    rout, wout = os.pipe()
    rerr, werr = os.pipe()
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=wout, stderr=werr, cwd=cwd,
                             env=env, start_new_session=env is not None)
    finally:
        os.close(wout)
        os.close(werr)
    RUNNING.add(p)
    evidence, log = safeio.Capture(rout, EVIDENCE_CAP), safeio.Capture(rerr, safeio.KEEP)
    try:
        stopped = _wait(p, timeout)
    finally:
        RUNNING.discard(p)
        if on_stop is not None and p.returncode != 0:
            on_stop()
    evidence.join()
    log.join()
    (out / "worker.log").write_text(log.text())
    if stopped:
        return {"error": stopped, "checks": []}
    try:
        return json.loads(bytes(evidence.head))
    except ValueError:
        tail = log.text().strip().splitlines()[-1:]
        return {"error": f"the grading worker failed (exit {p.returncode}): {' '.join(tail)}",
                "checks": []}
