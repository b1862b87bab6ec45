"""The machine a measurement ran on, as the results and the benchmarks record it: its CPU
model, cores, kernel, OS, Python and the numeric packages' versions."""

import os
import platform
from pathlib import Path


def key_value(path, key: str, sep: str = ":") -> str | None:
    """The value of the first `key<sep>value` line of a file such as /proc/cpuinfo or
    /etc/os-release, stripped of blanks and quotes; None when absent or unreadable."""
    try:
        for line in Path(path).read_text().splitlines():
            k, found, v = line.partition(sep)
            if found and k.strip() == key:
                return v.strip().strip('"')
    except OSError:
        pass
    return None


def cpu_model() -> str:
    return key_value("/proc/cpuinfo", "model name") or "unknown"


def machine_info() -> dict:
    cpu = cpu_model()
    osname = key_value("/etc/os-release", "PRETTY_NAME", "=") or "unknown"
    from importlib.metadata import version
    return {"cpu_model": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "os": osname, "python": platform.python_version(),
            "packages": {p: version(p) for p in ("numpy", "pandas", "matplotlib")}}
