"""Which submissions share code: pairwise similarity of their C sources, MOSS-style.

Every pair of submissions is compared with copydetect's winnowing (the algorithm of MOSS):
each source file is tokenised, identifiers become one letter (so renaming changes nothing),
comments and layout are dropped (so reformatting changes nothing), and a sample of the
hashes of its k-character substrings is kept as its fingerprints. Code that appears in both
submissions shares fingerprints wherever a run of at least GUARANTEE_T filtered characters
is the same, whatever order the functions are in. A pair's score on each side is the share
of that side's fingerprinted code found in the other; the pair is flagged when the larger
share reaches the threshold.

The course kit (common.h and the like, given to every student) would make every pair look
alike, so its fingerprints, when the TA names the kit's folder, are removed from every
submission before comparing.

A submission is hostile: its files are read by trust/sources.py (no link followed, only regular
files, up to byte caps), and everything it wrote (file names and code) reaches the report
(pages/similarity.py) escaped.
"""

import io
import multiprocessing
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
from copydetect import CodeFingerprint
from copydetect.utils import get_copied_slices, get_token_coverage

from analysis.grade.trust import names as N
from analysis.grade.trust.sources import EXTENSIONS, Source, read_sources

# Winnowing parameters, in characters of copydetect's filtered code, where an identifier is
# one letter, a keyword its word, and punctuation one character each: 25 characters are about
# 10-15 C tokens, roughly one statement line. Shorter runs are noise every lab 2 server has
# (socket(AF_INET, SOCK_STREAM, 0), pthread_mutex_lock(&V)); a run of GUARANTEE_T characters
# or more that two files share is always found. The window of GUARANTEE_T - NOISE_T + 1 = 6
# hashes keeps about 2 in 7 of them (winnowing's density 2 / (w + 1)): few enough to compare
# a class quickly, enough that a copied function leaves many matches.
NOISE_T = 25
GUARANTEE_T = 30
WINDOW = GUARANTEE_T - NOISE_T + 1
# A pair is flagged when one side has at least this share of its own (non-kit) code in the
# other. An independent lab 2 server shares only idioms (socket setup, lock calls) with
# another, which stays well under a third; a copy with renamed identifiers, reordered
# functions and new comments keeps most of its runs and scores far above. The tests'
# fixtures: such a copy 0.97-0.98, independent servers 0.00-0.26 with the kit left out (two
# small servers carrying the kit's common.h score 0.81 when it is not left out). Scores move
# by about 0.01 between runs: copydetect hashes with Python's hash(), salted per process, so
# the sampled fingerprints differ a little.
DEFAULT_THRESHOLD = 0.5
# A pair whose matched code is shorter than this (filtered characters, about ten lines) is
# not flagged, whatever its share: a submission with almost nothing beyond the kit would
# otherwise reach 100% on a shared idiom or two.
MIN_OVERLAP = 200
LANGUAGE = "c"  # one lexer for every file, so the same code gives the same fingerprints
# copydetect's tokenizer (Pygments' C lexer) is super-linear on some inputs ("int", 8 KiB of
# blanks, "f(" takes 10 s; 64 KiB of that shape, minutes): a file over TOKENISE_CAP is left out
# with a note, and each submission is fingerprinted in a child process of its own under a
# wall-clock limit and an address-space cap, the whole phase under a limit too. A submission
# that does not finish in time is named in the report and compared with no one.
TOKENISE_CAP = 256 << 10      # bytes of one file fingerprinted
PER_SUBMISSION_S = 30.0       # seconds to fingerprint one submission (a lab 2 one: < 1 s)
PHASE_S = 900.0               # seconds for every submission's fingerprints
MEMORY_MARGIN = 1 << 30       # address space a child may add to what the grader has


@dataclass(frozen=True)
class Pair:
    """Two submissions compared: score_a is the share of a's code found in b, score_b the
    share of b's found in a; tokens_overlap the smaller of the two matched amounts (filtered
    characters). marks_* locate the matched parts: ((file, ((start, end), ...)), ...)."""
    a: str
    b: str
    score_a: float
    score_b: float
    tokens_overlap: int
    flagged: bool
    marks_a: tuple = field(default=(), repr=False, compare=False)
    marks_b: tuple = field(default=(), repr=False, compare=False)

    @property
    def score(self) -> float:
        return max(self.score_a, self.score_b)


class Best(NamedTuple):
    """A submission's highest pair score and who with (None when it was compared with no one)."""
    score: float
    partner: str | None


