"""The experiment runner: servers under test (server_spec, procs, remote) and the
experiments that measure them (experiment: the lab and the sweeps)."""
