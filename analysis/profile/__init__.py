"""lockbench profile: a program run under liblockprof.so and its locks reported (cli), with
its contended stacks as a flame graph (stacks) and its waits and holds on a timeline
(timeline); the interposer's side it shares with compare is analysis/lockprof/."""