@dataclass
class Result:
    """Every pair (most similar first), each submission's best match, and what was left out
    or could not be read (notes, one line each, safe to print). sources keeps the text read,
    for the report."""
    pairs: list[Pair]
    threshold: float
    per_submission: dict[str, Best]
    notes: list[str]
    sources: dict[str, list[Source]] = field(default_factory=dict, repr=False)
    boilerplate: str = ""  # what was left out, for the report


# ---- fingerprints and comparison ----------------------------------------------------------

@dataclass
class _Doc:
    """A submission's fingerprinted files and the union of their fingerprints."""
    name: str
    files: list  # [(Source, CodeFingerprint)]
    hashes: set
    coverage: float  # filtered characters covered by fingerprints, the score's denominator


def _fingerprint(text: str, win: int) -> CodeFingerprint:
    return CodeFingerprint("source.c", NOISE_T, win, fp=io.StringIO(text), language=LANGUAGE)


def boilerplate_hashes(sources: list[Source]) -> set:
    """Every k-gram hash of the kit's files (window 1, as copydetect takes boilerplate)."""
    out = set()
    for s in sources:
        out |= _fingerprint(s.text, 1).hashes
    return out


def _strip(fp: CodeFingerprint, boiler: set) -> None:
    """Removes the kit's fingerprints from a file's. Done here rather than with
    CodeFingerprint(boilerplate=...): that one matches with np.intersect1d(assume_unique=True)
    on hashes that repeat, and so also drops every repeat of the student's own code (only the
    last copy of a fingerprint stays), which would change scores beyond the kit's part."""
    gone = fp.hashes & boiler
    if not gone:
        return
    for h in gone:
        del fp.hash_idx[h]
    fp.hashes = fp.hashes - gone
    fp.token_coverage = get_token_coverage(fp.hash_idx, fp.k, len(fp.filtered_code))


def _doc(name: str, sources: list[Source], boiler: set, notes: list) -> _Doc:
    files, hashes, coverage = [], set(), 0.0
    for s in sources:
        size = len(s.text.encode("utf-8", errors="replace"))
        if size > TOKENISE_CAP:
            notes.append(f"{N.visible(name)}: {N.visible(s.path)} left out: {size} bytes, "
                         f"over the {TOKENISE_CAP >> 10} KiB a file may have to be compared")
            continue
        try:
            fp = _fingerprint(s.text, WINDOW)
        except Exception as e:  # a file the lexer chokes on is left out, not the run
            notes.append(f"{N.visible(name)}: {N.visible(s.path)} not tokenised "
                         f"({type(e).__name__})")
            continue
        _strip(fp, boiler)
        files.append((s, fp))
        hashes |= fp.hashes
        coverage += float(fp.token_coverage)
    return _Doc(name, files, hashes, coverage)


@dataclass
class Limits:
    """The fingerprinting's bounds (the module's constants unless a test sets others)."""
    per_submission_s: float = PER_SUBMISSION_S
    phase_s: float = PHASE_S


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _doc_child(conn, name: str, sources: list, boiler: set) -> None:
    """In the child: fingerprints under an address-space cap, sends (doc, notes) back."""
    cap = _address_space() + MEMORY_MARGIN
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    notes: list = []
    try:
        conn.send((_doc(name, sources, boiler, notes), notes))
    except MemoryError:
        conn.send((None, [f"{N.visible(name)}: not fingerprinted: over its memory cap "
                          f"({MEMORY_MARGIN >> 30} GiB)"]))
    finally:
        conn.close()
        os._exit(0)


def _doc_bounded(name: str, sources: list, boiler: set, seconds: float) -> tuple:
    """(_Doc or None, notes): _doc in a child process, stopped after `seconds`."""
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_doc_child, args=(send, name, sources, boiler), daemon=True)
    child.start()
    send.close()
    got = None
    try:
        if recv.poll(max(0.0, seconds)):
            got = recv.recv()
    except (EOFError, OSError):
        got = None
    finally:
        recv.close()
        if child.is_alive():
            child.kill()
        child.join()
    if got is None:
        return None, [f"{N.visible(name)}: not fingerprinted within {seconds:.0f} s (a file "
                      "the tokenizer is slow on?): compared with no one"]
    return got


def _docs(sources: dict, boiler: set, notes: list, limits: Limits) -> list:
    """Every submission's _Doc that could be made within the limits."""
    docs, end = [], time.monotonic() + limits.phase_s
    for name, srcs in sources.items():
        left = end - time.monotonic()
        if left <= 0:
            notes.append(f"{N.visible(name)}: not fingerprinted: the phase's "
                         f"{limits.phase_s:.0f} s were up; compared with no one")
            continue
        doc, why = _doc_bounded(name, srcs, boiler, min(limits.per_submission_s, left))
        notes += why
        if doc is not None:
            docs.append(doc)
    return docs


