"""The launcher: the first process of the outer sandbox, and the only one there with
privileges. It starts the grading worker as an unprivileged uid with no capabilities, then
does for it, over a socket pair, the things that need root: copy the submission into
the scratch tmpfs (never following a link), make working folders owned by the
submission's uid, start inner sandboxes as that uid (in its cgroup), handing one a
descriptor on a lock trace file in a folder of the launcher's when asked, and in container
mode, between the turns of servers timed against each other, stop whatever the
submission left running (op_sweep). It never reads anything a submission produced; the
worker does, unprivileged.

    python -m analysis.grade.trust.launcher      (configuration in $LOCKBENCH_GRADE, JSON)

The worker side is `Client`: spawn() returns a Popen-like handle.
"""

import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from analysis.grade.trust import isolation
from analysis.grade.trust import packaging as P
from analysis.grade.trust import sandbox as S

MAX_MSG = 1 << 20
MAX_ENTRIES = 20_000         # files and folders copied at most
MAX_DEPTH = 32
TRACES = "traces"            # under the scratch space: trace files, the launcher's folder
UNPACK_S = 120               # seconds a zip handed in may take to unpack


def _gcc_major(compiler: str) -> int | None:
    """gcc's major version for a compiler that is gcc, None for clang (or one that fails)."""
    if "clang" in os.path.basename(os.path.realpath(compiler)):
        return None
    try:
        out = subprocess.run([compiler, "-dumpversion"], capture_output=True, text=True,
                             timeout=30).stdout
        return int(out.split(".")[0])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


# ---- the privileged side -----------------------------------------------------------------

class Copier:
    """Copies a submission tree: regular files and folders; a symbolic link only when it
    stays inside the copy; nothing else. Stops at a byte and an entry cap. Every skip is a
    note (shown on the page, escaped)."""

    def __init__(self, cap: int, uid: int, skip: set = frozenset()):
        self.cap, self.uid, self.bytes, self.entries, self.notes = cap, uid, 0, 0, []
        self.skip = skip  # top-level names not to copy

    def note(self, rel: str, why: str) -> None:
        if len(self.notes) < 20:
            self.notes.append(f"{rel!r}: {why}, not copied")
        elif len(self.notes) == 20:
            self.notes.append("... (more not copied)")

    def tree(self, src: str, dst: str, rel: str = "", depth: int = 0) -> None:
        os.mkdir(dst, 0o755)
        os.chown(dst, self.uid, self.uid)
        if depth > MAX_DEPTH:
            self.note(rel, f"folder deeper than {MAX_DEPTH}")
            return
        with os.scandir(src) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            self.entries += 1
            r = f"{rel}/{e.name}" if rel else e.name
            if not rel and e.name in self.skip:
                continue
            if self.entries > MAX_ENTRIES:
                self.note(r, f"more than {MAX_ENTRIES} files")
                return
            self.entry(e, os.path.join(dst, e.name), r, depth)

    def entry(self, e, target: str, rel: str, depth: int) -> None:
        st = e.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            self.tree(e.path, target, rel, depth + 1)
        elif stat.S_ISLNK(st.st_mode):
            link = os.readlink(e.path)
            inside = os.path.normpath(os.path.join(os.path.dirname(rel), link))
            if os.path.isabs(link) or inside == ".." or inside.startswith("../"):
                self.note(rel, f"a symbolic link to {link!r}, outside the submission")
                return
            os.symlink(link, target)
            os.lchown(target, self.uid, self.uid)
        elif stat.S_ISREG(st.st_mode):
            if self.bytes + st.st_size > self.cap:
                self.note(rel, f"{st.st_size} bytes, beyond the {self.cap >> 20} MiB a "
                               "submission may hold")
                return
            self.bytes += st.st_size
            with open(e.path, "rb", opener=_nofollow) as f, open(target, "xb") as g:
                shutil.copyfileobj(f, g, 1 << 16)
            os.chown(target, self.uid, self.uid)
            os.chmod(target, 0o755 if st.st_mode & 0o111 else 0o644)
        else:
            self.note(rel, "not a regular file, folder or link")


