"""The findings collector: from many examples, one finding per distinct bug.

Every search (the campaign's streams, the symbolic oracle's paths) feeds the
findings of each example here. For each ``Finding.key`` it keeps the smallest
example seen (``scenario_size``; of equal shape past ``TEXT_TIES_UP_TO`` slots, the
first) or the one a shrinker settled on, how many examples came before the first
sighting, and whether the difference reached the kernel on *any* example that showed
it. ``findings()`` returns them in report order.

One bug still shows as several findings (an off-by-one loop: the slot it skips differs
in four fields, in the CPU view and the GPU mirror, and against the spec).
``error_groups`` puts error findings that share a cause in one group, which every
report shows as one error with its members listed: findings kept on the same example
at the same first slot (a finding without a slot, such as a copy range or an exception,
joins every finding of its example), findings of the same invariant and field
(whatever the example), and the copy findings of one field (a copy missing or over the
wrong range, and the mirror that therefore differs: ``COPY_CAUSED``), each shrunk to its
own example. Every finding stays (replay files, JSON); the groups are for reading.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Iterable

from stagecheck.spec import ERROR, Finding, StagingScenario
from stagecheck.spec.findings import sort_key

__all__ = ["CAUSE_ORDER", "COPY_CAUSED", "ErrorGroup", "FindingsCollector", "cause_rank",
           "error_groups", "scenario_size"]

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


#: scenarios of more slots than this, equal in shape (capacity, live slots, ids), are
#: not told apart by their text: the first seen stays. Nobody reads such a scenario
#: character by character, and its text costs about 0.4 ms to make at 1,024 slots,
#: on every example that shows a finding already kept
TEXT_TIES_UP_TO = 64


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
        for its keys whatever its size, unless that is a smaller one a shrinker settled
        on (hypothesis's shrunk example, then the scenario shrinker's from it: the
        smaller stays; was: the first, so the fixture's findings kept hypothesis's 8
        requests where the scenario shrinker had found 1). ``extra`` is added to each
        finding's extra (the values of the first sighting win).
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
            if held is not None and not final and (
                    held[0] < _shape(s)
                    or s.capacity > TEXT_TIES_UP_TO and held[0][:3] == _shape(s)[:3]):
                continue      # smaller in shape already (or a shrinker's): keep it
            if size is None:
                size = (-1, *scenario_size(s)) if final else scenario_size(s)
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


#: the invariants whose findings of one field a copy of that field causes together: one
#: group, whatever example each shrank to
COPY_CAUSED = frozenset({"copy_discipline", "mirror_consistency", "same_copies"})
#: Which member of a group heads it: the invariants that say what the code *did* (its
#: copies, its exception, its inputs) before those that show a value it left, the spec's
#: statements before the differences between two runs.
CAUSE_ORDER = ("copy_discipline", "missing_input", "expected_outcome", "no_copy_hazard",
               "inputs_unchanged", "slot_alignment", "tail_policy", "mirror_consistency",
               "same_outcome", "same_copies", "same_inputs_after", "same_buffers",
               "same_fields", "same_message", "kernel_results")


@dataclass
class ErrorGroup:
    """Error findings that share one cause: ``findings[0]`` heads the group (what a
    report shows in full), the others are its members, listed."""

    findings: list[Finding]
    cause: str          # why they are one group, in words

    @property
    def head(self) -> Finding:
        return self.findings[0]

    @property
    def id(self) -> str:
        return self.head.id

    @property
    def members(self) -> list[Finding]:
        """The findings besides the head."""
        return self.findings[1:]

    @property
    def kernel_impact(self) -> bool | None:
        """True if any member reaches the kernel; None if none was judged."""
        known = [f.kernel_impact for f in self.findings if f.kernel_impact is not None]
        return any(known) if known else None


def cause_rank(f: Finding) -> tuple:
    """How early ``f`` stands in its group: ``CAUSE_ORDER``, then its slot, view, field."""
    order = CAUSE_ORDER.index(f.invariant) if f.invariant in CAUSE_ORDER else len(CAUSE_ORDER)
    return (order, f.slot is None, f.slot if f.slot is not None else 0, f.view != "cpu",
            str(f.field))


def error_groups(findings: Iterable[Finding]) -> list[ErrorGroup]:
    """The error findings of ``findings`` in groups of one cause (see the module doc),
    in report order of their heads; info findings are left out."""
    errors = [f for f in findings if f.severity == ERROR]
    parent = list(range(len(errors)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(i: int, j: int) -> None:
        parent[root(i)] = root(j)

    by_field: dict[tuple, int] = {}
    by_rows: dict[tuple, int] = {}
    by_example: dict[str, list[int]] = {}
    for i, f in enumerate(errors):
        if f.scenario is not None:
            example = json.dumps(f.scenario, sort_keys=True, default=repr)
            by_example.setdefault(example, []).append(i)
            slots = f.extra.get("slots")
            if f.slot is not None and slots and len(slots) > 1:
                # each field shrunk to an example of its own, the same rows differing in
                # a batch of the same shape (rows reordered): one cause
                rows = (f.invariant, tuple(slots), f.scenario.get("capacity"),
                        f.scenario.get("num_reqs"))
                if rows in by_rows:
                    join(i, by_rows[rows])
                else:
                    by_rows[rows] = i
        if f.field is not None:
            kinds = [(f.invariant, f.side, f.field)]
            if f.invariant in COPY_CAUSED:
                kinds.append(("copy", f.field))
            for kind in kinds:
                if kind in by_field:
                    join(i, by_field[kind])
                else:
                    by_field[kind] = i
    for example, found in by_example.items():
        # a finding without a slot (a copy range, an exception) is about the whole example
        if any(errors[i].slot is None for i in found):
            for i in found[1:]:
                join(i, found[0])
            continue
        # on one example, findings at the same first differing slot, or whose differing
        # slots overlap (rows reordered: each field first differs at another slot, all of
        # them among the same rows)
        slot_sets = [(i, {errors[i].slot, *(errors[i].extra.get("slots") or ())})
                     for i in found]
        for k, (i, slots) in enumerate(slot_sets):
            for j, others in slot_sets[k + 1:]:
                if slots & others:
                    join(j, i)
    members: dict[int, list[Finding]] = {}
    for i, f in enumerate(errors):
        members.setdefault(root(i), []).append(f)
    groups = []
    for fs in members.values():
        fs = sorted(fs, key=cause_rank)
        head = fs[0]
        same_place = all(f.scenario == head.scenario and f.slot == head.slot for f in fs)
        if len(fs) == 1:
            cause = "one finding"
        elif same_place:
            where = f"slot {head.slot}" if head.slot is not None else "no slot"
            cause = f"the same example, first differing at {where}"
        else:
            cause = ("the same example and slot (or overlapping slots), the same invariant "
                     "and field, or the copy of one field")
        groups.append(ErrorGroup(fs, cause))
    return sorted(groups, key=lambda g: sort_key(g.head))
