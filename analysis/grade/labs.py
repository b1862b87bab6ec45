"""The versions of ECE 420 Lab 2 a grader meets, each one record, and how a submission
tells which one it is (docs/grading.md, "Versions of the lab").

A version is two axes that changed independently:
- the servers handed in: four, main1..main4, one per lock design (2019-2023, and
  2018-2020 hand-ins whose `main` is the one-mutex main1: `main` plus main2..main4 as make
  targets); or one, `main`, with the design the student chose (2024+; 2018), in 2018-2020
  hand-ins often with the other designs as extra targets main1..main3 (`main` the best
  one), each named by its traced design and never graded;
- the kit: the kit's common.h sleeps usleep(10) in each access and its saveTimes writes
  the mean of 1000 latencies (from about 2021); the older kit's has no usleep and writes
  the sum (2018-2020 hand-ins). Without the delay how long a lock is held cannot be
  timed, so the checks that time it are undetermined, never failed.
- 2017: no kit protocol at all (each student wrote a client too, `server <port> <n>`):
  recognised (own_protocol) and said to be not gradable by the kit; `--lab 2017` refused.

The servers are told apart from what was built, the Makefile's targets (and --layout);
the kit from the submission's own common.h. `--lab NAME` names the servers instead.
"""

import re
from dataclasses import dataclass, replace

from analysis.grade import records as C
from analysis.grade.measure import design as D

FOUR = ("main1", "main2", "main3", "main4")
CANDIDATES = (*FOUR, "main")   # every server name of every version


@dataclass(frozen=True)
class Lab:
    name: str
    servers: tuple          # the executables it asks for
    delay: bool             # the kit's usleep(ART_DELAY) in every access
    timing: str             # what a timing line holds: "mean" or "sum" of 1000 latencies
    designs: dict           # server -> the lock designs that earn the design check
    checks: tuple           # its checks' ids (records.py), in page order
    what: str               # one line for the page
    place: tuple = ()       # (server, built name): a server the submission built under
                            # another name (`main` as main1), linked as --layout would
    extras: tuple = ()      # targets built beside the servers (main1..main3 beside `main`):
                            # each named by its traced design, never graded
    gradable: str = ""      # '' when the kit's checks apply, else why they do not

    @property
    def first(self) -> str:
        """The server the single-server checks use (robustness)."""
        return self.servers[0]

    @property
    def speed(self) -> bool:
        """main2 and main4 timed against main1 (the four-server lab only)."""
        return "speed" in self.checks

    def names(self) -> str:
        return ", ".join(self.servers[:-1]) + " and " + self.servers[-1] \
            if len(self.servers) > 1 else "".join(self.servers) or "no server of the kit's"


ANY_DESIGN = (D.ONE_MUTEX, D.MUTEX_PER_STRING, D.ONE_RWLOCK, D.RWLOCK_PER_STRING)

# One server has no other of its own to be timed against: no speed check; it is timed
# against the grader's reference servers instead (the concurrency check, after its design
# is traced). Each version's checks are those whose records name it (checks.for_lab).


def _checks(name: str) -> tuple:
    return tuple(cid for cid in C.for_lab(name) if not C.BY_ID[cid].option)


LABS = {
    "2019-2023": Lab("2019-2023", FOUR, True, "mean",
                     {s: (D.EXPECTED[s],) for s in FOUR}, _checks("2019-2023"),
                     "four servers main1..main4, one per lock design"),
    "2024+": Lab("2024+", ("main",), True, "mean", {"main": ANY_DESIGN}, _checks("2024+"),
                 "one server main with a lock design of the student's choice"),
    "2018": Lab("2018", ("main",), False, "sum", {"main": ANY_DESIGN}, _checks("2018"),
                "one server main; the kit without the access delay, timing lines are sums"),
}
DEFAULT = "2019-2023"
REFUSED = {"2017": "the 2017 lab has no kit protocol (each student wrote a client of their "
                   "own): it cannot be graded with the kit's workload"}
ALIASES = {"2019": "2019-2023", "2020": "2019-2023", "2021": "2019-2023",
           "2022": "2019-2023", "2023": "2019-2023", "2024": "2024+", "2025": "2024+",
           "2026": "2024+"}
NAMES = (*LABS, *REFUSED)


def by_name(name: str) -> Lab:
    """The lab `--lab NAME` asks for (a year names its version); ValueError with one line
    for 2017 or a name that is none."""
    key = ALIASES.get(name, name)
    if key in REFUSED:
        raise ValueError(REFUSED[key])
    if key not in LABS:
        raise ValueError(f"unknown lab {name!r}: one of {', '.join(LABS)} (or a year "
                         "2018-2026)")
    return LABS[key]


# the kit's common.h: getContent/setContent sleep in each access, saveTimes divides by the
# request count (2019 on); the older one neither
_DELAY = re.compile(rb"usleep\s*\(\s*ART_DELAY\s*\)|usleep\s*\(\s*10\s*\)")
_NAMES_FOUR = re.compile(rb"\bmain[1-4]\b")
OLDER_KIT = "the older kit (no usleep in the accesses, timing lines that are sums)"


def on_kit(lab: Lab, common_h: bytes | None) -> tuple:
    """(lab on the kit the submission's own common.h is of, '' or the reason to say): the
    older kit, without the delay, makes its lines sums and its lock holding untimeable."""
    if common_h is None or lab.name == "2018":
        return lab, ""
    if _DELAY.search(common_h):
        return replace(lab, delay=True, timing="mean"), ""
    return (replace(lab, delay=False, timing="sum", what=f"{lab.what}, on {OLDER_KIT}"),
            "its common.h has no usleep in the accesses: the older kit")