def _unpack_reply(reply, set_aside: list) -> dict:
    """op_copy's answer for a zip, from what the unpacking process printed, each field
    checked (that process ran as the submission's uid): an error becomes a note."""
    def text(v) -> str:
        return str(v)[:300]
    r = reply if isinstance(reply, dict) else {}
    ok = (isinstance(r.get("files"), int) and isinstance(r.get("bytes"), int)
          and isinstance(r.get("notes"), list) and isinstance(r.get("set_aside"), dict)
          and isinstance(r.get("makefile"), bool))
    if "error" in r or not ok:
        why = text(r.get("error", "the unpacking process gave no answer"))
        return {"notes": [f"the zip was not unpacked: {why}"], "bytes": 0, "makefile": False,
                "set_aside": {}, "unpacked": ""}
    aside = {k: v for k, v in r["set_aside"].items() if k in set_aside and isinstance(v, str)
             and len(v) <= 128 and all(c in "0123456789abcdef" for c in v) and len(v) % 2 == 0}
    top = f", from its top folder {text(r.get('top'))!r}" if r.get("top") else ""
    return {"notes": [text(n) for n in r["notes"][:21]], "bytes": r["bytes"],
            "makefile": r["makefile"], "set_aside": aside,
            "unpacked": f"unpacked the zip handed in: {r['files']} files, {r['bytes']} "
                        f"bytes{top}"}


def _nofollow(path, flags):
    return os.open(path, flags | os.O_NOFOLLOW)


