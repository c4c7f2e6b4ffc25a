"""The findings collector: from many examples, one finding per distinct bug.

Every search (the campaign's streams, the symbolic oracle's paths) feeds the
findings of each example here. For each ``Finding.key`` it keeps the smallest
example seen (or the one a shrinker settled on), how many examples came before the
first sighting, and whether the difference reached the kernel on *any* example
that showed it. ``findings()`` returns them in report order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Any, Iterable

from stagecheck.spec import ERROR, Finding, StagingScenario
from stagecheck.spec.findings import sort_key

__all__ = ["FindingsCollector", "scenario_size"]

#: scenarios kept per error finding (the latest that showed it) for the kernel-impact
#: check: the smallest example of a difference often does not reach the kernel
WITNESSES = 8


def scenario_size(s: StagingScenario) -> tuple:
    """How big a scenario is to a reader: capacity, live slots, ids, then its text."""
    return (s.capacity, s.num_reqs, len(s.req_ids),
            len(repr(s.inputs)) + len(repr(s.initial_cpu)) + len(repr(s.initial_gpu)))


def _shape(s: StagingScenario) -> tuple:
    """Below every ``scenario_size`` of ``s`` (cheap): a kept scenario smaller than this
    is smaller in shape, and never replaced by ``s``."""
    return (s.capacity, s.num_reqs, len(s.req_ids), -1)


class FindingsCollector:
    def __init__(self) -> None:
        self._kept: dict[tuple, tuple[tuple, Finding]] = {}
        self._first_seen: dict[tuple, int] = {}
        self._first_extra: dict[tuple, dict] = {}
        self._impact: dict[tuple, bool] = {}
        self._witnesses: dict[tuple, deque] = {}

    def add(self, findings: Iterable[Finding], s: StagingScenario, example: int,
            extra: dict[str, Any] | None = None, final: bool = False) -> None:
        """Record the findings of the ``example``-th example (counting from 1) on ``s``.

        ``final`` marks the example a shrinker settled on: it replaces what is kept
        for its keys whatever its size. ``extra`` is added to each finding's extra
        (the values of the first sighting win).
        """
        findings = list(findings)
        if not findings:
            return
        size = None       # computed once, when a kept finding asks
        data = None
        for f in findings:
            self.note_impact([f])
            first = self._first_seen.setdefault(f.key, example)
            first_extra = self._first_extra.setdefault(f.key, dict(extra or {}))
            if f.severity == ERROR and not final and not self._impact.get(f.key):
                self._witnesses.setdefault(f.key, deque(maxlen=WITNESSES)).append(s)
            held = self._kept.get(f.key)
            if held is not None and not final and held[0] < _shape(s):
                continue      # smaller in shape already (or a shrinker's): keep it
            if size is None:
                size = (-1,) if final else scenario_size(s)
            if held is None or size < held[0]:
                data = data if data is not None else s.to_dict()
                self._kept[f.key] = (size, replace(
                    f, scenario=data, examples_to_find=first,
                    extra={**f.extra, **first_extra}))

    def note_impact(self, findings: Iterable[Finding]) -> None:
        """A difference reaches the kernel if it did on any example that showed it."""
        for f in findings:
            if f.kernel_impact is not None:
                self._impact[f.key] = self._impact.get(f.key, False) or f.kernel_impact

    def open_impact(self) -> set[tuple]:
        """Keys of error findings not yet seen to reach the kernel."""
        return {k for k, (_, f) in self._kept.items()
                if f.severity == ERROR and not self._impact.get(k)}

    def witnesses(self, key: tuple) -> list[StagingScenario]:
        """The latest scenarios (up to ``WITNESSES``) on which the error ``key`` showed."""
        return list(self._witnesses.get(key, ()))

    def __contains__(self, key: tuple) -> bool:
        return key in self._kept

    def __len__(self) -> int:
        return len(self._kept)

    def findings(self) -> list[Finding]:
        out = []
        for key, (_, f) in self._kept.items():
            if key in self._impact:
                f = replace(f, kernel_impact=self._impact[key])
            out.append(f)
        return sorted(out, key=sort_key)
