"""The scenario shrinker: from a failing scenario to a smallest one that still fails.

Greedy passes, each proposing smaller variants of the current scenario; the first
variant that still fails (``still_fails``, which the caller evaluates, in batches) is
kept and the passes start again, until no pass makes progress:

1. padding: drop the padded ids, then stale entries of ids that are not live;
2. requests: remove one live request (its slot, its entries, its buffer slots);
3. capacity: down to what the batch needs (one slot at least);
4. contents: every buffer's previous contents to the sentinel fill, then slot by slot;
5. values: every int towards the low end of its range (0, 1, halves), int lists
   shorter, optional entries removed, flags to their default;
6. names: ids renamed req-0, req-1, ... in batch order.

Every variant is a valid scenario of the schema: only the predicate decides whether
it keeps the finding (contract membership included, since a finding's key carries
it).
"""

from __future__ import annotations

import copy
from typing import Callable, Iterator

from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import FLAG, ID_SET, NUMBER, PER_REQUEST, PER_SLOT, StagingSchema

__all__ = ["shrink"]

#: most variants one pass proposes per round (evaluated as one batch)
BATCH = 16
#: most predicate evaluations a shrink spends
MAX_EVALUATIONS = 2000


def _clone(s: StagingScenario) -> StagingScenario:
    return copy.deepcopy(s)


def _without_slot(schema: StagingSchema, s: StagingScenario, position: int) -> StagingScenario:
    """``s`` without the request at ``position`` of ``req_ids`` (and that slot)."""
    t = _clone(s)
    r = t.req_ids.pop(position)
    if position < t.num_reqs:
        t.num_reqs -= 1
    for inp in schema.inputs:
        value = t.inputs.get(inp.name)
        if inp.kind == PER_REQUEST and r not in t.req_ids:
            value.pop(r, None)
        elif inp.kind == PER_SLOT and position < len(value) and t.capacity > 1:
            value.pop(position)
    if t.capacity > 1:
        t.capacity -= 1
        for table in (t.initial_cpu, t.initial_gpu):
            for values in table.values():
                if position < len(values):
                    values.pop(position)
    return t


