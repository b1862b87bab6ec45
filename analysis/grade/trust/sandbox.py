"""Bubblewrap command lines. Untrusted code runs only in these two levels:

- outer, one per submission, started by the grader: a network namespace whose only
  interface is its own loopback, its own pid namespace, and a file system of only what
  grading needs: the system's /usr, the few /etc files a compiler needs, the grading code
  and (for the reference run) the reference binaries read-only, the submission read-only,
  and a size-capped tmpfs for scratch. No /root, /home, host /tmp, other submissions or the
  grader's output folder. Inside it the launcher (root in this view only; it starts inner
  sandboxes and copies the submission, and never reads what a submission produced) and the
  grading worker (an unprivileged uid of its own, no capabilities).
- inner, for every make and every server start: nested in the outer one (sharing its
  loopback), seeing /usr and that /etc read-only, its binaries read-only and one working
  folder, as the submission's own unprivileged uid with no capabilities, under per-process
  limits, and inside the submission's cgroup where the host has one.
"""

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Where grading's folders are as the launcher and the worker see them: /grade inside the
# outer bubblewrap sandbox; in container mode (no bubblewrap) a folder of the host that the
# grader made, named in LOCKBENCH_GRADE_ROOT.
ROOT = os.environ.get("LOCKBENCH_GRADE_ROOT", "/grade")
SCRATCH = f"{ROOT}/scratch"        # the tmpfs (or folder) every copy and run is in
CODE = f"{ROOT}/code"              # the grading code (read-only)
SUBMISSION = f"{ROOT}/submission"  # the submission as handed in (read-only)
REFERENCE = f"{ROOT}/ref"          # the reference binaries (read-only)
CGROUPS = f"{ROOT}/cg"             # the submission's cgroup directories
HOME = f"{ROOT}/home"              # HOME of the launcher and the worker: empty, root's

# Python as the grader's own processes start it: isolated (-I: no user site folder, no
# PYTHON* variables, neither the current nor the script's folder on the path) and writing no
# bytecode (-B), with the grading code put on the path by the command itself. So nothing a
# submission can write (a .pth file under a HOME it shares, a module in a folder it owns) is
# ever imported by the launcher, which is root, or by the worker.
_BOOT = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
         "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


def as_uid(uid: int) -> list:
    """The argv prefix that runs a command as `uid` (its own group, no other groups), with
    no capabilities and unable to gain any."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def python_argv(python: str, module: str, code: str = CODE) -> list:
    """argv running `module` of the grading code in `code` with an isolated Python."""
    return [python, "-I", "-B", "-c", _BOOT, code, module]
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "nsswitch.conf", "hosts",
       "host.conf", "localtime", "protocols", "services")


@dataclass(frozen=True)
class Limits:
    cpu_s: int = 300                 # RLIMIT_CPU per process
    address_space: int = 16 << 30    # RLIMIT_AS: 1000 threads x 8 MiB stacks fit
    processes: int = 2000            # RLIMIT_NPROC of the submission's own uid (threads count)
    file_size: int = 64 << 20        # RLIMIT_FSIZE
    no_as: bool = False              # ThreadSanitizer maps terabytes: no RLIMIT_AS then


@dataclass(frozen=True)
class Budget:
    """What a whole submission gets, beside the per-process limits."""
    scratch: int = 256 << 20         # tmpfs for the copy, the builds and every working folder
    tmp: int = 16 << 20              # each sandbox's own /tmp
    memory: int = 1 << 30            # all the submission's processes together (cgroup)
    processes: int = 2000            # all the submission's processes and threads (cgroup)
    copy: int = 64 << 20             # bytes of a submission that are copied at most


def _system_view() -> list:
    cmd = ["--ro-bind", "/usr", "/usr"]
    for name, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"),
                         ("lib64", "usr/lib64")):
        if Path("/" + target).exists():
            cmd += ["--symlink", target, "/" + name]
    cmd += ["--perms", "0755", "--dir", "/etc"]
    for f in ETC:
        if Path("/etc", f).exists():
            cmd += ["--ro-bind", f"/etc/{f}", f"/etc/{f}"]
    return cmd


def available() -> str:
    """'' if bubblewrap, setpriv and prlimit are on PATH and bubblewrap can start the outer
    sandbox here, else one line saying what is wrong (a missing tool; a system where
    bubblewrap cannot make its namespaces, e.g. a chroot whose / is not a mount point)."""
    missing = [t for t in ("bwrap", "setpriv", "prlimit") if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian: bubblewrap, util-linux)"
    try:
        p = subprocess.run(outer({}, ["true"], {}, Budget()), capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap cannot start a sandbox here: {e}"
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        return f"bubblewrap cannot start a sandbox here: {last}"
    return ""


def outer(binds: dict, argv: list, env: dict, budget: Budget) -> list:
    """binds: {host path: (path inside, writable)}: the only host paths the outer sees
    beyond the system view."""
    cmd = ["bwrap", *_system_view(), "--proc", "/proc", "--dev", "/dev",
           "--perms", "01777", "--size", str(budget.tmp), "--tmpfs", "/tmp",
           "--perms", "0755", "--dir", "/grade", "--perms", "0755", "--dir", CODE,
           "--perms", "0755", "--dir", HOME,
           "--perms", "0755", "--dir", REFERENCE,
           "--perms", "0755", "--size", str(budget.scratch), "--tmpfs", SCRATCH,
           "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--die-with-parent", "--new-session", "--clearenv", "--chdir", "/tmp"]
    for k, v in env.items():
        cmd += ["--setenv", k, v]
    for host, (inside, writable) in binds.items():
        cmd += ["--bind" if writable else "--ro-bind", str(host), inside]
    return cmd + ["--"] + list(argv)


def inner(ro: dict, rw: dict, chdir: str, argv: list, limits: Limits, uid: int,
          budget: Budget, env: dict | None = None) -> list:
    """ro/rw: {path in the outer view: path inside}. argv runs as `uid` with the limits."""
    cmd = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
           "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
           "--setenv", "HOME", "/tmp", *_system_view(),
           "--proc", "/proc", "--dev", "/dev",
           "--perms", "01777", "--size", str(budget.tmp), "--tmpfs", "/tmp",
           "--perms", "0755", "--dir", "/sub"]
    for k, v in (env or {}).items():
        cmd += ["--setenv", k, v]
    for host, inside in ro.items():
        cmd += ["--ro-bind", str(host), inside]
    for host, inside in rw.items():
        cmd += ["--bind", str(host), inside]
    cmd += ["--chdir", chdir, "--",
            *as_uid(uid), "prlimit", f"--cpu={limits.cpu_s}", f"--nproc={limits.processes}",
            f"--fsize={limits.file_size}", "--core=0"]
    if not limits.no_as:
        cmd.append(f"--as={limits.address_space}")
    return cmd + ["--"] + list(argv)


def _translate(text: str, inside_to_host: list) -> str:
    """A path as an inner sandbox would see it (/sub/run/x) as the host sees it, for
    container mode, where nothing is bound and every path is the host's."""
    for inside, host in inside_to_host:
        if text == inside or text.startswith(inside + "/"):
            return host + text[len(inside):]
    return text


