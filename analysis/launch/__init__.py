"""Starting a server under test, the one launcher every program shares (bottom layer): what
a server is (server_spec: ours or a kit-style one, its command line, where it runs) and the
processes (procs: start, readiness in the kernel's socket table, stop, the summary line). The
runner starts the lab's servers with it, the grader its sandboxed ones, the benchmarks
theirs; a remote host (runner.remote) and the grader's sandbox are places it is handed."""
