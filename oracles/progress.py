"""Progress of long work, on stderr, in the form that fits where it runs.

On a terminal: one live line, redrawn in place (a bar, done/total, rate, findings so
far, elapsed, remaining). Elsewhere (CI logs, a pipe, a file): one plain line every
``STAGECHECK_PROGRESS_INTERVAL`` seconds (default 5), the first after twice that, e.g.

    stagecheck diff: 1200/5200 examples, 2 findings, 850 examples/s, 10.0 s elapsed, ~4.7 s left

so a run shorter than 10 s prints nothing when not on a terminal (as tqdm's ``delay``),
and a run's own lines (an interrupt's, a load error's) are not buried. A ticker thread
keeps the line coming while nothing advances (a hanging target, a symbolic exploration
in a worker), so a silent log means a stopped process. Once ``stopped()`` is true (a
SIGINT/SIGTERM was received) nothing more is written: the run's one line about the
interrupt is the last word. ``--quiet`` makes none of this.

The count, the rate and the time left cover the whole run, whatever phase it is in (a
phase only labels the line): a run made of consecutive parts (a campaign's streams,
then its edge cases) counts them as one with ``PartsCount``; a part that ran short (a
stream that stopped at its first error) or never ran leaves the total.

Standard library only: the CLI builds a ``Progress`` before any heavy import.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, TextIO

__all__ = ["DEFAULT_INTERVAL", "INTERVAL_ENV", "PartsCount", "Progress", "counted",
           "format_duration", "interval"]

INTERVAL_ENV = "STAGECHECK_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 5.0
#: how often the terminal line is redrawn at most, in seconds
TTY_REFRESH = 0.2
#: seconds without progress after which no time left is estimated: the run waits on
#: something the rate so far says nothing about (a call's deadline, a shrinker's tries)
STILL_SECONDS = 10.0
BAR_WIDTH = 20


def interval(environ=None) -> float:
    """Seconds between two plain lines: ``STAGECHECK_PROGRESS_INTERVAL`` when it is a
    positive number, else 5."""
    value = (os.environ if environ is None else environ).get(INTERVAL_ENV)
    try:
        number = float(value) if value is not None else DEFAULT_INTERVAL
    except ValueError:
        return DEFAULT_INTERVAL
    return number if number > 0 else DEFAULT_INTERVAL


def counted(value: int, noun: str) -> str:
    """``value noun``, the noun singular for one (``1 finding``, ``2 findings``); a word
    that is no plural noun (``killed``) stays as it is."""
    if value == 1 and noun.endswith("s") and not noun.endswith("ss"):
        noun = noun[:-1]
    return f"{value} {noun}"


def format_duration(seconds: float) -> str:
    """``4.7 s``, ``2 min 05 s``, ``1 h 02 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


