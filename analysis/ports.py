"""Ports for servers under test, by one rule: a port P and its byte-swapped twin (where a
kit-style server listens, "the port quirk" of docs/server.md) are distinct and both lie in
1024..32767, below Linux's ephemeral range, so the clients' own connections (and their
TIME_WAIT) never take them. Every picker in lockbench (the runner here and across
machines, the benchmarks, the grader) draws from this module; only what counts as
"taken" differs."""

import random


def twin(port: int) -> int:
    """The byte-swapped port the kit client connects to."""
    return ((port >> 8) | (port << 8)) & 0xFFFF


def _pair(hi: int, lo: int) -> int | None:
    """The port with these two bytes when it and its twin both fit the rule."""
    p = hi << 8 | lo
    return p if hi != lo else None


def pick(taken, rng: random.Random | None = None, tries: int = 200) -> int | None:
    """A random port P with neither P nor its twin taken (taken(port) -> bool), or None."""
    rng = rng or random.Random()
    for _ in range(tries):
        p = _pair(rng.randint(4, 127), rng.randint(4, 127))
        if p is not None and not taken(p) and not taken(twin(p)):
            return p
    return None


GROUPS = 8   # disjoint shares of sequence() for gradings that share one loopback


def sequence(group: int = 0, groups: int = 1):
    """Every port P of the rule in a fixed order, no port or twin twice: for a grading,
    where one run hands each server start a port of its own. group/groups: only every
    groups-th of them from the group-th, so gradings side by side on one loopback (container
    mode) never draw the same one (about 750 each of GROUPS)."""
    used: set = set()
    k = 0
    for hi in range(0x10, 0x7F):
        for lo in range(0x11, 0x7F):
            p = _pair(hi, lo)
            if p is not None and p not in used and twin(p) not in used:
                used |= {p, twin(p)}
                if k % groups == group:
                    yield p
                k += 1
