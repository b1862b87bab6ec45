"""lockbench grade: grade other people's Lab 2 servers, sandboxed (docs/grading.md).

cli (the command line, the class, resume), worker (inside the sandbox: the stages of the
checks), labs (the lab's versions); trust/ (the boundary: the outer sandbox and its host
side, the launcher, slots and cgroups, capped reading, names, hand-ins), checks/ (one record
and one module per check, and the evidence rule), measure/ (what the checks share: the
grading's context and servers, the kit workload and requests, bursts, linearizability, the
lock trace, the idle pause), pages/ (score, Markdown, HTML, Gradescope, the class page,
similarity, the platform bundles); kitserver.h and kitref.c (the grader's own kit-style
servers, which the test fixtures are built from too).
"""
