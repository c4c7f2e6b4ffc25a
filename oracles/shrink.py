"""The scenario shrinker: from a failing scenario to a smallest one that still fails.

Greedy passes, each proposing smaller variants of the current scenario; the first
variant that still fails (``still_fails``, which the caller evaluates, in batches) is
kept and the passes start again, until no pass makes progress:

1. padding: drop the padded ids, then stale entries of ids that are not live;
2. batch: keep only the first ``k`` live requests, ``k`` by binary search (0, 1, then
   ``num_reqs`` less each power of two), so a bug behind a size threshold shrinks to
   the threshold in a few rounds; then the first 2 .. 16, smallest first, so a
   condition that holds on scattered sizes (``num_reqs % 7 == 3``) shrinks to its
   smallest;
3. requests: remove one live request (its slot, its entries, its buffer slots); in a
   batch of more than ``ONE_BY_ONE`` requests, runs of them (halves, quarters, ...);
4. capacity: down to what the batch needs (one slot at least);
5. contents: every buffer's previous contents to the sentinel fill, then slot by slot;
6. values: every entry of an input to its simplest value at once, then every int
   towards the low end of its range (0, 1, halves), int lists shorter, optional
   entries removed, flags to their default;
7. names: ids renamed req-0, req-1, ... in batch order.

A pass that made progress runs again on its result; when it makes none the next one
runs; the passes cycle until a whole round makes no progress. The budget counts
candidates and slots (a candidate of 1,024 slots costs what 128 of 8 do).

Every variant is a valid scenario of the schema: only the predicate decides whether
it keeps the finding (contract membership included, since a finding's key carries
it).
"""

from __future__ import annotations

from typing import Callable, Iterator

from stagecheck.spec.scenario import StagingScenario, _copy
from stagecheck.spec.schema import FLAG, ID_SET, NUMBER, PER_REQUEST, PER_SLOT, StagingSchema

__all__ = ["shrink"]

#: most variants one pass proposes per round (evaluated as one batch)
BATCH = 16
#: most predicate evaluations a shrink spends
MAX_EVALUATIONS = 2000
#: most slots (the candidates' capacities, summed) a shrink spends: 2,000 candidates of
#: 8 slots, about 200 of 1,024
MAX_SLOTS = 200_000
#: most slots of one batch of candidates (4 of 1,024 slots; 16 small ones)
BATCH_SLOTS = 4096
#: batches up to this many live requests lose one request at a time; larger ones lose
#: runs of requests first
ONE_BY_ONE = 64
#: the largest live count ``_small_batch`` tries (after 0 and 1, which ``_batch`` tries)
SMALL_BATCH = 16
#: inputs of more entries than this are first simplified in runs of entries
SMALL_INPUT = 4


def _clone(s: StagingScenario) -> StagingScenario:
    return StagingScenario(s.capacity, s.num_reqs, list(s.req_ids), _copy(s.inputs),
                           _copy(s.initial_cpu), _copy(s.initial_gpu), s.schema)


def _sharing(s: StagingScenario) -> StagingScenario:
    """A copy of ``s`` that shares every input's value and every buffer's contents with
    it: a pass replaces what it changes (never changes it in place)."""
    return StagingScenario(s.capacity, s.num_reqs, list(s.req_ids), dict(s.inputs),
                           dict(s.initial_cpu), dict(s.initial_gpu), s.schema)


def _with(s: StagingScenario, name: str, value) -> StagingScenario:
    """``s`` with input ``name`` replaced by ``value`` (the rest shared)."""
    t = _sharing(s)
    t.inputs[name] = value
    return t


def _without_slot(schema: StagingSchema, s: StagingScenario, position: int) -> StagingScenario:
    """``s`` without the request at ``position`` of ``req_ids`` (and that slot)."""
    return _without_slots(schema, s, position, position + 1)


def _without_slots(schema: StagingSchema, s: StagingScenario, start: int,
                   stop: int) -> StagingScenario:
    """``s`` without the requests at positions ``[start, stop)`` of ``req_ids`` (and as
    many slots, keeping one at least)."""
    t = _clone(s)
    removed = t.req_ids[start:stop]
    del t.req_ids[start:stop]
    t.num_reqs -= max(0, min(stop, t.num_reqs) - start)
    drop = min(stop - start, t.capacity - 1)
    kept = set(t.req_ids)
    for inp in schema.inputs:
        value = t.inputs.get(inp.name)
        if inp.kind == PER_REQUEST:
            for r in removed:
                if r not in kept:
                    value.pop(r, None)
        elif inp.kind == PER_SLOT and drop:
            del value[start:start + drop]
    if drop:
        t.capacity -= drop
        for table in (t.initial_cpu, t.initial_gpu):
            for values in table.values():
                del values[start:start + drop]
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


