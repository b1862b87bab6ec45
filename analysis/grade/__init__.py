"""lockbench grade: grade other people's Lab 2 servers, sandboxed (docs/grading.md).

From the bottom up, each layer importing only those below it:

- records (the one description of every check and measurement: nothing of the grader
  imported);
- trust/ (the boundary: the outer sandbox and its host side, the launcher, slots and
  cgroups, capped reading, names, hand-ins, a hostile folder's sources), labs (the lab's
  versions);
- context (the grading's context, Ctx, and the evidence constructor, check());
- measure/ (what the checks stand on: sandboxed servers, the kit workload and requests,
  bursts, linearizability, the lock trace, the idle pause);
- checks/ (the runners, one module per check, and the evidence rule);
- worker (inside the sandbox: the stages, from the records alone);
- score (the weights and the score model, computed once per grading), similarity/ (the
  class's code compared);
- pages/ (Markdown, HTML, Gradescope's results, the class page, the similarity report);
- platforms/ (the course platforms' bundles and their entry point), cli (the command line,
  the class, resume).

kitserver.h and kitref.c are the grader's own kit-style servers, which the test fixtures
are built from too.
"""
