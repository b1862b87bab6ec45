"""The records of a grading, the one description of each check and measurement: the
bottom layer of the grader (nothing of analysis.grade is imported here; every other module
may import it).

A check's record says its id, its title (and a one-server lab's, where that differs), what
to fix when it does not pass (and a one-server lab's), how a share of its points is
counted, what it costs under a time budget, the servers it needs, the lab versions it
applies to, its stage and its runner, whether it times the servers (nothing else of the
submission runs beside it), whether a failure of it is only a finding, whether `--skip`
may leave it out, and its evidence rule: what it counts as judged (requests answered,
operations checked, lines compared, probes run), of which it needs at least one to pass
(checks/evidence.py holds the rule; nothing judged is never a pass).

A measurement's record (kind MEASUREMENT) is what the checks of its stage stand on, run
once before them: the idle pause, the kit workload, the clock probe. It yields no check of
its own; its runner leaves its results on the grading's context.

Every runner is named "module:function" under analysis.grade (the checks' in checks/, the
measurements' in measure/) and has one signature, run(ctx, bin_dir, present); a check's
returns its record of evidence (context.check). The worker runs the stages in order, each
stage's measurements first, then every check of the lab's in it, resolving runners by their
record; nothing calls a check or a measurement by name. A new check is one module with its
runner, one record here and one line of points in grade_weights.toml (docs/grading.md,
"Adding a check").
"""

from dataclasses import dataclass

STAGES = ("build", "start", "workload", "probe", "option")
CHECK, MEASUREMENT = "check", "measurement"


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    title_one: str = ""      # for a one-server lab (labs.Lab.servers == ("main",))
    fix: str = ""            # what to fix, when the runner gives no diagnosis of its own
    fix_one: str = ""        # the same for a one-server lab
    partial: str = ""        # how a share of its points is counted, when it reports one
    cost_in_runs: int = 0    # what it costs, in kit runs of this grading (see worker)
    per_server: bool = False  # judges each server: a missing server costs its share
    finding: bool = False    # failing it alone makes PASS WITH FINDINGS, not FAIL
    judges: str = ""         # what it counts as judged (its result's `judged`), plural words
    quiet: bool = False      # times the servers: nothing else of the submission runs beside it
    stage: str = "workload"  # of STAGES: build, start (the servers built), workload (after
                             # the kit workload and the idle pause), probe (after the clock
                             # probe), option (switched on by the grading's `option`)
    runner: str = ""         # "module:function" under analysis.grade: run(ctx, bin_dir, present)
    labs: tuple = ()         # the lab versions it applies to (labs.LABS names; all if empty)
    needs: tuple = ()        # the servers it cannot run without ("first": the lab's first)
    option: str = ""         # the configuration key that switches it on (--race, --memory)
    after_pause: bool = False  # reads the idle pause's results (the pause ended first)
    kind: str = CHECK        # CHECK (a line of the page) or MEASUREMENT (what checks stand on)
    skippable: bool = False  # `grade --skip` may leave it out (undetermined, not scored)
    ends: str = ""           # a measurement left running: "module:function" run(ctx) that
                             # ends it, before the first check of its stage that reads it or
                             # times the servers, and at the end of the grading
    late: bool = False       # judged from the kit workload's results alone: when the time
                             # budget runs out before it ran, it is judged from them then
    after: str = ""          # "module:function" run(checks) on the grading's checks once the
                             # evidence rule has applied (the leaderboard's rule)

    def needed(self, lab) -> tuple:
        """The servers of `lab` it cannot run without."""
        return tuple(lab.first if n == "first" else n for n in self.needs)

    def title_for(self, lab=None) -> str:
        """The title for this lab (the four-server lab's when none is known yet)."""
        one = lab is not None and len(lab.servers) == 1
        return self.title_one if one and self.title_one else self.title