class Launcher:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.uid = cfg["sub_uid"]
        self.budget = S.Budget(**cfg.get("budget", {}))
        self.cg = cfg.get("cgroups", [])
        self.procs: dict = {}

    def _inside(self, path: str) -> str:
        real = os.path.realpath(path)
        if not any(real == r or real.startswith(r + "/") for r in (S.SCRATCH, S.REFERENCE)):
            raise ValueError(f"{path} is outside the scratch and reference folders")
        return real

    def op_copy(self, msg, fds) -> dict:
        """With a Makefile, handed-in binaries of the names in `set_aside` are not copied
        (make must build them); the first bytes of each are returned so the page can say
        what they were."""
        dst = self._inside(os.path.join(S.SCRATCH, msg["dst"]))
        if os.path.lexists(dst):
            shutil.rmtree(dst)
        if os.path.isfile(S.SUBMISSION):
            return self._unpack(dst, msg.get("set_aside", []))
        makefile = any(os.path.isfile(os.path.join(S.SUBMISSION, m))
                       for m in ("Makefile", "makefile", "GNUmakefile"))
        aside = {}
        if makefile:
            for name in msg.get("set_aside", []):
                path = os.path.join(S.SUBMISSION, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb", opener=_nofollow) as f:
                        aside[name] = f.read(64).hex()
        c = Copier(self.budget.copy, self.uid, skip=set(aside))
        try:
            c.tree(S.SUBMISSION, dst)
        except OSError as e:  # a full scratch tmpfs, an unreadable file
            c.notes.append(f"the copy stopped: {e.strerror or e}")
        return {"notes": c.notes, "bytes": c.bytes, "makefile": makefile, "set_aside": aside}

    def _unpack(self, dst: str, set_aside: list) -> dict:
        """A zip handed in: unpacked into dst by a process of the submission's uid, with no
        capabilities (analysis.grade.trust.handin), reading the zip from a descriptor opened
        here; its answer is read with a cap. The launcher itself parses nothing of it."""
        os.mkdir(dst, 0o755)
        os.chown(dst, self.uid, self.uid)
        argv = [*S.as_uid(self.uid), *S.python_argv(sys.executable, "analysis.grade.trust.handin"),
                dst, str(self.budget.copy), ",".join(set_aside)]
        with open(S.SUBMISSION, "rb") as f:
            try:
                p = subprocess.run(argv, stdin=f, capture_output=True, timeout=UNPACK_S,
                                   env={"PATH": "/usr/bin:/bin", "HOME": S.HOME}, cwd=dst)
                reply = json.loads(p.stdout[:MAX_MSG] or b"{}")
            except subprocess.TimeoutExpired:
                reply = {"error": f"unpacking took over {UNPACK_S} s"}
            except ValueError:
                reply = {}
        return _unpack_reply(reply, set_aside)

    def op_unlink(self, msg, fds) -> dict:
        """Removes one file of the copy (a handed-in binary that cannot run here)."""
        path = os.path.join(S.SCRATCH, msg["path"])
        self._inside(os.path.dirname(path))
        os.unlink(path)
        return {}

    def op_alias(self, msg, fds) -> dict:
        """mainN as a link to the file the course's layout names (inside the copy)."""
        d = self._inside(os.path.join(S.SCRATCH, msg["tag"]))
        name, target = msg["name"], msg["target"]
        if "/" in name or target.startswith("/") or ".." in target.split("/"):
            raise ValueError(f"bad layout {name}={target}")
        os.symlink(target, os.path.join(d, name))
        return {}

    def op_tools(self, msg, fds) -> dict:
        """Compiler wrappers that add the flags of the build retries named (packaging.RETRIES;
        for hard-coded `gcc` in a Makefile too), after the Makefile's own flags. Returns their
        folder and the flags cc adds."""
        names = sorted(set(msg["retries"]))
        if not names or not set(names) <= {r.name for r in P.RETRIES}:
            raise ValueError(f"bad retries {names}")
        d = os.path.join(S.SCRATCH, "tools-" + "+".join(names))
        os.makedirs(d, 0o755, exist_ok=True)
        cc_flags = []
        for name in ("gcc", "cc", "g++", "c++", "clang"):
            real = shutil.which(name, path="/usr/bin")
            if real:
                flags = P.retry_flags(names, name, _gcc_major(real))
                cc_flags = flags if name == "cc" else cc_flags
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(f'#!/bin/sh\nexec {real} "$@" {" ".join(flags)}\n')
                os.chmod(path, 0o755)
        return {"dir": d, "flags": cc_flags}

    def op_mkdir(self, msg, fds) -> dict:
        d = self._inside(os.path.join(S.SCRATCH, msg["path"]))
        os.makedirs(d, 0o755, exist_ok=True)
        os.chown(d, self.uid, self.uid)
        return {}

    def _own_tmp(self) -> str:
        """Container mode: the submission's temporary folder, in the scratch space (made on
        first use, its uid's alone)."""
        d = os.path.join(S.SCRATCH, "tmp")
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o700)
            os.chown(d, self.uid, self.uid)
        return d

    def _trace(self, name: str) -> int:
        """A new file traces/<name> in the scratch space, open for appending: its folder is
        the launcher's own, so the submission that inherits the descriptor can write into
        the file but cannot delete it or put another in its place."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad trace name {name!r}")
        d = os.path.join(S.SCRATCH, TRACES)
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o755)
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise ValueError(f"{d} is not the launcher's own folder")
        return os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL
                       | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)

    def op_spawn(self, msg, fds) -> dict:
        """An inner sandbox; with "trace": NAME, the program inherits a descriptor on a new
        traces/NAME, its number in $LOCKPROF_TRACE_FD."""
        ro = {self._inside(k): v for k, v in msg["ro"].items()}
        rw = {self._inside(k): v for k, v in msg["rw"].items()}
        limits = S.Limits(**msg.get("limits", {}))
        env = {str(k): str(v) for k, v in msg.get("env", {}).items()}
        out, err = (fds + [subprocess.DEVNULL] * 2)[:2]
        keep = (self._trace(str(msg["trace"])),) if msg.get("trace") else ()
        if keep:
            env["LOCKPROF_TRACE_FD"] = str(keep[0])
        try:
            if self.cfg.get("sandbox") == "container":
                cmd, cwd, env = S.direct(ro, rw, msg["chdir"], msg["argv"], limits, self.uid,
                                         env, self._own_tmp(), self.cfg.get("own_tmp", False))
                p = subprocess.Popen(S.in_cgroups(self.cg, cmd), stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=err, cwd=cwd, env=env,
                                     start_new_session=True, pass_fds=keep)
            else:
                cmd = S.inner(ro, rw, msg["chdir"], msg["argv"], limits, self.uid,
                              self.budget, env)
                p = subprocess.Popen(S.in_cgroups(self.cg, cmd), stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=err, pass_fds=keep)
        finally:
            for fd in (*fds, *keep):
                os.close(fd)
        self.procs[p.pid] = p
        return {"pid": p.pid}

    def op_sweep(self, msg, fds) -> dict:
        """Container mode: stops every process of the submission's uid, each of which is
        one its programs left behind (with setsid or a double fork: there no pid namespace
        ends them with the program), and returns how many there were. Asked between the
        turns of the servers timed against each other, so that nothing of the submission
        runs during a turn of the grader's own; refused while a program the launcher
        started still runs (it might be one of the grader's own servers, which run as that
        uid too). Under bubblewrap a program's pid namespace ends with it: nothing to do."""
        if self.cfg.get("sandbox") != "container":
            return {"stopped": 0}
        running = [pid for pid, p in self.procs.items() if p.poll() is None]
        if running:
            raise ValueError(f"not swept: {len(running)} started program(s) still running")
        return {"stopped": isolation.kill_uids({self.uid}, live=True)}

    def op_poll(self, msg, fds) -> dict:
        return {"code": self.procs[msg["pid"]].poll()}

    def op_kill(self, msg, fds) -> dict:
        p = self.procs[msg["pid"]]
        if p.poll() is None:
            p.kill()
        try:
            code = p.wait(10)
        except subprocess.TimeoutExpired:
            code = None
        return {"code": code}

    def serve(self, sock) -> None:
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MSG, 4)
            except OSError:
                return
            if not data:
                return
            try:
                msg = json.loads(data)
                reply = getattr(self, "op_" + msg["op"])(msg, fds)
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                reply = {"error": f"{type(e).__name__}: {e}"}
            sock.send(json.dumps(reply).encode())

    def stop_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        for p in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5)


