"""The versions of ECE 420 Lab 2 a grader meets, each one record, and how a submission
tells which one it is (docs/grading.md, "Versions of the lab").

- 2019-2023: four servers, main1..main4, one per lock design; the kit's common.h sleeps
  usleep(10) in each access and its saveTimes writes the mean of 1000 latencies.
- 2024+: one server, `main`, with the lock design the student chose; the same kit.
- 2018: one server, `main`; the kit's common.h had no usleep and saveTimes wrote the sum.
- 2017: no kit protocol at all (each student wrote a client too): refused.

Told apart from what was built (main1..main4, or only `main`) and, for `main`, from the
submission's own common.h. `--lab NAME` decides instead.
"""

import re
from dataclasses import dataclass

from . import checks as C
from . import design as D

FOUR = ("main1", "main2", "main3", "main4")
CANDIDATES = (*FOUR, "main")   # every server name of every version


@dataclass(frozen=True)
class Lab:
    name: str
    servers: tuple          # the executables it asks for
    delay: bool             # the kit's usleep(ART_DELAY) in every access
    timing: str             # what a timing line holds: "mean" or "sum" of 1000 latencies
    designs: dict           # server -> the lock designs that earn the design check
    checks: tuple           # its checks' ids (checks.py), in page order
    what: str               # one line for the page

    @property
    def speed(self) -> bool:
        """main2 and main4 timed against main1 (the four-server lab only)."""
        return "speed" in self.checks

    @property
    def first(self) -> str:
        """The server the single-server checks use (robustness)."""
        return self.servers[0]

    def names(self) -> str:
        return ", ".join(self.servers[:-1]) + " and " + self.servers[-1] \
            if len(self.servers) > 1 else self.servers[0]


ANY_DESIGN = (D.ONE_MUTEX, D.MUTEX_PER_STRING, D.ONE_RWLOCK, D.RWLOCK_PER_STRING)

# One server has no other of its own to be timed against: no speed check; it is timed
# against the grader's reference servers instead (after its design is traced).
ONE_SERVER_CHECKS = tuple(x for c in C.ORDER if c != "speed"
                          for x in ((c, "concurrency") if c == "design" else (c,)))
LABS = {
    "2019-2023": Lab("2019-2023", FOUR, True, "mean",
                     {s: (D.EXPECTED[s],) for s in FOUR}, C.ORDER,
                     "four servers main1..main4, one per lock design"),
    "2024+": Lab("2024+", ("main",), True, "mean", {"main": ANY_DESIGN}, ONE_SERVER_CHECKS,
                 "one server main with a lock design of the student's choice"),
    "2018": Lab("2018", ("main",), False, "sum", {"main": ANY_DESIGN}, ONE_SERVER_CHECKS,
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
# request count (2019 on); the 2018 one neither
_DELAY = re.compile(rb"usleep\s*\(\s*ART_DELAY\s*\)|usleep\s*\(\s*10\s*\)")


_NAMES_FOUR = re.compile(rb"\bmain[1-4]\b")


def detect(built: list, common_h: bytes | None, makefile: bytes | None = None) -> tuple:
    """(Lab, why) from the executables a plain make built (names), the submission's own
    common.h and its Makefile (their first bytes, None when there is none)."""
    four = [s for s in FOUR if s in built]
    if four:
        return LABS["2019-2023"], f"{', '.join(four)} built: the four-server lab"
    if "main" not in built:
        return LABS[DEFAULT], f"neither main1..main4 nor main built: graded as the " \
                              f"{DEFAULT} lab"
    named = sorted({m.decode() for m in _NAMES_FOUR.findall(makefile or b"")})
    if common_h is not None and not _DELAY.search(common_h):
        # the 2018 lab's Makefiles sometimes built main1..main3 as extra targets
        why = "one server main, and its common.h has no usleep in the accesses: the 2018 lab"
        if "main4" in named:
            why += (f"; its Makefile also names {', '.join(named)} as the four-server lab's "
                    "do: the pieces disagree, and the kit decides (--lab chooses otherwise)")
        elif named:
            why += f" (its Makefile's extra targets {', '.join(named)} are not graded)"
        return LABS["2018"], why
    if named:
        return LABS["2019-2023"], "main built, and the Makefile names main1..main4 " \
                                  "targets: the four-server lab"
    kit = "its common.h sleeps in each access" if common_h is not None else "no common.h"
    return LABS["2024+"], f"one server main ({kit}): the 2024+ lab"
