"""A one-line progress display with ETA on stderr.

Work is measured in estimated seconds (each task brings its own estimate), so the ETA is
sensible from the first task on and corrects itself as real durations come in.
"""

import sys
import time


def hms(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class Progress:
    def __init__(self, total_estimate: float, total_tasks: int, stream=None, enabled=True):
        self.total = max(total_estimate, 1e-9)
        self.tasks = total_tasks
        self.done_est = 0.0
        self.done_tasks = 0
        self.start = time.monotonic()
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_print = 0.0

    def eta(self) -> float:
        elapsed = time.monotonic() - self.start
        if self.done_est <= 0:
            return self.total - self.done_est
        return elapsed / self.done_est * (self.total - self.done_est)

    def line(self, what: str) -> str:
        frac = min(1.0, self.done_est / self.total)
        width = 24
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        return (f"[{bar}] {frac:4.0%} {self.done_tasks}/{self.tasks} "
                f"elapsed {hms(time.monotonic() - self.start)} ETA {hms(self.eta())}  {what}")

    def advance(self, estimate: float, what: str) -> None:
        self.done_est += estimate
        self.done_tasks += 1
        if not self.enabled:
            return
        now = time.monotonic()
        last = self.done_tasks == self.tasks
        if self.tty:
            self.stream.write("\r\033[K" + self.line(what) + ("\n" if last else ""))
            self.stream.flush()
        elif last or now - self._last_print >= 10.0 or self.done_tasks == 1:
            self.stream.write(self.line(what) + "\n")
            self.stream.flush()
            self._last_print = now

    def note(self, text: str) -> None:
        """A message on its own line, without breaking the progress line."""
        if self.tty and self.enabled:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.stream.flush()