def _sanitized(cid: str, option: str, runner: str, sanitizer: str, flags: str, *, title: str,
               fix: str, rule: str = "") -> Check:
    """A sanitizer's check, switched on by `option`: the submission rebuilt with
    `-fsanitize=flags`, its servers run under `sanitizer` (checks.races.sanitized), a
    failure only a finding. The rebuild needs the same of every Makefile, so every such
    fix ends by saying it (`rule`: an example rule that takes the flags)."""
    return Check(id=cid, stage="option", option=option, runner=runner,
                 judges=f"servers run under {sanitizer}", title=title,
                 fix=f"{fix}, and let the Makefile take CC, CFLAGS and LDFLAGS from the command "
                     f"line{rule} so that it can be rebuilt with `-fsanitize={flags}`",
                 finding=True)


# Fix texts: backticks mark code (code spans in Markdown, <code> in HTML). Costs, measured
# with the default settings on a 2-core machine at 0.2 s a kit run: consistency 20 s, idle
# 2 s, speed 5 s, design 3 s, robustness 3 s, the clock probe 2 s; half as much again for margin.
RECORDS = (
    Check(id="build", stage="build", runner="checks.build:check_build",
          judges="servers built",
          title="Builds with make",
          fix="make sure `make` with no arguments, run in the submission's top folder, builds "
              "main1, main2, main3 and main4 there: its first target (as in `all: main1 main2 "
              "main3 main4`) must name all four, every source file it needs must be handed in, "
              "it must link with `-lpthread`, and it must build with today's gcc without "
              "-fcommon or gcc 14's errors made warnings (the retry the evidence names); the "
              "make output quoted in this check's evidence shows the first error",
          fix_one="make sure `make` with no arguments, run in the submission's top folder, "
                  "builds `main` there: its first target must be main, every source file it "
                  "needs must be handed in, it must link with `-lpthread`, and it must build "
                  "with today's gcc without -fcommon or gcc 14's errors made warnings (the "
                  "retry the evidence names); the make output quoted in this check's evidence "
                  "shows the first error",
          partial="the share of the lab's servers that a plain `make` built (none when it needed "
                  "a retry: -fcommon for the link, or gcc 14's new C errors made warnings)"),
    Check(id="binaries", stage="build", runner="checks.build:check_binaries",
          judges="servers present",
          title="main1..main4 exist",
          title_one="main exists",
          fix="build (or hand in) four executables named exactly main1, main2, main3 and main4 "
              "in the top folder of the submission: not in a subfolder, not under other names",
          fix_one="build (or hand in) one executable named exactly main in the top folder of the "
                  "submission"),
    Check(id="cmdline", stage="start", runner="checks.kit:check_cmdline",
          judges="servers started with the kit's command line",
          title="mainN n ip port, with the kit's port quirk",
          title_one="main n ip port, with the kit's port quirk",
          fix="start as the kit does, `./mainN n ip port` (the array size, the IP address, the "
              "port), and listen on the port given without htons, like the kit's server: "
              "`sock_var.sin_port = atoi(argv[3])` (the kit's client connects to the "
              "byte-swapped port, so a server that uses htons cannot be reached by it)",
          fix_one="start as the kit does, `./main n ip port` (the array size, the IP address, "
                  "the port), and listen on the port given without htons, like the kit's server: "
                  "`sock_var.sin_port = atoi(argv[3])`",
          per_server=True),
    Check(id="initial", stage="start", runner="checks.kit:check_initial",
          judges="strings read back",
          title="Initial values 'String i: the initial value'",
          fix='before accepting any connection, set every string i < n to exactly "String i: the '
              'initial value": `sprintf(theArray[i], "String %d: the initial value", i)`',
          per_server=True),
    Check(id="pause", kind=MEASUREMENT, runner="measure.pause:begin_pause",
          ends="measure.pause:end_pause", skippable=True,
          title="The idle pause: each server left idle between two kit runs (read by the "
                "workload check)"),
    Check(id="kitrun", kind=MEASUREMENT, runner="measure.kitrun:kit_workload",
          title="The kit workload, every server at every n (read by the checks after it)"),
    Check(id="workload", runner="checks.kit:check_workload_run", after_pause=True,
          judges="requests answered",
          title="The kit workload (like test.sh): errors, crashes, hangs",
          fix="the server must answer every request of 100 client threads x 10 requests and "
              "never stop: accept in a loop, one thread per connection that reads the whole "
              "request, replies and closes; a crash names its signal and the request in flight "
              "(follow that request through your code), a hang names the requests left without a "
              "reply (a lock not unlocked on some path, threads never joined or detached)",
          partial="the share of (server, n) settings whose runs all went without an error, crash "
                  "or hang",
          per_server=True),
    Check(id="consistency", skippable=True, runner="checks.consistency:check_consistency",
          judges="operations checked for linearizability",
          title="Correctness under concurrency (per-slot linearizability)",
          fix="hold the string's lock across the whole read or write, from before the access to "
              "after it (its usleep included), and build the reply from what was read under the "
              "lock; the counterexample shows the interleaving: which requests overlapped and "
              "what each one saw",
          cost_in_runs=150,
          per_server=True),
    Check(id="idle", skippable=True, runner="checks.idle:check_idle",
          judges="requests served beside a silent connection",
          title="A silent client does not block the others",
          fix="do not read in the accepting thread: accept the connection and hand it to a "
              "thread of its own (a thread per connection) that reads the request, so that a "
              "client that connects and sends nothing blocks only its own thread",
          cost_in_runs=15,
          per_server=True),
    Check(id="speed", skippable=True, runner="checks.speed:check_speed", labs=("2019-2023",),
          needs=("main1", "main2", "main4"), quiet=True, judges="bursts timed",
          title="main2 and main4 clearly faster than main1 (measured by the grader)",
          fix="main2 must lock only the string it touches (an array of n mutexes: lock position "
              "pos's own), and main4 likewise with a read/write lock per string "
              "(`pthread_rwlock_rdlock` to read, `pthread_rwlock_wrlock` to write); let each "
              "connection's thread run on its own: no `pthread_join` right after "
              "`pthread_create`, no global lock around the access",
          cost_in_runs=40),
    Check(id="design", skippable=True, runner="checks.design:check_design",
          quiet=True, judges="servers whose design was decided",
          title="Each server uses the lock design of its number (traced and measured)",
          title_one="main uses one of the lab's lock designs, named (traced and measured)",
          fix="use the lock design the lab asks of this server number: main1 one mutex for the "
              "whole array, main2 a mutex per string, main3 one read/write lock for the whole "
              "array, main4 a read/write lock per string",
          fix_one="lock the array with one of the lab's designs (one mutex, a mutex per string, "
                  "one read/write lock, a read/write lock per string), each string's lock held "
                  "across its whole access",
          partial="the share of the servers the tracer could judge that use the lock design the "
                  "lab asks of their number",
          cost_in_runs=25,
          per_server=True),
    Check(id="concurrency", skippable=True, runner="checks.concurrency:check_concurrency",
          after="checks.concurrency:post_or_withhold", labs=("2024+", "2018"),
          quiet=True, judges="bursts timed",
          title="main serves requests concurrently (timed against the grader's own servers)",
          fix="let each connection's thread run on its own (no `pthread_join` right after "
              "`pthread_create`, the request read in that thread, not the accepting one) and "
              "hold a string's lock only around that string's access, so that writes to "
              "different strings overlap",
          cost_in_runs=25),
    Check(id="robustness", skippable=True, runner="checks.robustness:check_robustness",
          needs=("first",),
          judges="probes run",
          title="Robustness (main1): empty connection, malformed frames, client leaving early",
          title_one="Robustness (main): empty connection, malformed frames, client leaving early",
          fix="check read()'s return before using the buffer (0 or -1: close the connection and "
              "end the thread) and the request's fields before using them: a '-' between them, 0 "
              "<= position < n, is_read 0 or 1, a NUL within the 100 bytes; ignore SIGPIPE "
              "(`signal(SIGPIPE, SIG_IGN)`) so that a client that leaves before its reply cannot "
              "kill the server",
          partial="the share of the probes the server survived, answering the next request (a "
                  "probe that could not run costs nothing)",
          cost_in_runs=25,
          finding=True),
    Check(id="probe", kind=MEASUREMENT, stage="probe", runner="checks.timing:probe",
          skippable=True, cost_in_runs=15,
          title="The clock probe: what the timing lines must contain, measured by the "
                "grader (read by the timing check)"),
    Check(id="timing", stage="probe", runner="checks.timing:check_timing_run", late=True,
          quiet=True, judges="timing lines judged",
          title="The timing file server_output_time_aggregated",
          fix="write server_output_time_aggregated in the server's working folder: one line per "
              "1000 requests, their mean latency in seconds printed with %e (`fprintf(f, "
              '"%e\\n", mean)`), each request timed from when it has been read to when its reply '
              "is ready, the lock waiting included",
          partial="the share of (server, n) settings whose timing lines were plausible, with "
                  "the lines of main1 (a one-server lab's main) under the clock probe as one "
                  "more when the probe judged them",
          per_server=True),
    _sanitized("races", "race", "checks.races:race_check", "ThreadSanitizer", "thread",
               title="Race detector (ThreadSanitizer)",
               fix="make every access to shared data (the array, counters, the timing sums) "
                   "under the lock that protects it (the first stack in the evidence shows "
                   "where)",
               rule=" (`$(CC) $(CFLAGS) -o main1 main1.c $(LDFLAGS)`)"),
    _sanitized("memory", "memory", "checks.memory:memory_check", "AddressSanitizer",
               "address,undefined",
               title="Memory errors (AddressSanitizer and UBSan)",
               fix="the first error in the evidence names its kind and the source line: keep "
                   "every index inside its array (a batch counter reset before it passes the "
                   "array's end, a position checked against n), every copy inside its buffer "
                   "(strncpy with the buffer's size)"),
)
CHECKS = tuple(r for r in RECORDS if r.kind == CHECK)
MEASUREMENTS = tuple(r for r in RECORDS if r.kind == MEASUREMENT)
BY_ID = {r.id: r for r in RECORDS}
# What `grade --skip` may leave out: the checks after the kit workload, then the
# measurements the timing and workload checks can be judged without (the clock probe, the
# idle pause). The build, the start, the initial values, the kit workload and the timing
# lines are what every other check stands on.
SKIPPABLE = tuple(r.id for r in (*CHECKS, *MEASUREMENTS) if r.skippable)