def main() -> int:
    cfg = json.loads(os.environ.pop("LOCKBENCH_GRADE"))
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    uid = cfg["worker_uid"]
    # TMPDIR: the same empty root-owned folder, never a /tmp a submission shares
    env = {"PATH": "/usr/bin:/bin", "HOME": S.HOME, "TMPDIR": S.HOME,
           "LOCKBENCH_GRADE": json.dumps(cfg),
           "LOCKBENCH_GRADE_ROOT": S.ROOT, "LOCKBENCH_LAUNCHER_FD": str(theirs.fileno())}
    worker = subprocess.Popen(
        [*S.as_uid(uid), *S.python_argv(sys.executable, "analysis.grade.worker")],
        pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL)
    theirs.close()
    launcher = Launcher(cfg)
    try:
        launcher.serve(mine)
    finally:
        launcher.stop_all()
    return worker.wait()


# ---- the worker's side -------------------------------------------------------------------

class Client:
    """Talks to the launcher; one request at a time (the worker has several threads)."""

    def __init__(self, fd: int | None = None):
        if fd is None:
            fd = int(os.environ.pop("LOCKBENCH_LAUNCHER_FD"))
        self.sock = socket.socket(fileno=fd)
        self.lock = threading.Lock()

    def call(self, fds=(), **msg) -> dict:
        with self.lock:
            socket.send_fds(self.sock, [json.dumps(msg).encode()], list(fds))
            reply = json.loads(self.sock.recv(MAX_MSG))
        if "error" in reply:
            raise OSError(f"launcher: {reply['error']}")
        return reply

    def spawn(self, argv, ro: dict, rw: dict, chdir: str, limits=None, stdout=None,
              stderr=None, env=None, trace: str = "") -> "Proc":
        """trace: a name; the program inherits a descriptor on traces/NAME (trace_path)."""
        fds = [f for f in (stdout, stderr) if f is not None]
        r = self.call(fds, op="spawn", argv=list(argv), ro={str(k): v for k, v in ro.items()},
                      rw={str(k): v for k, v in rw.items()}, chdir=chdir,
                      limits=dict(limits or {}), env=dict(env or {}), trace=trace)
        return Proc(self, r["pid"])


class Proc:
    """A started inner sandbox, as much of subprocess.Popen as grading uses."""

    def __init__(self, client: Client, pid: int):
        self.client, self.pid, self.returncode = client, pid, None

    def poll(self):
        if self.returncode is None:
            self.returncode = self.client.call(op="poll", pid=self.pid)["code"]
        return self.returncode

    def wait(self, timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("sandbox", timeout)
            time.sleep(0.02)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            self.returncode = self.client.call(op="kill", pid=self.pid)["code"]


def scratch(rel: str) -> Path:
    return Path(S.SCRATCH) / rel


def trace_path(name: str) -> Path:
    return Path(S.SCRATCH) / TRACES / name


if __name__ == "__main__":
    sys.exit(main())
