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

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SCRATCH = "/grade/scratch"       # inside the outer sandbox: the tmpfs every copy and run is in
CODE = "/grade/code"             # the grading code (read-only)
SUBMISSION = "/grade/submission"  # the submission as handed in (read-only)
REFERENCE = "/grade/ref"         # the reference binaries (read-only)
CGROUPS = "/grade/cg"            # the submission's cgroup directories
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
            "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
            "prlimit", f"--cpu={limits.cpu_s}", f"--nproc={limits.processes}",
            f"--fsize={limits.file_size}", "--core=0"]
    if not limits.no_as:
        cmd.append(f"--as={limits.address_space}")
    return cmd + ["--"] + list(argv)


def in_cgroups(dirs: list, cmd: list) -> list:
    """`cmd`, started inside each cgroup directory of `dirs` (paths in the outer view)."""
    if not dirs:
        return cmd
    moves = " && ".join(f"echo $$ > {d}/cgroup.procs" for d in dirs)
    return ["/bin/sh", "-c", moves + ' && exec "$@"', "sh", *cmd]


def exit_signal(returncode: int | None) -> int:
    """bwrap exits 128+N when the sandboxed process died of signal N; 0 otherwise."""
    if returncode is not None and 128 < returncode < 160:
        return returncode - 128
    return 0