def for_lab(name: str) -> tuple:
    """The ids of the checks of the lab version `name`, in page order (those switched on
    by an option last, when they are)."""
    return tuple(c.id for c in CHECKS if not c.labs or name in c.labs)


# Every check of the four-server lab in page order, the optional ones left out.
ORDER = tuple(cid for cid in for_lab("2019-2023") if not BY_ID[cid].option)
PER_SERVER = tuple(c.id for c in CHECKS if c.per_server)
FINDINGS = tuple(c.id for c in CHECKS if c.finding)


def title(cid: str, lab=None) -> str:
    """A check's title for this lab; an unknown id is its own title."""
    c = BY_ID.get(cid)
    return c.title_for(lab) if c else cid


def fixes(check: dict, one_server: bool = False) -> list:
    """The fix rule, the one the worker and every page use: what to fix for a check that
    did not pass: its own `fix` (a text or a list of texts, the runner's specific
    diagnosis) when it has one, else its record's default (a one-server lab's when
    `one_server` and the record has one); [] for a passed check or one the grader did not
    run. The texts may quote a student's: show them escaped."""
    if check.get("status") == "pass" or check.get("not_run") is True:
        return []
    own = check.get("fix")
    own = [own] if isinstance(own, str) else own if isinstance(own, list) else []
    own = [str(x) for x in own if isinstance(x, str) and x.strip()]
    if own:
        return own
    rec = BY_ID.get(check.get("id"))
    if rec is None:
        return []
    fix = rec.fix_one if one_server and rec.fix_one else rec.fix
    return [fix] if fix else []
