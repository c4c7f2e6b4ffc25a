"""What a campaign tells its progress callback (a mixin of ``_Search`` in
``oracles/campaign.py``): the count of each stream, the findings so far, the seconds spent
on calls that hung, and the work under way that is not examples (shrinking a finding,
the kernel impact of the findings), during which no time left is shown."""

from __future__ import annotations

import inspect
from contextlib import contextmanager

__all__ = ["ProgressTelling"]


def _takes(progress, keyword: str) -> bool:
    """Whether a progress callback takes ``keyword`` (the CLI's takes ``findings``,
    ``phase``, ``stalled`` and ``doing``; a plain ``progress(stream, done, total)`` keeps
    working)."""
    if progress is None:
        return False
    try:
        return keyword in inspect.signature(progress).parameters
    except (TypeError, ValueError):
        return False


class ProgressTelling:
    """The campaign gives ``progress``, ``phase``, ``stalled`` and ``collector``."""

    def told(self, progress) -> None:
        """Which keywords ``progress`` takes; nothing told yet."""
        self.progress_findings = _takes(progress, "findings")
        self.progress_stalled = _takes(progress, "stalled")
        self.progress_doing = _takes(progress, "doing")
        #: work other than examples under way ("shrink", "kernel impact"): the line says so
        self.doing = ""
        self.last_tick: tuple | None = None     # (stream, done, total, phase) told last

    @contextmanager
    def doing_now(self, what: str):
        """The progress line says ``what`` is under way (no time left) for the block."""
        before, self.doing = self.doing, what
        try:
            if self.last_tick:
                self.tick(*self.last_tick)
            yield
        finally:
            self.doing = before
            if self.last_tick:
                self.tick(*self.last_tick)

    def tick(self, stream: str, done: int, total: int, phase: str | None = None) -> None:
        """Tell ``progress`` (with the findings so far, where it takes ``findings``)."""
        if self.progress is None:
            return
        phase = phase or self.phase
        self.last_tick = (stream, done, total, phase)
        if self.progress_findings:
            extra = {"stalled": self.stalled} if self.progress_stalled else {}
            if self.progress_doing:
                extra["doing"] = self.doing
            self.progress(stream, done, total, findings=len(self.collector), phase=phase,
                          **extra)
        else:
            self.progress(stream, done, total)
