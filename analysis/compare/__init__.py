"""lockbench compare: which lock for a program, each configuration timed in rounds (cli),
the statistics and the outputs (report)."""