def _placed(named: set) -> dict:
    """Where a `main` built beside three of main1..main4 as make targets goes: the number
    the other three leave free (main2..main4 beside it: main is the one-mutex main1)."""
    free = [m for m in FOUR if m not in named]
    return {free[0]: "main"} if len(free) == 1 else {}


def detect(built: list, common_h: bytes | None, makefile: bytes | None = None,
           layout: dict | None = None) -> tuple:
    """(Lab, why) from the executables a plain make built (names), the submission's own
    common.h and its Makefile (their first bytes, None when there is none), and the
    course's --layout (a mainN in it asks for the four servers)."""
    four = [s for s in FOUR if s in built]
    named = {m.decode() for m in _NAMES_FOUR.findall(makefile or b"")}
    asked = [m for m in FOUR if m in (layout or {})]
    if "main" in built and not asked and named | set(four) == set(EXTRAS):
        return _with_extras(built, common_h, four, named)
    if four or asked:
        why = (f"{', '.join(four)} built" if four else
               f"--layout places {', '.join(asked)}")
        return _kit_said(LABS["2019-2023"], why, common_h)
    if "main" not in built:
        return LABS[DEFAULT], "neither main1..main4 nor main built"
    place = _placed(named)
    if place or named >= set(FOUR):
        lab = replace(LABS["2019-2023"], place=tuple(place.items()))
        where = f": main is {next(iter(place))}, the number they leave free" if place else ""
        return _kit_said(lab, f"main built, its Makefile names {', '.join(sorted(named))} as "
                              f"targets{where}", common_h)
    lab, why = _one_server(common_h, "main built alone")
    if named:
        missing = [m for m in FOUR if m not in named]
        why += (f"; its Makefile also names {', '.join(sorted(named))}: to grade them as the "
                f"four-server lab, --layout {','.join(f'{m}=NAME' for m in missing)}")
    return lab, why


def _kit_said(lab: Lab, why: str, common_h: bytes | None) -> tuple:
    lab, kit = on_kit(lab, common_h)
    return lab, why + (f"; {kit}" if kit else "")


def _one_server(common_h: bytes | None, head: str) -> tuple:
    """(the one-server lab its common.h's kit makes it, why): 2018 on the older kit, 2024+
    on today's or with no common.h."""
    old = common_h is not None and not _DELAY.search(common_h)
    return (LABS["2018"] if old else LABS["2024+"],
            head + (", its common.h without usleep in the accesses" if old else
                    "" if common_h is not None else ", no common.h (today's kit assumed)"))


EXTRAS = ("main1", "main2", "main3")


def _with_extras(built: list, common_h: bytes | None, four: list, named: set) -> tuple:
    """`main` with main1..main3 beside it (built or make targets) and no main4: the
    2018-2020 hand-in whose `main` is the student's best design and main1..main3 the
    others in the student's own order. `main` is graded as the one-server lab of its kit;
    the extras are named by their traced design, never judged against the four-server
    numbering."""
    how = "built" if set(four) == set(EXTRAS) else "make targets"
    lab, why = _one_server(common_h, f"main built, main1, main2 and main3 beside it ({how}) "
                                     "and no main4")
    return (replace(lab, extras=EXTRAS,
                    what=f"{lab.what}; main1, main2 and main3 are extra targets (the "
                         "student's other designs, main the best one): each named by its "
                         "traced design, not graded"),
            why + ": the 2018-2020 hand-in of main and its extras")


# The 2017 lab: the student's own server and client, `server <port> <n>`, a protocol of
# their own. The kit's client cannot talk to it, so none of the kit's checks applies.
OWN = Lab("2017", (), False, "", {}, ("build", "binaries"),
          "the student's own server and client with a protocol of their own: not gradable by "
          "the kit", gradable="the 2017 lab: its own server and client speak a protocol of "
                              "their own, which the kit's client and attacker cannot talk to")
NOT_GRADABLE = "NOT GRADABLE BY THE KIT"
_PORT_FIRST = re.compile(rb"(?:htons|port\w*\s*=)\s*\(?\s*(?:\(\s*\w+\s*\)\s*)?"
                         rb"(?:atoi|atol|strtol|strtoul)\s*\(\s*argv\s*\[\s*1\s*\]")
_KIT_COMMON = re.compile(rb"COM_BUFF_SIZE|COM_NUM_REQUEST|ART_DELAY|getContent|setContent")


def own_protocol(built: list, common_h: bytes | None, server_src: bytes | None) -> tuple:
    """(OWN, what was found) for a 2017-style hand-in: a `server` and a `client` of its own,
    no main nor mainN, and its server reading the port first (`server <port> <n>`) or no
    kit common.h beside it; else (None, '')."""
    if not {"server", "client"} <= set(built) or any(m in built for m in CANDIDATES):
        return None, ""
    port_first = bool(server_src and _PORT_FIRST.search(server_src))
    kit = bool(common_h and _KIT_COMMON.search(common_h))
    if not port_first and kit:
        return None, ""
    found = ["it builds a server and a client of its own, and no main nor main1..main4"]
    if port_first:
        found.append("its server takes the port first (argv[1]: `server <port> <n>`; the kit's "
                     "servers take `<n> <ip> <port>`)")
    found.append("the kit's common.h is not there (its protocol is its own)" if not kit else
                 "a kit-like common.h beside it")
    return OWN, "; ".join(found)