class Progress:
    """The progress of one command: ``update`` it from the loop, ``close`` it at the end.

    ``unit`` names what is counted (``examples``, ``mutants``, ``paths``); ``counters``
    the tallies shown after done/total (``findings``, ``killed``...), in that order.
    Thread-safe: the ticker and the loop may render at the same time.
    """

    def __init__(self, label: str, unit: str, total: int | None = None, *,
                 counters: tuple[str, ...] = (), stream: TextIO | None = None,
                 tty: bool | None = None, every: float | None = None,
                 delay: float | None = None, clock: Callable[[], float] = time.monotonic,
                 stopped: Callable[[], object] = lambda: False) -> None:
        self.label, self.unit, self.total = label, unit, total
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            try:
                tty = self.stream.isatty()
            except (AttributeError, ValueError):
                tty = False
        self.tty = tty
        self.every = TTY_REFRESH if tty else (every if every is not None else interval())
        self.clock, self.stopped = clock, stopped
        self.started = clock()
        self.ends_at: float | None = None   # a time budget's end (clock), when no total
        # the first line is due after ``delay`` (default: one refresh on a terminal, two
        # intervals elsewhere), each later one ``every`` seconds after the last
        first = delay if delay is not None else (self.every if tty else 2 * self.every)
        self.last_shown = self.started + first - self.every
        self.done = 0
        self.moved = self.started     # when ``done`` last changed
        self.stalled = 0.0            # seconds the caller says are not the run's pace
        self.phase = ""
        self.estimate = True          # show the time left (``update``)
        self.counts = {name: 0 for name in counters}
        self.lines = 0            # plain lines written (non-terminal)
        self.drawn = False        # a terminal line is on screen
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # ------------------------------------------------------------------ updates
    def update(self, done: int | None = None, total: int | None = None, *,
               phase: str | None = None, ends_at: float | None = None,
               stalled: float | None = None, estimate: bool | None = None,
               **counts: int) -> None:
        """Record where the work is (``done`` of ``total`` over the whole run; ``phase``
        labels the line; ``ends_at``: when a time-bounded part ends, on ``clock``, for the
        time left where no total is known; ``stalled``: seconds so far that say nothing
        of the pace of the rest, such as waits for calls that hung, left out of the
        rate; ``estimate``: False while the work is of another kind than the count's,
        such as shrinking a finding, whose time the rate says nothing of: no time left is
        shown then); draw the line when it is due."""
        with self._lock:
            if done is not None:
                if done != self.done:
                    self.moved = self.clock()
                self.done = done
            if stalled is not None:
                self.stalled = stalled
            if total is not None:
                self.total = total
            if phase is not None:
                self.phase = phase
            if estimate is not None:
                self.estimate = estimate
            if ends_at is not None:
                self.ends_at = ends_at
            for name, value in counts.items():
                self.counts[name] = value
            self._show_if_due()

    def print_above(self, text: str) -> None:
        """Write ``text`` as a line of its own (the live line, if drawn, is erased first
        and comes back with the next update)."""
        with self._lock:
            if self.tty and self.drawn:
                self._write("\r\x1b[K")
                self.drawn = False
            self._write(text + "\n")

    def start(self) -> "Progress":
        """Start the ticker: the line keeps coming while nothing advances."""
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="stagecheck-progress",
                                            daemon=True)
            self._ticker.start()
        return self

    def close(self) -> None:
        """Stop the ticker; on a terminal erase the line (the report follows); elsewhere
        end with one last line if any line was written (a log that showed progress shows
        where it ended)."""
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=1.0)
        with self._lock:
            if self.tty and self.drawn:
                self._write("\r\x1b[K")
                self.drawn = False
            elif not self.tty and self.lines and not self.stopped():
                self._write(self.plain_line(final=True) + "\n")

    def __enter__(self) -> "Progress":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ rendering
    def fields(self, now: float | None = None, final: bool = False) -> list[str]:
        """done/total unit, the counters, the rate, elapsed and remaining (not on the
        ``final`` line: a run may end before its total, as a search that stops at its first
        error does): each over the whole run since ``Progress`` started (the phase only
        labels the count)."""
        now = self.clock() if now is None else now
        elapsed = max(now - self.started, 0.0)
        count = f"{self.done}/{self.total} {self.unit}" if self.total \
            else counted(self.done, self.unit)
        out = [f"{self.phase + ' ' if self.phase else ''}{count}"]
        out += [counted(value, name) for name, value in self.counts.items()]
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.done and elapsed > 0:
            out.append(f"{rate:.3g} {self.unit}/s" if rate < 10 else
                       f"{rate:.0f} {self.unit}/s")
        out.append(f"{format_duration(elapsed)} elapsed")
        # the pace of the rest: the time the done part took, less what the caller said
        # stalled (calls that hung), up to the last progress; none while nothing moves
        pace = max(self.moved - self.started - self.stalled, 0.0)
        if not self.estimate or final:
            pass
        elif (self.total and self.done and self.done < self.total and pace > 0
                and now - self.moved <= STILL_SECONDS):
            out.append(f"~{format_duration((self.total - self.done) * pace / self.done)} left")
        elif not self.total and self.ends_at is not None and now < self.ends_at:
            out.append(f"~{format_duration(self.ends_at - now)} left")
        return out

    def plain_line(self, final: bool = False) -> str:
        text = ", ".join(self.fields(final=final))
        return f"stagecheck {self.label}: {'finished: ' if final else ''}{text}"

    def bar_line(self) -> str:
        if self.total:
            filled = min(BAR_WIDTH, int(BAR_WIDTH * self.done / self.total))
            bar = "[" + "#" * filled + "-" * (BAR_WIDTH - filled) + "] "
        else:
            bar = ""
        return f"{self.label} {bar}" + " · ".join(self.fields())

    def _show_if_due(self) -> None:
        now = self.clock()
        if now - self.last_shown < self.every or self.stopped():
            return
        self.last_shown = now
        if self.tty:
            self._write("\r\x1b[K" + self.bar_line())
            self.drawn = True
        else:
            self._write(self.plain_line() + "\n")
            self.lines += 1

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):   # stderr gone: progress is never worth an error
            pass

    def _tick(self) -> None:
        while not self._stop.wait(min(self.every, 1.0)):
            with self._lock:
                self._show_if_due()


class PartsCount:
    """One count over a run made of consecutive parts, for ``Progress``.

    ``planned``: each part's name and planned size, in the order the run does them.
    ``at(part, done)`` says the run is in ``part`` with ``done`` of it finished, and
    returns ``(done, total)`` of the whole run: the parts before it count what they did
    (a part the run went past without a word did nothing), ``part`` its ``done``, the
    parts after it their planned size. ``finish()`` closes the count: the total becomes
    what was done (a part that ran short or never ran leaves it).
    """

    def __init__(self, planned) -> None:
        self.order = [name for name, _ in planned]
        self.planned = {name: size for name, size in planned}
        self.done: dict[str, int] = {}
        self.current: str | None = None

    def at(self, part: str, done: int, size: int | None = None) -> tuple[int, int]:
        if part not in self.planned:            # a part nobody planned: counted at its end
            self.order.append(part)
            self.planned[part] = size or done
        elif size is not None:
            self.planned[part] = size
        position = self.order.index(part)
        for earlier in self.order[:position]:
            self.done.setdefault(earlier, 0)
        self.done[part] = done
        self.current = part
        return self.totals()

    def totals(self) -> tuple[int, int]:
        """``(done, total)`` of the whole run now."""
        if self.current is None:
            return 0, sum(self.planned.values())
        position = self.order.index(self.current)
        before = sum(self.done.get(p, 0) for p in self.order[:position])
        now = self.done[self.current]
        later = sum(self.planned[p] for p in self.order[position + 1:])
        return before + now, before + max(self.planned[self.current], now) + later

    def finish(self) -> tuple[int, int]:
        """``(done, done)``: the run is over, whatever was planned."""
        done = sum(self.done.values())
        return done, done
