"""Keeps serving after a pause: the kit's own procedure is a client run, a pause, and another
run, so a server that ends by itself when no client comes for a while (some exit with
status 0 after ten seconds idle) fails it. Each server is started for it at n = 10 and
takes one kit run before the kit workload; it is left idle while the workload and the
checks that time nothing run (the pause costs the grading no time of its own, only what is
left of it), and takes a second run once it has been idle `idle_pause_s` (12 s by
default, longer than the self-exit timeouts seen). An exit is named with its status and
when it came; the result is one more setting of the workload check."""

import threading
import time

from analysis.grade.measure import kitload as K
from analysis.grade.measure.sandboxed import start

POLL_S = 0.25


class Paused:
    """One server through the pause: started, one kit run, then watched while idle."""

    def __init__(self, ctx, bin_dir, name: str):
        self.ctx, self.name = ctx, name
        self.server, self.why = start(ctx, bin_dir, name, 10, f"{name}_pause")
        self.idle_from = self.died_at = None
        self.served, self.line = 0, ""
        if self.why:
            self.line = f"did not start for the pause ({self.why})"
            return
        if self._run("the run before the pause"):
            self.idle_from = time.monotonic()
            self._watch = threading.Thread(target=self._watcher, daemon=True)
            self._watch.start()

    def _run(self, which: str) -> bool:
        done, _ = K.drive(self.server.port, K.kit_plan(10), self.ctx.cfg["request_timeout_s"])
        ok = [q for q in done if q.ok]
        self.served += len(ok)
        if len(ok) == len(done) == K.THREADS * K.PER_THREAD:
            return True
        first = next((q for q in done if not q.ok), None)
        self.line = (f"{which}: {len(ok)} of {K.THREADS * K.PER_THREAD} requests answered"
                     + (f", e.g. {first.describe()}" if first else "")
                     + ("" if self.server.alive() else f" (server {self.server.death()})"))
        return False

    def _watcher(self) -> None:
        while self.died_at is None and self.server.proc is not None:
            if not self.server.alive():
                self.died_at = time.monotonic()
                return
            if self.line or self.server.stopped_by_us:
                return
            time.sleep(POLL_S)

    def finish(self) -> tuple:
        """(True kept serving | False | None not checked, evidence line, requests served)."""
        if self.why:
            self.server.stop()
            return None, f"{self.name}: {self.line}", 0
        if self.idle_from is None:
            self.server.stop()
            return False, f"{self.name}: {self.line}", self.served
        idle = self.ctx.cfg["idle_pause_s"]
        while time.monotonic() < self.idle_from + idle and self.died_at is None:
            time.sleep(POLL_S)
        if self.died_at is not None or not self.server.alive():
            after = (self.died_at or time.monotonic()) - self.idle_from
            out = (False, f"{self.name}: ended by itself {after:.0f} s into an idle pause "
                          f"({self.server.death()}); the kit's procedure (a client run, a "
                          "pause, another run) then finds no server", self.served)
        elif self._run(f"after {idle:g} s idle"):
            out = (True, f"{self.name}: idle {time.monotonic() - self.idle_from:.0f} s "
                         "between two kit runs, both served in full", self.served)
        else:
            out = (False, f"{self.name}: {self.line}", self.served)
        self.server.stop()
        return out


def begin(ctx, bin_dir, present: list) -> list:
    """Every present server started for the pause and through its first run, side by
    side; [] when the grading leaves the pause out (idle_pause_s 0)."""
    if not ctx.cfg.get("idle_pause_s") or "pause" in ctx.cfg.get("skip", ()):
        return []
    ctx.log(f"idle pause: {', '.join(present)}, one kit run, then {ctx.cfg['idle_pause_s']:g} "
            "s idle")
    out: list = [None] * len(present)

    def one(i, name):
        out[i] = Paused(ctx, bin_dir, name)

    threads = [threading.Thread(target=one, args=(i, n)) for i, n in enumerate(present)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def finish(paused: list) -> dict:
    """{server: (ok, line, served)} once each has been idle long enough and run again."""
    res: dict = {}
    threads = [threading.Thread(target=lambda p=p: res.__setitem__(p.name, p.finish()))
               for p in paused]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return res


def begin_pause(ctx, bin_dir, present: list) -> None:
    """The idle pause's measurement (its record in records.py): begun here, left running
    in ctx.paused while the kit workload runs, ended by end_pause."""
    ctx.paused = begin(ctx, bin_dir, present)


def end_pause(ctx) -> None:
    """The idle pause ended (each server idle long enough, then run again): its results in
    ctx.pause, read by the workload check."""
    if ctx.paused is not None:
        ctx.pause, ctx.paused = finish(ctx.paused), None