def _raw_slices(fp: CodeFingerprint, slices: np.ndarray) -> np.ndarray:
    """Slices of the filtered code moved onto the file's own text, as compare_files does."""
    if len(fp.offsets) > 0:
        pos = np.clip(np.searchsorted(fp.offsets[:, 0], slices), 0, fp.offsets.shape[0] - 1)
        slices = slices + fp.offsets[:, 1][pos]
    return np.clip(slices, 0, len(fp.raw_code))


def _side(doc: _Doc, other: set) -> tuple[int, tuple]:
    """How much of doc's fingerprinted code (filtered characters) is in `other`'s
    fingerprints, and where: copydetect's copied slices, per file."""
    total, marks = 0, []
    for src, fp in doc.files:
        common = fp.hashes & other
        if not common:
            continue
        idx = np.concatenate([np.asarray(fp.hash_idx[h]) for h in common])
        slices = get_copied_slices(idx, fp.k)
        total += int(np.sum(slices[1] - slices[0]))
        raw = _raw_slices(fp, slices)
        marks.append((src.path, tuple(zip(raw[0].tolist(), raw[1].tolist()))))
    return total, tuple(marks)


def _pair(a: _Doc, b: _Doc, threshold: float) -> Pair:
    over_a, marks_a = _side(a, b.hashes)
    over_b, marks_b = _side(b, a.hashes)
    score_a = min(1.0, over_a / a.coverage) if a.coverage else 0.0
    score_b = min(1.0, over_b / b.coverage) if b.coverage else 0.0
    overlap = min(over_a, over_b)
    flag = max(score_a, score_b) >= threshold and overlap >= MIN_OVERLAP
    return Pair(a.name, b.name, score_a, score_b, overlap, flag, marks_a, marks_b)


def _best(names: list[str], pairs: list[Pair]) -> dict[str, Best]:
    best = {n: Best(0.0, None) for n in names}
    for p in pairs:
        for me, them in ((p.a, p.b), (p.b, p.a)):
            if best[me].partner is None or p.score > best[me].score:
                best[me] = Best(p.score, them)
    return best


def _read_all(submissions: dict, notes: list) -> dict[str, list[Source]]:
    out = {}
    for name, folder in submissions.items():
        sources, why = read_sources(Path(folder))
        notes += [f"{N.visible(name)}: {w}" for w in why]
        if sources:
            out[name] = sources
        else:
            kinds = " ".join(sorted(EXTENSIONS))
            notes.append(f"{N.visible(name)}: no C/C++ sources ({kinds}) found; not compared")
    return out


def _kit(boilerplate: Path | None, notes: list) -> tuple[set, str]:
    if boilerplate is None:
        return set(), "none given: code from the course kit counts as shared"
    kit, why = read_sources(Path(boilerplate))
    notes += [f"boilerplate: {w}" for w in why]
    if not kit:
        notes.append("boilerplate: no C/C++ sources found; nothing left out")
    files = ", ".join(N.visible(s.path) for s in kit) or "no files"
    return boilerplate_hashes(kit), f"{N.visible(str(boilerplate))} ({files})"


def compare(submissions: dict[str, Path], boilerplate: Path | None = None,
            threshold: float = DEFAULT_THRESHOLD, limits: Limits | None = None) -> Result:
    """Compares every pair of submissions ({shown name: folder}) and returns the pairs most
    similar first. boilerplate: a folder of code every student was given, left out."""
    notes: list[str] = []
    boiler, kit_text = _kit(boilerplate, notes)
    sources = _read_all(submissions, notes)
    docs = _docs(sources, boiler, notes, limits or Limits())
    for d in docs:
        if not d.hashes:
            notes.append(f"{N.visible(d.name)}: no code beyond the boilerplate; scores 0")
    pairs = [_pair(docs[i], docs[j], threshold)
             for i in range(len(docs)) for j in range(i + 1, len(docs))]
    pairs.sort(key=lambda p: (-p.score, -p.tokens_overlap, p.a, p.b))
    return Result(pairs, threshold, _best(list(submissions), pairs), notes, sources, kit_text)


def flagged(result: Result) -> dict[str, str]:
    """{submission: its flagged partners with the pair's score}, for the class index's column;
    submissions with no flagged pair are absent."""
    out: dict[str, list[str]] = {}
    for p in result.pairs:
        if p.flagged:
            out.setdefault(p.a, []).append(f"{p.b} ({p.score:.0%})")
            out.setdefault(p.b, []).append(f"{p.a} ({p.score:.0%})")
    return {n: ", ".join(v) for n, v in out.items()}
