"""lockbench analysis: a package per program over one bottom layer (docs/architecture.md).

Programs (none imports another's package): runner/ (python -m analysis lab|sweep|all),
report/ (python -m analysis report), grade/ (the grader), profile/ (lockbench profile),
compare/ (lockbench compare); __main__.py dispatches. The bottom layer: this module (the
servers' labels), load, stats, numbers, ports, progress, kernel_sockets, traces, machine,
kitframe, text, lockprof/.
"""

SERVERS = ("main1", "main2", "main3", "main4")

STRATEGIES = {
    "main1": "one mutex",
    "main2": "mutex per string",
    "main3": "one rwlock",
    "main4": "rwlock per string",
}

# Beyond main1..main4, a server label may name any strategy of the generic server
# (`lockserver --list-strategies`), optionally with a stripe count: "striped-mutex:8".
LOCKSERVER = "lockserver"
_LABEL = __import__("re").compile(r"^[a-z][a-z0-9-]*(:[1-9][0-9]*)?$")


def is_server_label(label: str) -> bool:
    """main1..main4, or a well-formed strategy label NAME or NAME:K (not checked against
    the binary: see runner.lockserver_strategies)."""
    if label in SERVERS:
        return True
    label = str(label)
    return bool(_LABEL.match(label)) and not label.startswith("main")


def server_command(label: str) -> tuple[str, list]:
    """(binary name, arguments before <n>) of a server label: main3 -> ("main3", []);
    striped-mutex:8 -> ("lockserver", ["--strategy", "striped-mutex", "--stripes", "8"])."""
    if label in SERVERS:
        return label, []
    name, _, k = label.partition(":")
    return LOCKSERVER, ["--strategy", name, *(["--stripes", k] if k else [])]


def server_order(servers) -> list:
    """Distinct server labels in the order they first appear (the runner writes rows in the
    order of --servers, so this is the order the user gave)."""
    return list(dict.fromkeys(str(s) for s in servers))


def server_label(server) -> str:
    """A server as legends, table rows and sentences name it: main1 (one mutex), a
    strategy label as is."""
    return f"{server} ({STRATEGIES[server]})" if server in STRATEGIES else str(server)


def describe(server: str) -> str:
    """What a server label means, for legends and table rows."""
    if server in STRATEGIES:
        return STRATEGIES[server]
    name, _, k = str(server).partition(":")
    return f"lockserver {name}" + (f", {k} stripes" if k else "")
