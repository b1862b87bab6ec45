"""The Python side of liblockprof.so (profile/lockprof*.cpp), shared by the programs that
run another program under it (analysis/profile/, analysis/compare/): preload (the swap
locks, the program and the interposer checked), dump (one dump read as untrusted input),
symbols (addresses named), table (the dumps read and tabled)."""
