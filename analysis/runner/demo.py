"""`./lockbench demo`: each lab server once, our client's kit workload (1000 requests)
against it, and the timing line the server wrote. The servers start through the one
launcher (server_spec.launch: ready on their listening line) on a port pair nothing
listens on (ports.pick), as the runner's do.

    python -m analysis.runner.demo BIN_DIR
"""

import subprocess
import sys
import tempfile
from pathlib import Path

from analysis import kernel_sockets as ks
from analysis import ports
from analysis.launch.procs import RunError
from analysis.launch.server_spec import Options, Place, ServerSpec, launch

SERVERS = ("main1", "main2", "main3", "main4")
N = 100


def demo(bin_dir: Path, out=sys.stdout) -> None:
    """Runs the demo; RunError (one line) when a server cannot start or no port is free."""
    up = ks.listening_ports()
    port = ports.pick(up.__contains__)
    if port is None:
        raise RunError("no free port pair on 127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="lockbench-demo-") as tmp:
        d = Path(tmp)
        for name in SERVERS:
            time_file = d / f"{name}_time.txt"
            server = launch(ServerSpec(name, "lockbench", bin_dir / name), N, port, Place(d),
                            log_file=d / f"{name}.log",
                            opts=Options(time_file=time_file, extra=("--no-twin",)))
            print(f"{name}: our client, kit workload (1000 requests, n={N})", file=out,
                  flush=True)
            with server:
                subprocess.run([str(bin_dir / "client"), str(N), "127.0.0.1", str(port),
                                "--real-port"], check=False, stdout=out, stderr=out)
            lines = time_file.read_text().split() if time_file.exists() else []
            print(f"{name}: timing file line: {lines[-1] if lines else '(none written)'}",
                  file=out, flush=True)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not (Path(args[0]) / "main1").is_file():
        print("usage: python -m analysis.runner.demo BIN_DIR (a build with main1..main4 and "
              "client)", file=sys.stderr)
        return 2
    try:
        demo(Path(args[0]))
    except RunError as e:
        print(f"demo: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
