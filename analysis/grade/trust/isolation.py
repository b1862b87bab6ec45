"""What keeps one submission's grading from touching another's: the host side, run by the
grader (root) around each outer sandbox.

- A slot: a pair of unprivileged uids of its own (one for our grading worker, one for the
  submission), held for as long as the submission is graded, so process caps counted per
  uid (RLIMIT_NPROC) and the clean-up by uid are per submission, also between two grade
  commands on one host. It is held twice: a lock file, and an abstract socket name, which
  the kernel keeps per network namespace, not per file system: a grader in a chroot or a
  container with its own /run and /tmp but the host's processes and network takes a slot
  the host's grader does not hold (otherwise each, taking "its" free slot, would end the
  other's processes as a killed grader's leftovers).
- A cgroup for the submission's processes where the host has a writable memory and pids
  controller (v1 or v2): total memory and process count capped, and everything in it killed
  at the end. Without one, only the per-process limits apply (and the page says so).
"""

import contextlib
import fcntl
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

UID_BASE = 3_100_000       # far above any distribution's users and systemd's dynamic range
SLOTS = 512
LOCK_DIRS = ("/run/lockbench-grade", "/tmp/lockbench-grade")


@dataclass
class Slot:
    index: int
    worker_uid: int
    sub_uid: int
    lock_fd: int
    claim: socket.socket | None = None


def claim_name(index: int) -> bytes:
    """The abstract socket name (leading NUL: no file) that holds slot `index`."""
    return f"\0lockbench-grade/slot-{index}".encode()


def _claim(index: int) -> socket.socket | None:
    """Slot `index`'s abstract socket, bound (held until closed, or this process ends);
    None when a grader elsewhere on this kernel holds it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        s.bind(claim_name(index))
    except OSError:
        s.close()
        return None
    return s


def _take(d: str, i: int) -> Slot | None:
    """Slot i if both its lock file in d and its socket name are free; else None."""
    fd = os.open(f"{d}/slot-{i}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    claim = _claim(i)
    if claim is None:
        os.close(fd)
        return None
    return Slot(i, UID_BASE + 2 * i, UID_BASE + 2 * i + 1, fd, claim)


def acquire_slot() -> Slot:
    """The first free slot (non-blocking lock file and socket name); OSError when none can
    be taken."""
    last = None
    for d in LOCK_DIRS:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
        except OSError as e:
            last = e
            continue
        for i in range(SLOTS):
            slot = _take(d, i)
            if slot is not None:
                kill_uids({slot.worker_uid, slot.sub_uid})  # a killed grader's leftovers
                return slot
        last = OSError(f"all {SLOTS} grading slots in {d} are taken")
    raise last or OSError("no grading slot")


def release_slot(slot: Slot) -> None:
    if slot.claim is not None:
        slot.claim.close()
    os.close(slot.lock_fd)


def processes_of(uids: set, live: bool = False) -> list:
    """pids of processes whose real or effective uid is in `uids`; live: not those that
    have ended and wait to be reaped (zombies run nothing, and no signal removes them)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                for line in f:
                    if live and line.startswith("State:") and line.split()[1] in ("Z", "X"):
                        break
                    if line.startswith("Uid:"):
                        real, eff = (int(x) for x in line.split()[1:3])
                        if real in uids or eff in uids:
                            found.append(int(d))
                        break
        except (OSError, ValueError):
            continue
    return found


def _kill_pids(pids: list) -> int:
    killed = 0
    for p in pids:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)
            killed += 1
    return killed


def kill_until_none(find, rounds: int = 50, kill=_kill_pids) -> int:
    """kill(pids) (SIGKILL pid by pid unless told otherwise) every pid `find()` returns
    until it returns none (a fork loop is outrun by repetition); returns how many were
    killed."""
    killed = 0
    for _ in range(rounds):
        pids = find()
        if not pids:
            break
        killed += kill(pids)
        time.sleep(0.02)
    return killed


def kill_as(uid: int) -> None:
    """kill(-1, SIGKILL) issued by a child that has become `uid`: the kernel signals every
    process of that uid in one pass under its task-list lock, which no fork can slip past (a
    daemon that changes its pid every millisecond stays ahead of a list of pids). Needs
    root. Only a uid of the grader's slots: issued as root (or as anyone's uid), it would end
    everything of theirs on the machine."""
    if not UID_BASE <= uid < UID_BASE + 2 * SLOTS:
        raise ValueError(f"uid {uid} is not one of the grader's ({UID_BASE} and up)")
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _kill_as_each(uids: set):
    def kill(pids: list) -> int:
        for uid in sorted(uids):
            kill_as(uid)
        return len(pids)
    return kill


def kill_uids(uids: set, live: bool = False) -> int:
    """Ends every process of `uids` and checks that none is left (repeated while some are:
    one may be in the middle of a fork); how many were found. As root, by kill_as (the
    kernel, all at once); otherwise pid by pid. live: zombies are not looked for."""
    kill = _kill_as_each(uids) if os.geteuid() == 0 else _kill_pids
    return kill_until_none(lambda: processes_of(uids, live), kill=kill)


