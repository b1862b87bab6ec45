"""The binaries a run measures: where a build keeps them, which are lockbench's own servers
(read, never run), the strategies lockserver offers, and what the results record of the
build (its type, compiler, flags, each binary's hash)."""

import hashlib
import re
import subprocess
from pathlib import Path

from analysis import LOCKSERVER, SERVERS
from analysis.launch.procs import RunError, check_binary
from analysis.runner.results import REPO, command_output

# Option names only lockbench's servers carry (the runner passes them): a binary holding
# all of them is one of ours; anything else is driven as a kit-style server.
LOCKBENCH_MARKERS = (b"--delay-us", b"--time-file", b"--trace-limit")


_KIND_CACHE: dict = {}


def is_lockbench_server(binary: Path) -> bool:
    """Whether binary is one of lockbench's servers (holds the option names only they
    have); read, never run."""
    key = (str(binary), binary.stat().st_mtime_ns if binary.exists() else 0)
    if key not in _KIND_CACHE:
        try:
            data = binary.read_bytes()
        except OSError:
            data = b""
        _KIND_CACHE[key] = all(m in data for m in LOCKBENCH_MARKERS)
    return _KIND_CACHE[key]


def default_client(bin_dir: Path) -> Path:
    """bin_dir's client if there is one, else lockbench's own build's (a folder of someone
    else's servers holds none)."""
    p = find_binary(bin_dir, "client")
    return p if p.is_file() else find_binary(REPO / "build" / "release", "client")


def find_binary(bin_dir: Path, name: str) -> Path:
    """bin_dir/name, or bin_dir/name/name when CMake put the target in its subdirectory's
    build folder (the client is built as build/release/client/client)."""
    p = bin_dir / name
    return p / name if (p / name).is_file() else p


def lockserver_strategies(bin_dir: Path) -> list:
    """The strategy names `lockserver --list-strategies` prints (first word of each line).
    RunError if the binary is missing or fails."""
    exe = check_binary(find_binary(bin_dir, LOCKSERVER))
    try:
        p = subprocess.run([str(exe), "--list-strategies"], capture_output=True, text=True,
                           timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RunError(f"{exe} --list-strategies failed: {exc}") from None
    names = [ln.split()[0] for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 or not names:
        raise RunError(f"{exe} --list-strategies failed (exit {p.returncode})")
    return names


def build_info(bin_dir: Path) -> dict:
    """From the CMake build tree: build type, compiler, flags; hashes of the binaries."""
    info = {"bin_dir": str(bin_dir)}
    cache = bin_dir / "CMakeCache.txt"
    if cache.exists():
        kv = {}
        for line in cache.read_text(errors="replace").splitlines():
            m = re.match(r"^([A-Za-z0-9_]+):[A-Z]+=(.*)$", line)
            if m:
                kv[m.group(1)] = m.group(2)
        bt = kv.get("CMAKE_BUILD_TYPE", "")
        info.update({"build_type": bt, "cxx_compiler": kv.get("CMAKE_CXX_COMPILER", ""),
                     "cxx_flags": kv.get("CMAKE_CXX_FLAGS", ""),
                     "cxx_flags_build_type": kv.get(f"CMAKE_CXX_FLAGS_{bt.upper()}", ""),
                     "sanitize": kv.get("LOCKBENCH_SANITIZE", "")})
    for f in sorted(bin_dir.glob("CMakeFiles/*/CMakeCXXCompiler.cmake")):
        text = f.read_text(errors="replace")
        for key, out in (("CMAKE_CXX_COMPILER_ID", "cxx_compiler_id"),
                         ("CMAKE_CXX_COMPILER_VERSION", "cxx_compiler_version")):
            m = re.search(rf'set\({key} "([^"]*)"\)', text)
            if m:
                info[out] = m.group(1)
    if "cxx_compiler_version" not in info and info.get("cxx_compiler"):
        version = command_output([info["cxx_compiler"], "--version"])
        info["cxx_compiler_version"] = version.split("\n")[0]
    info["binaries"] = {}
    for name in (*SERVERS, LOCKSERVER, "client"):
        p = find_binary(bin_dir, name)
        if p.is_file():
            info["binaries"][name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return info