def _translate_arg(arg: str, inside_to_host: list) -> str:
    """An argument, an environment assignment (LD_PRELOAD=/sub/x) or a search path
    (/sub/tools:/usr/bin), translated."""
    key, eq, value = arg.partition("=")
    if eq and not key.startswith("/"):
        return key + "=" + _translate_arg(value, inside_to_host)
    return ":".join(_translate(p, inside_to_host) for p in arg.split(":"))


def direct(ro: dict, rw: dict, chdir: str, argv: list, limits: Limits, uid: int,
           env: dict | None = None, tmp: str = "", own_tmp: bool = False) -> tuple:
    """Container mode's inner run (no bubblewrap): (argv, cwd, environment) running `argv`
    as `uid` with no capabilities and the same per-process limits as inner(); the paths
    inner() would bind are translated back to the host's. The container is the outer
    boundary: this run sees its file system, as any unprivileged user of it would. tmp:
    the submission's own temporary folder, its $TMPDIR, and with own_tmp (a mount namespace
    is allowed here: private_tmp_ready) mounted on /tmp for this run alone."""
    table = sorted(((inside, str(host)) for host, inside in {**ro, **rw}.items()),
                   key=lambda p: -len(p[0]))
    cwd = _translate(chdir, table)
    full_env = {"PATH": "/usr/bin:/bin", "HOME": cwd, **({"TMPDIR": tmp} if tmp else {}),
                **{k: _translate_arg(v, table) for k, v in (env or {}).items()}}
    cmd = [*as_uid(uid), "prlimit", f"--cpu={limits.cpu_s}", f"--nproc={limits.processes}",
           f"--fsize={limits.file_size}", "--core=0"]
    if not limits.no_as:
        cmd.append(f"--as={limits.address_space}")
    cmd += ["--"] + [_translate_arg(a, table) for a in argv]
    if tmp and own_tmp:
        cmd = [*OWN_TMP, tmp, *cmd]
    return cmd, cwd, full_env


# As root, before the uid is dropped: a mount namespace of this run's own with `tmp` on /tmp.
OWN_TMP = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
           'mount --bind "$1" /tmp && shift && exec "$@"', "sh"]


def private_tmp_ready() -> bool:
    """Whether this container lets root give a run a /tmp of its own (a mount namespace;
    many platforms' containers refuse one)."""
    try:
        with tempfile.TemporaryDirectory() as d:
            return subprocess.run([*OWN_TMP, d, "true"], capture_output=True,
                                  timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def container_ready() -> str:
    """'' when container mode can run here (root, to give the worker and the submission
    uids of their own; setpriv and prlimit on PATH), else why not."""
    if os.geteuid() != 0:
        return "container mode needs root (to run the submission as an unprivileged uid)"
    missing = [t for t in ("setpriv", "prlimit") if shutil.which(t) is None]
    return f"missing {', '.join(missing)} (Debian/Ubuntu: util-linux)" if missing else ""


def in_cgroups(dirs: list, cmd: list) -> list:
    """`cmd`, started inside each cgroup directory of `dirs` (paths in the outer view)."""
    if not dirs:
        return cmd
    moves = " && ".join(f"echo $$ > {d}/cgroup.procs" for d in dirs)
    return ["/bin/sh", "-c", moves + ' && exec "$@"', "sh", *cmd]


def exit_signal(returncode: int | None) -> int:
    """The signal a sandboxed process died of (bwrap exits 128+N for signal N), else 0."""
    if returncode is not None and 128 < returncode < 160:
        return returncode - 128
    if returncode is not None and returncode < 0:  # container mode: no bwrap in between
        return -returncode
    return 0
