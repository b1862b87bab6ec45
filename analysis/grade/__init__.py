"""lockbench grade: grade other people's Lab 2 servers, sandboxed.

Modules: kitload (the kit's workloads over raw sockets, with a history), linearize
(per-slot register linearizability), sandbox (bubblewrap command lines), worker (the checks,
run inside the sandbox's network namespace), weights (points per check), render (Markdown,
HTML, results.json), cli (the command line, class summary, resume).
"""
