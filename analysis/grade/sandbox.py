"""Bubblewrap command lines. Two levels (issue 12: untrusted code runs only in a sandbox):

- outer: our grading worker, in a network namespace of its own (loopback only), a read-only
  view of the system, a private pid namespace, and one writable folder (the submission's
  output folder). Everything the submission can reach over TCP is in here with it.
- inner: the submission's make and servers, nested in the outer one (sharing its loopback),
  as user nobody, in their own pid namespace, seeing only /usr and /etc read-only, their
  binaries read-only and one writable working folder, with CPU-time, address-space,
  process and file-size limits.
"""

import shutil
import subprocess
from dataclasses import dataclass

NOBODY = 65534


@dataclass(frozen=True)
class Limits:
    cpu_s: int = 300                 # RLIMIT_CPU per process
    address_space: int = 16 << 30    # RLIMIT_AS: 1000 threads x 8 MiB stacks fit
    processes: int = 2000            # RLIMIT_NPROC for user nobody (threads count)
    file_size: int = 64 << 20        # RLIMIT_FSIZE
    no_as: bool = False              # ThreadSanitizer maps terabytes: no RLIMIT_AS then


def available() -> str:
    """'' if bubblewrap, setpriv and prlimit are on PATH and bubblewrap can start the outer
    sandbox here, else one line saying what is wrong (a missing tool; a system where
    bubblewrap cannot make its namespaces, e.g. a chroot whose / is not a mount point)."""
    missing = [t for t in ("bwrap", "setpriv", "prlimit") if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian: bubblewrap, util-linux)"
    try:
        p = subprocess.run(outer([], ["true"], {}), capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap cannot start a sandbox here: {e}"
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        return f"bubblewrap cannot start a sandbox here: {last}"
    return ""


def outer(writable: list, argv: list, env: dict, readable: list = ()) -> list:
    """`readable` paths are bound again after the private /tmp (a submission in /tmp)."""
    cmd = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
           "--tmpfs", "/tmp", "--unshare-net", "--unshare-pid", "--unshare-ipc",
           "--die-with-parent", "--new-session", "--clearenv"]
    for k, v in env.items():
        cmd += ["--setenv", k, v]
    for r in readable:
        cmd += ["--ro-bind", str(r), str(r)]
    for w in writable:
        cmd += ["--bind", str(w), str(w)]
    return cmd + ["--"] + list(argv)


def inner(ro: dict, rw: dict, chdir: str, argv: list, limits: Limits,
          env: dict | None = None) -> list:
    """ro/rw: {host path: path inside}. argv runs as nobody with the limits."""
    cmd = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
           "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
           "--setenv", "HOME", "/tmp",
           "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
           "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
           "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
           "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
           "--perms", "0755", "--dir", "/sub"]  # a umask of 077 would hide /sub from nobody
    for k, v in (env or {}).items():
        cmd += ["--setenv", k, v]
    for host, inside in ro.items():
        cmd += ["--ro-bind", str(host), inside]
    for host, inside in rw.items():
        cmd += ["--bind", str(host), inside]
    cmd += ["--chdir", chdir, "--",
            "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--",
            "prlimit", f"--cpu={limits.cpu_s}", f"--nproc={limits.processes}",
            f"--fsize={limits.file_size}", "--core=0"]
    if not limits.no_as:
        cmd.append(f"--as={limits.address_space}")
    return cmd + ["--"] + list(argv)


def exit_signal(returncode: int | None) -> int:
    """bwrap exits 128+N when the sandboxed process died of signal N; 0 otherwise."""
    if returncode is not None and 128 < returncode < 160:
        return returncode - 128
    return 0
