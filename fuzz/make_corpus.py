#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into fuzz/corpus/<target>/.

Seeds: requests as the course kit's client and attacker send them (100-byte
frames, garbage after the NUL), hand-typed ones (short, newline-terminated),
and every bad input the servers must answer with an ERROR reply. Re-run after
changing the list (.venv/bin/python fuzz/make_corpus.py: the frame is the one of
analysis/kitframe.py); the files are committed. Deterministic output.
"""
import hashlib
import os
import random

from analysis.kitframe import frame

HERE = os.path.dirname(os.path.abspath(__file__))


rng = random.Random(420)
garbage = bytes(rng.randrange(256) for _ in range(100))
pool = b"".join(bytes([rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789")]) for _ in range(93))

GOOD = [
    frame(b"0-1-"),
    frame(b"42-1-String[42] has been modified by thread 7", garbage),
    frame(b"42-0-String[42] has been modified by thread 7", garbage),
    frame(b"99-0-" + pool),
    frame(b"0-0-"),                       # write of an empty string
    frame(b"7-0-text-with-dashes-in-it"),
    frame("5-0-caf\u00e9 \u00fcber \u2603 \U0001F600".encode()),
    b"3-1-",                              # printf '3-1-' | nc -N (half-closed)
    b"3-0-typed by hand\n",
    b"3-0-typed on windows\r\n",
    frame(b"007-1-"),                     # leading zeros
    frame(b"9999999-1-"),
]
BAD = [
    frame(b""),                           # empty frame
    frame(b"hello"),                      # no dashes
    frame(b"3-1"),                        # one dash
    frame(b"x-1-"),                       # non-numeric pos
    frame(b"-4-1-"),                      # negative pos
    frame(b"184467440737095516160-1-"),   # overflowing pos
    frame(b"18446744073709551615-1-"),
    frame(b"100-1-"),                     # pos >= n
    frame(b"1-2-"),                       # is_read not 0/1
    frame(b"1--"),
    frame(b"1-01-"),
    frame(b"1-0-\x01\xfe\xff"),           # binary text
    frame(b"1-0-\xc0\xaf"),               # overlong UTF-8
    frame(b"1-0-\xed\xa0\x80"),           # UTF-16 surrogate
    frame(b"1-0-\xf4\x90\x80\x80"),       # > U+10FFFF
    frame(b"1-0-\xe2\x82"),               # truncated sequence
    b"\xff" * 100,                        # binary garbage, no NUL
    b"A" * 100,                           # no NUL in 100 bytes
    b"1-0-" + b"B" * 96,                  # valid prefix, no NUL
    b"",
    b"\n",
]
STREAMS = [  # keep-alive streams for the handler target
    frame(b"3-0-first") + frame(b"3-1-"),
    frame(b"x-1-") + frame(b"3-1-"),
    b"A" * 100 + frame(b"2-0-after garbage") + frame(b"2-1-"),
    frame(b"1-0-ERROR this is stored text") + frame(b"1-1-"),
    frame(b"0-0-a") + frame(b"0-0-b") + b"0-1-",
    bytes(rng.randrange(256) for _ in range(200)),
]

TARGETS = {
    "fuzz_parse_request": GOOD + BAD,
    "fuzz_request_handler": GOOD + BAD + STREAMS,
}

for target, seeds in TARGETS.items():
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for seed in seeds:
        name = "seed-" + hashlib.sha1(seed).hexdigest()[:16]
        with open(os.path.join(d, name), "wb") as f:
            f.write(seed)