def _batch(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    live = min(s.num_reqs, len(s.req_ids))
    for k in _smaller_ints(live, 0):
        yield _first(schema, s, k, live)


def _small_batch(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    """The first 2 .. ``SMALL_BATCH`` live requests, then the first ``d`` for each divisor
    ``d`` of the live count, smallest first: a condition that holds on scattered sizes,
    which the binary search of ``_batch`` steps over, shrinks to its smallest size where
    that is at most ``SMALL_BATCH`` (``num_reqs % 7 == 3``) or a period of the sizes it
    holds on (``num_reqs % 24 == 0`` shrinks to 24 from any multiple of 24)."""
    live = min(s.num_reqs, len(s.req_ids))
    small = range(2, min(SMALL_BATCH + 1, live))
    periods = (d for d in range(SMALL_BATCH + 1, live // 2 + 1) if live % d == 0)
    for k in (*small, *periods):
        yield _first(schema, s, k, live)


def _first(schema: StagingSchema, s: StagingScenario, k: int, live: int) -> StagingScenario:
    """``s`` with only its first ``k`` live requests (of ``live``)."""
    t = _clone(s)
    dropped = t.req_ids[k:]
    del t.req_ids[k:]
    t.num_reqs = k
    # a full batch stays full; a batch with a tail keeps one tail slot
    capacity = max(1, k + (s.capacity > live))
    if capacity >= t.capacity:
        capacity = t.capacity
    t.capacity = capacity
    kept = set(t.req_ids)
    for inp in schema.inputs:
        value = t.inputs.get(inp.name)
        if inp.kind == PER_REQUEST:
            for r in dropped:
                if r not in kept:
                    value.pop(r, None)
        elif inp.kind == PER_SLOT:
            del value[capacity:]
    for table in (t.initial_cpu, t.initial_gpu):
        for values in table.values():
            del values[capacity:]
    return t


def _requests(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    n = min(s.num_reqs, len(s.req_ids))
    if n > ONE_BY_ONE:
        run = n // 2
        while run >= 1:
            # runs of a sixteenth or more from every position; shorter ones from the last
            # and the first (a batch that shows a bug only with its padding ids kept, which
            # ``_batch`` drops, still loses its live requests down to a threshold)
            starts = range(n - run, -1, -run) if run >= max(1, n // 16) else \
                sorted({n - run, 0}, reverse=True)
            for start in starts:
                yield _without_slots(schema, s, start, start + run)
            run //= 2
        return
    for position in range(n - 1, -1, -1):
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
    filled = _sharing(s)
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
                    t = _sharing(s)
                    (t.initial_cpu if view == "cpu" else t.initial_gpu)[buffer] = \
                        values[:i] + [sentinel] + values[i + 1:]
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


def _simplest(inp, v):
    if isinstance(v, list):
        return []
    if isinstance(v, int) and not isinstance(v, bool):
        return max(inp.values.low, min(0, inp.values.high)) if inp.values.low <= 0 \
            else inp.values.low
    return v


def _all_simplest(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    """The entries of one per-request or per-slot input at their simplest (ints to the
    low end, lists empty; optional entries removed), all at once, then in runs (halves,
    quarters, ... sixteenths), for inputs of more than ``SMALL_INPUT`` entries."""
    for inp in schema.inputs:
        data = s.inputs.get(inp.name)
        if inp.kind not in (PER_REQUEST, PER_SLOT) or not data or len(data) <= SMALL_INPUT:
            continue
        keys = list(range(len(data))) if inp.kind == PER_SLOT else list(data)
        n = len(keys)
        runs = [(0, n)]
        run = n // 2
        while run >= max(1, n // 16):
            runs += [(start, start + run) for start in range(0, n - run + 1, run)]
            run //= 2
        for start, stop in runs:
            chosen = keys[start:stop]
            if inp.kind == PER_SLOT:
                simpler = list(data)
                for i in chosen:
                    simpler[i] = _simplest(inp, data[i])
            elif inp.presence == "optional":
                gone = set(chosen)
                simpler = {k: v for k, v in data.items() if k not in gone}
            else:
                simpler = dict(data)
                for k in chosen:
                    simpler[k] = _simplest(inp, data[k])
            if simpler != data:
                yield _with(s, inp.name, simpler)


def _values(schema: StagingSchema, s: StagingScenario) -> Iterator[StagingScenario]:
    yield from _all_simplest(schema, s)
    live = set(s.live_ids)
    for inp in schema.inputs:
        data = s.inputs.get(inp.name)
        name = inp.name
        if inp.kind == PER_REQUEST:
            for r in list(data):
                v = data[r]
                if inp.presence == "optional" or r not in live:
                    yield _with(s, name, {k: x for k, x in data.items() if k != r})
                if isinstance(v, list):
                    for k in range(len(v) - 1, -1, -1):
                        yield _with(s, name, {**data, r: v[:k] + v[k + 1:]})
                    for k, item in enumerate(v):
                        if item != 0:
                            yield _with(s, name, {**data, r: v[:k] + [0] + v[k + 1:]})
                elif isinstance(v, int) and not isinstance(v, bool):
                    for c in _smaller_ints(v, inp.values.low):
                        yield _with(s, name, {**data, r: c})
        elif inp.kind == PER_SLOT:
            for i, v in enumerate(data):
                if isinstance(v, int) and not isinstance(v, bool):
                    for c in _smaller_ints(v, inp.values.low):
                        yield _with(s, name, data[:i] + [c] + data[i + 1:])
        elif inp.kind == ID_SET:
            for k in range(len(data)):
                yield _with(s, name, data[:k] + data[k + 1:])
        elif inp.kind == FLAG and data != inp.default:
            yield _with(s, name, inp.default)
        elif inp.kind == NUMBER and isinstance(data, int):
            for c in _smaller_ints(data, inp.values.low):
                yield _with(s, name, c)


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


PASSES = (_padding, _batch, _small_batch, _requests, _capacity, _contents, _values, _names)
#: the passes that make a scenario smaller (not simpler): what an example on which a call
#: hangs is shrunk by, each try that still hangs costing a deadline (not the small sizes'
#: sweep: up to fifteen more tries, one at a time); the batch first, smallest first, so a
#: call that fails on every input settles on the empty batch in one try
SIZE_PASSES = (_batch, _padding, _requests, _capacity)


def _next_batch(candidates: Iterator[StagingScenario], batch_size: int
                ) -> list[StagingScenario]:
    """Up to ``batch_size`` candidates, fewer where they are large (at most
    ``BATCH_SLOTS`` slots in all, one candidate at least): the first that still fails
    ends the batch, so large ones go a few at a time."""
    batch: list[StagingScenario] = []
    slots = 0
    for c in candidates:
        batch.append(c)
        slots += c.capacity
        if len(batch) >= batch_size or slots >= BATCH_SLOTS:
            break
    return batch


def shrink(schema: StagingSchema, s: StagingScenario,
           still_fails: Callable[[list[StagingScenario]], int | None],
           max_evaluations: int = MAX_EVALUATIONS,
           stop: Callable[[], object] | None = None,
           batch_size: int = BATCH, max_slots: int = MAX_SLOTS,
           passes: tuple = PASSES) -> tuple[StagingScenario, int]:
    """The smallest scenario the passes reach from ``s`` that still fails.

    ``still_fails(candidates)`` returns the position of the first candidate that still
    fails, or None. ``stop()`` is asked before each batch: when true (a signal asked the
    run to stop) the shrinking ends with the smallest failing scenario found so far.
    At most ``max_evaluations`` candidates and ``max_slots`` slots (their capacities)
    are tried; ``passes``: which of ``PASSES`` run. Returns the scenario and how many
    candidates were evaluated.
    """
    current, spent, slots = s, 0, 0
    progress = True

    def within() -> bool:
        return spent < max_evaluations and slots < max_slots

    while progress and within():
        progress = False
        for make in passes:
            # a pass that made progress runs again on its result
            while within():
                candidates = make(schema, current)
                found = False
                while within():
                    if stop is not None and stop():
                        return current, spent
                    batch = _next_batch(candidates, batch_size)
                    if not batch:
                        break
                    spent += len(batch)
                    slots += sum(c.capacity for c in batch)
                    hit = still_fails(batch)
                    if hit is not None:
                        current, progress, found = batch[hit], True, True
                        break
                if not found:
                    break
    return current, spent