@dataclass
class Cgroup:
    kind: str                  # "cgroup v1", "cgroup v2" or "" (none)
    dirs: list = field(default_factory=list)   # the submission's cgroup, one per hierarchy
    memory: int = 0
    pids: int = 0
    why_none: str = ""

    def describe(self) -> dict:
        if not self.kind:
            return {"memory": f"no cgroup ({self.why_none}): address space per process only",
                    "processes": "RLIMIT_NPROC of the submission's own uid"}
        return {"memory": f"{self.memory >> 20} MiB for all of the submission's processes "
                          f"together ({self.kind})",
                "processes": f"{self.pids} processes and threads together ({self.kind}), and "
                             "RLIMIT_NPROC of the submission's own uid"}


def _mounts() -> list:
    """(mount point, fstype, super options) of every cgroup mount."""
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for ln in lines:
        left, _, right = ln.partition(" - ")
        parts, rparts = left.split(), right.split()
        if len(parts) >= 5 and len(rparts) >= 3 and rparts[0] in ("cgroup", "cgroup2"):
            out.append((parts[4], rparts[0], set(rparts[2].split(","))))
    return out


def _write(path: Path, value) -> None:
    path.write_text(str(value))


def make_cgroup(name: str, memory: int, pids: int) -> Cgroup:
    """A fresh cgroup `lockbench-grade/NAME` with the two limits, or Cgroup('') saying why
    none could be made."""
    mounts = _mounts()
    v1 = {c: mp for mp, fs, opts in mounts if fs == "cgroup" for c in ("memory", "pids")
          if c in opts}
    try:
        if "memory" in v1 and "pids" in v1:
            return _make_v1(v1, name, memory, pids)
        v2 = [mp for mp, fs, _ in mounts if fs == "cgroup2"]
        for mp in v2:
            ctl = Path(mp) / "cgroup.controllers"
            if ctl.is_file() and {"memory", "pids"} <= set(ctl.read_text().split()):
                return _make_v2(Path(mp), name, memory, pids)
    except OSError as e:
        return Cgroup("", why_none=f"cannot create one: {e.strerror or e}")
    return Cgroup("", why_none="no writable memory and pids controllers")


def _make_v1(v1: dict, name: str, memory: int, pids: int) -> Cgroup:
    dirs = []
    for ctl in ("memory", "pids"):
        d = Path(v1[ctl]) / "lockbench-grade" / name
        d.mkdir(parents=True, exist_ok=True)
        dirs.append(d)
    mem, pid = dirs
    _write(mem / "memory.limit_in_bytes", memory)
    with contextlib.suppress(OSError):  # present only with swap accounting
        _write(mem / "memory.memsw.limit_in_bytes", memory)
    _write(pid / "pids.max", pids)
    return Cgroup("cgroup v1", dirs, memory, pids)


def _make_v2(root: Path, name: str, memory: int, pids: int) -> Cgroup:
    base = root / "lockbench-grade"
    base.mkdir(exist_ok=True)
    for d in (root, base):
        with contextlib.suppress(OSError):
            _write(d / "cgroup.subtree_control", "+memory +pids")
    d = base / name
    d.mkdir(exist_ok=True)
    _write(d / "memory.max", memory)
    with contextlib.suppress(OSError):
        _write(d / "memory.swap.max", 0)
    _write(d / "pids.max", pids)
    return Cgroup("cgroup v2", [d], memory, pids)


def cgroup_pids(cg: Cgroup) -> set:
    out: set = set()
    for d in cg.dirs:
        with contextlib.suppress(OSError):
            out |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
    return out


def remove_cgroup(cg: Cgroup) -> int:
    """Kills what is left in the cgroup, then removes it; returns how many were killed."""
    killed = kill_until_none(lambda: cgroup_pids(cg))
    for d in cg.dirs:
        for _ in range(50):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)  # the last tasks are still exiting
    return killed


def _quota(text: str) -> float | None:
    """CPUs a cgroup's quota allows: cpu.max ('50000 100000', 'max 100000') or v1's
    'quota period' pair; None for no limit."""
    parts = text.split()
    if len(parts) != 2 or parts[0] in ("max", "-1"):
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _quota_files(line: str) -> list:
    """(files to read) for one /proc/self/cgroup line: its own cgroup and every parent up
    to the mount's root, for v2 (cpu.max) and v1 (cfs quota and period)."""
    _, ctl, path = line.split(":", 2)
    if ctl == "":
        base, one = Path("/sys/fs/cgroup"), ("cpu.max",)
    elif "cpu" in ctl.split(","):
        base, one = Path("/sys/fs/cgroup/cpu"), ("cpu.cfs_quota_us", "cpu.cfs_period_us")
    else:
        return []
    rel = Path(path.strip() or "/")
    return [[base / p.relative_to("/") / f for f in one] for p in [rel, *rel.parents]]


def effective_cpus() -> float:
    """The CPUs this process may use: its affinity mask, and below it a cgroup CPU quota
    (Gradescope's default container gets half a CPU while seeing every core)."""
    cpus: float = len(os.sched_getaffinity(0))
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return cpus
    for line in lines:
        for files in _quota_files(line) if line.count(":") >= 2 else []:
            try:
                text = " ".join(f.read_text().strip() for f in files)
            except OSError:
                continue
            q = _quota(text)
            if q is not None:
                cpus = min(cpus, q)
    return cpus