def _padding(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    if len(s.req_ids) > s.num_reqs >= 0:
        t = _clone(s)
        dropped = t.req_ids[t.num_reqs:]
        del t.req_ids[t.num_reqs:]
        for inp in schema.inputs:
            if inp.kind == PER_REQUEST:
                for r in dropped:
                    if r not in t.req_ids:
                        t.inputs[inp.name].pop(r, None)
        yield t
        for position in range(len(s.req_ids) - 1, s.num_reqs - 1, -1):
            yield _without_slot(schema, s, position)
    known = set(s.req_ids)
    for inp in schema.inputs:
        if inp.kind == PER_REQUEST and set(s.inputs.get(inp.name, {})) - known:
            t = _clone(s)
            t.inputs[inp.name] = {k: v for k, v in t.inputs[inp.name].items() if k in known}
            yield t
        if inp.kind == PER_REQUEST:
            for r in s.req_ids[max(s.num_reqs, 0):]:
                if r in s.inputs.get(inp.name, {}):
                    t = _clone(s)
                    del t.inputs[inp.name][r]
                    yield t


def _requests(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    for position in range(min(s.num_reqs, len(s.req_ids)) - 1, -1, -1):
        yield _without_slot(schema, s, position)


def _capacity(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    need = max(len(s.req_ids), s.num_reqs, 1)
    for capacity in sorted({need, s.capacity - 1}):
        if 1 <= capacity < s.capacity and capacity >= len(s.req_ids):
            t = _clone(s)
            t.capacity = capacity
            for table in (t.initial_cpu, t.initial_gpu):
                for buffer in table:
                    del table[buffer][capacity:]
            for inp in schema.inputs:
                if inp.kind == PER_SLOT:
                    del t.inputs[inp.name][capacity:]
            yield t


def _sentinel(dtype: str, view: str):
    if dtype == "bool":
        return view == "cpu"
    return -1 if view == "cpu" else -2


def _contents(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    dtypes = {f.buffer: f.dtype for f in schema.fields}
    filled = _clone(s)
    for view, table in (("cpu", filled.initial_cpu), ("gpu", filled.initial_gpu)):
        for buffer in list(table):
            table[buffer] = [_sentinel(dtypes.get(buffer, "int32"), view)] * s.capacity
    if (filled.initial_cpu, filled.initial_gpu) != (s.initial_cpu, s.initial_gpu):
        yield filled
    for view in ("cpu", "gpu"):
        table = s.initial_cpu if view == "cpu" else s.initial_gpu
        for buffer, values in table.items():
            sentinel = _sentinel(dtypes.get(buffer, "int32"), view)
            for i, v in enumerate(values):
                if v != sentinel:
                    t = _clone(s)
                    (t.initial_cpu if view == "cpu" else t.initial_gpu)[buffer][i] = sentinel
                    yield t


def _smaller_ints(value: int, low: int) -> list[int]:
    """Candidates towards ``low``, smallest first: 0 (where in range), ``low``, 1, then
    ``value`` less each power of two below the distance, so that taking the first that
    still fails is a binary search for the smallest failing value."""
    if value == low:
        return []
    out: list[int] = []
    for c in (max(low, 0), low, 1):
        if low <= c < value and c not in out:
            out.append(c)
    step = 1 << max((value - low).bit_length() - 1, 0)
    while step:
        c = value - step
        if low <= c < value and c not in out:
            out.append(c)
        step >>= 1
    if value < 0:
        for c in (0, value // 2, value + 1):
            if c > value and c not in out:
                out.append(c)
    return out


def _values(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    for inp in schema.inputs:
        data = s.inputs.get(inp.name)
        if inp.kind == PER_REQUEST:
            for r in list(data):
                v = data[r]
                if inp.presence != "required" or r not in s.live_ids:
                    t = _clone(s)
                    del t.inputs[inp.name][r]
                    if inp.presence == "optional" or r not in s.live_ids:
                        yield t
                if isinstance(v, list):
                    for k in range(len(v) - 1, -1, -1):
                        t = _clone(s)
                        t.inputs[inp.name][r] = v[:k] + v[k + 1:]
                        yield t
                    for k, item in enumerate(v):
                        if item != 0:
                            t = _clone(s)
                            t.inputs[inp.name][r][k] = 0
                            yield t
                elif isinstance(v, int) and not isinstance(v, bool):
                    for c in _smaller_ints(v, inp.values.low):
                        t = _clone(s)
                        t.inputs[inp.name][r] = c
                        yield t
        elif inp.kind == PER_SLOT:
            for i, v in enumerate(data):
                if isinstance(v, int) and not isinstance(v, bool):
                    for c in _smaller_ints(v, inp.values.low):
                        t = _clone(s)
                        t.inputs[inp.name][i] = c
                        yield t
        elif inp.kind == ID_SET:
            for k in range(len(data)):
                t = _clone(s)
                del t.inputs[inp.name][k]
                yield t
        elif inp.kind == FLAG and data != inp.default:
            t = _clone(s)
            t.inputs[inp.name] = inp.default
            yield t
        elif inp.kind == NUMBER and isinstance(data, int):
            for c in _smaller_ints(data, inp.values.low):
                t = _clone(s)
                t.inputs[inp.name] = c
                yield t


def _names(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    wanted = [f"req-{k}" for k in range(len(s.req_ids))]
    if s.req_ids == wanted or len(set(s.req_ids)) != len(s.req_ids):
        return
    rename = dict(zip(s.req_ids, wanted))
    if set(rename.values()) & (set().union(*(set(s.inputs[i.name]) for i in schema.inputs
                                             if i.kind == PER_REQUEST)) - set(rename)):
        return
    t = _clone(s)
    t.req_ids = wanted
    for inp in schema.inputs:
        if inp.kind == PER_REQUEST:
            t.inputs[inp.name] = {rename.get(k, k): v for k, v in t.inputs[inp.name].items()}
        elif inp.kind == ID_SET:
            t.inputs[inp.name] = [rename.get(k, k) for k in t.inputs[inp.name]]
    yield t


PASSES = (_padding, _requests, _capacity, _contents, _values, _names)


def shrink(schema: StagingSchema, s: StagingScenario,
           still_fails: Callable[[list[StagingScenario]], int | None],
           max_evaluations: int = MAX_EVALUATIONS,
           stop: Callable[[], object] | None = None,
           batch_size: int = BATCH) -> tuple[StagingScenario, int]:
    """The smallest scenario the passes reach from ``s`` that still fails.

    ``still_fails(candidates)`` returns the position of the first candidate that still
    fails, or None. ``stop()`` is asked before each batch: when true (a signal asked the
    run to stop) the shrinking ends with the smallest failing scenario found so far.
    Returns the scenario and how many candidates were evaluated.
    """
    current, spent = s, 0
    progress = True
    while progress and spent < max_evaluations:
        progress = False
        for make in PASSES:
            candidates = make(schema, current)
            while spent < max_evaluations:
                if stop is not None and stop():
                    return current, spent
                batch = [c for _, c in zip(range(batch_size), candidates)]
                if not batch:
                    break
                spent += len(batch)
                hit = still_fails(batch)
                if hit is not None:
                    current, progress = batch[hit], True
                    break
            if progress:
                break
    return current, spent
