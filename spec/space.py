"""The scenario space a schema induces: its contract, and how scenarios are drawn.

One drawing procedure serves every engine. It asks a ``Draw`` for each decision, and
each engine answers in its own way: hypothesis draws (shrinkable; the pytest plugin
and the edge-case stream), a seeded random source (the fast batched engine), or
CrossHair symbolic values (the symbolic oracle). So the in-contract and
out-of-contract streams mean the same thing everywhere, for every schema.

In contract (``contract_breaches`` empty; stated in ``schema.py``, beside the
declarations it reads, and named here too): ``0 <= num_reqs <= capacity``,
``num_reqs <= len(req_ids) <= capacity`` (equal, for a schema whose ``num_reqs`` is
the length of ``req_ids``), live request ids unique, every live request present in
each required per-request input, every int input of a live request (and of every
slot) within its declared range, and whatever the schema's ``breaches`` adds. A live
request without a ``may-miss`` input is in contract: the field's missing-input
policy says what must happen.

Sizes (capacity, live requests, padded ids, list lengths) come from one distribution,
the same for every schema (the schema declares the bounds: ``max_capacity``, each
list's ``length``): most scenarios are small (capacity at most ``SMALL``: they find
most bugs and shrink fast), a share lands on and around the sizes a fast path may
switch on (``size_thresholds``: powers of two and their neighbours, CUDA-graph capture
sizes, round fifties, the largest capacity), a share is any size between the small band
and the largest capacity (a threshold no list names: 300 < n < 1000, n == 640), and a few
are full batches of the largest capacity (``draw_batch``; docs/schemas.md shows the
measured shares).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Protocol, Sequence

from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import (FLAG, ID_SET, INT32_MAX, INT32_MIN, MAY_MISS, NUMBER,
                                    PER_REQUEST, PER_SLOT, REQUIRED, Field, Input, StagingSchema,
                                    Values, contract_breaches)

__all__ = ["BANDS", "BREACH_ABOVE_CAPACITY", "Draw", "SMALL", "breach_kinds", "contract_breaches",
           "draft_bound", "draw_batch", "draw_breach", "draw_length", "draw_lengths",
           "draw_scenario", "live_counts", "malformed", "repaired", "size_thresholds"]

BREACH_ABOVE_CAPACITY = "num_reqs above capacity"
#: ids are "req-<k>" with k below this many per slot of the largest capacity
ID_POOL_PER_SLOT = 4
#: the small band: capacities up to this many slots (and lists up to ``SMALL_LIST``
#: items), where most bugs show and every example shrinks fast
SMALL = 8
SMALL_LIST = 4
#: the shares (in twentieths) of the size bands: up to SMALL live requests (70%), on a
#: threshold above SMALL (20%), any size above SMALL (5%), a full batch of the largest
#: capacity (5%)
BANDS = (("small", 14), ("threshold", 4), ("any", 1), ("full", 1))
#: vLLM captures CUDA graphs for 1, 2, 4, multiples of 8 below 256 and of 16 from 256
#: on; stagecheck takes every multiple of 8 up to this size (a superset) and of 16 above
CAPTURE_MAX = 512
#: live counts in the "any" band's table slots (a second decision picks the count)
_ANY = -1
_RANGES = {"int32": (INT32_MIN, INT32_MAX), "int64": (-(2**63), 2**63 - 1)}

#: what each value of a per-request or per-slot input of a dtype must be (``malformed``)
_ELEMENT_KINDS = {"int": lambda v: type(v) is int, "bool": lambda v: type(v) is bool,
                  "int-list": lambda v: type(v) is list and all(type(x) is int for x in v)}
_ELEMENT_SAID = {"int": "a whole number", "int-list": "a list of whole numbers",
                 "bool": "true or false"}


class Draw(Protocol):
    """The decisions a scenario is made of. Sizes, chances and picks shape the scenario
    (they stay concrete under CrossHair, and shrink towards the first option); values
    are data (symbolic under CrossHair)."""

    def size(self, low: int, high: int) -> int:
        """A whole number in ``[low, high]`` that shapes the scenario (shrinks to ``low``)."""

    def chance(self, numerator: int, denominator: int) -> bool:
        """True about ``numerator`` times in ``denominator`` (shrinks to False)."""

    def pick(self, options: Sequence) -> Any:
        """One of ``options`` (shrinks to the first)."""

    def value(self, values: Values) -> int:
        """An int as ``values`` describes it: mostly small, any in range, the specials."""

    def integer(self, low: int, high: int) -> int:
        """Any int in ``[low, high]`` (a value, not a shape)."""

    def contents(self, fields: Sequence[Field], capacity: int) -> tuple[dict, dict]:
        """Initial CPU and GPU contents of every field's buffer, ``capacity`` slots each."""


# --------------------------------------------------------------------------- drawing

def size_thresholds(low: int, high: int) -> tuple[int, ...]:
    """The sizes in ``[low, high]`` a fast path may switch on, smallest first: powers of
    two and their neighbours, CUDA-graph capture sizes (1, 2, 4, multiples of 8 up to
    ``CAPTURE_MAX`` and of 16 above it), multiples of fifty (thresholds people
    write: 100, 250, 300, 1000), and ``high`` and the size below it."""
    sizes = {1, 2, 4, high - 1, high}
    sizes.update(range(8, CAPTURE_MAX + 1, 8))
    sizes.update(range(CAPTURE_MAX + 16, high + 1, 16))
    sizes.update(range(50, high + 1, 50))
    power = 1
    while power <= high + 1:
        sizes.update((power - 1, power, power + 1))
        power *= 2
    return tuple(sorted(x for x in sizes if low <= x <= high))


_TABLES: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}


def live_counts(max_capacity: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(table, thresholds)``: the live-request counts the size distribution draws from,
    sorted, each as often as its band's share says (``BANDS``: every small count ``0 ..
    SMALL`` alike, the "any" band's entries ``_ANY`` (``draw_batch`` draws their count),
    every threshold above ``SMALL`` alike, ``max_capacity`` for the full band), and the
    thresholds above ``SMALL``. One index into the table is one decision that shrinks to
    a smaller count: a threshold bug shrinks to the threshold."""
    kept = _TABLES.get(max_capacity)
    if kept is None:
        thresholds = size_thresholds(SMALL + 1, max_capacity)
        above = [t for t in thresholds if t != max_capacity]
        share = dict(BANDS)
        small_count, above_count = SMALL + 1, max(len(above), 1)
        table: list[int] = []
        for n in range(small_count):        # each band's total weight ~ its share
            table += [n] * (share["small"] * above_count)
        table += [_ANY] * (share["any"] * small_count * above_count)
        for t in above:
            table += [t] * (share["threshold"] * small_count)
        table += [max_capacity] * (share["full"] * small_count * above_count)
        kept = _TABLES[max_capacity] = (tuple(table), thresholds)
    return kept


def draw_batch(d: Draw, max_capacity: int) -> tuple[int, int]:
    """``(capacity, num_reqs)`` from the size distribution (the module's doc).

    Up to ``SMALL`` slots every size is small: the capacity is uniform over ``[1,
    max_capacity]``, the live requests over ``[0, capacity]``. Above it, the live count
    comes from ``live_counts`` (one decision; in the "any" band a second one, uniform
    over ``[SMALL + 1, max_capacity]``, so a bug behind any size shrinks to that size);
    a small batch (up to ``SMALL``) has a capacity up to ``SMALL`` (one in sixteen: a
    threshold capacity above it); a larger one is a full batch, or sits in a threshold
    capacity, or has a few tail slots. Every choice shrinks towards a smaller batch, and
    a full one.
    """
    if max_capacity <= SMALL:
        capacity = d.size(1, max_capacity)
        return capacity, d.size(0, capacity)
    table, thresholds = live_counts(max_capacity)
    num_reqs = table[d.size(0, len(table) - 1)]
    if num_reqs == _ANY:
        num_reqs = d.size(SMALL + 1, max_capacity)
    elif num_reqs <= SMALL:
        if d.size(0, 15) < 15:
            return d.size(max(num_reqs, 1), SMALL), num_reqs
        return d.pick(thresholds), num_reqs        # a small batch in a large buffer
    role = d.size(0, 2)
    if role == 0 or num_reqs == max_capacity:
        return num_reqs, num_reqs
    if role == 1:
        return d.pick(thresholds[bisect_left(thresholds, num_reqs):]), num_reqs
    return min(max_capacity, num_reqs + d.size(1, SMALL)), num_reqs


def draw_length(d: Draw, low: int, high: int) -> int:
    """How many items a list holds: up to ``SMALL_LIST`` items above ``low`` every length
    is uniform; above that, three lists in four stay that short and one in four is any
    length in ``[low, high]``."""
    if high - low <= SMALL_LIST or d.size(0, 3) < 3:
        return d.size(low, min(high, low + SMALL_LIST))
    return d.size(low, high)


def draw_lengths(d: Draw, low: int, high: int, count: int) -> list[int]:
    """``count`` draws of ``draw_length`` (the same distribution; in bulk where the
    ``Draw`` answers many decisions at once)."""
    many, chances = getattr(d, "integers", None), getattr(d, "chances", None)
    if many is None or chances is None or count <= SMALL:
        return [draw_length(d, low, high) for _ in range(count)]
    short = many(low, min(high, low + SMALL_LIST), count)
    if high - low <= SMALL_LIST:
        return short
    wide, any_length = many(low, high, count), chances(1, 4, count)
    return [w if yes else n for n, w, yes in zip(short, wide, any_length)]


def _padded_length(d: Draw, num_reqs: int, capacity: int) -> int:
    """``len(req_ids)``: ``num_reqs`` plus up to ``SMALL`` padded ids, or (one time in
    eight, when more fit) padded to the whole capacity."""
    if capacity - num_reqs <= SMALL:
        return d.size(num_reqs, capacity)
    if d.chance(1, 8):
        return capacity
    return d.size(num_reqs, num_reqs + SMALL)


def draft_bound(schema: StagingSchema) -> int | None:
    """The longest draft list the schema declares (None: it has no draft input)."""
    bounds = [inp.length[1] for inp in schema.inputs if inp.drafts]
    return max(bounds) if bounds else None


#: ``req-<k>`` for every k below the largest pool asked for so far (made once)
_ID_NAMES: list[str] = []
#: the largest pool whose names are kept (a larger one's are made each time)
_ID_NAMES_KEPT = 1 << 16


def _ids(d: Draw, length: int, pool: int) -> list[str]:
    """``length`` distinct ids ``req-<k>`` (shrinks towards req-0, req-1, ...)."""
    many = getattr(d, "distinct", None)       # a Draw may pick them all at once
    if many is not None and length > SMALL:
        if pool > _ID_NAMES_KEPT:
            return [f"req-{k}" for k in many(pool, length)]
        if len(_ID_NAMES) < pool:
            _ID_NAMES.extend(f"req-{k}" for k in range(len(_ID_NAMES), pool))
        return list(map(_ID_NAMES.__getitem__, many(pool, length)))
    taken: list[int] = []
    seen: set[int] = set()
    for _ in range(length):
        k = d.size(0, pool - 1)
        while k in seen:
            k = (k + 1) % pool
        taken.append(k)
        seen.add(k)
    return [f"req-{k}" for k in taken]


def _one(d: Draw, inp: Input, max_drafts: int | None = None) -> Any:
    if inp.dtype == "int-list":
        low, high = inp.length
        if inp.drafts and max_drafts is not None:
            high = max(low, max_drafts)
        return [d.integer(0, 50_000) for _ in range(draw_length(d, low, high))]
    if inp.dtype == "bool":
        return d.chance(1, 2)
    return d.value(inp.values)


def _chances(d: Draw, numerator: int, denominator: int, count: int) -> list[bool]:
    many = getattr(d, "chances", None)      # a Draw may answer many decisions at once
    if many is not None:
        return many(numerator, denominator, count)
    return [d.chance(numerator, denominator) for _ in range(count)]


def _many(d: Draw, inp: Input, count: int, max_drafts: int | None) -> list:
    """``count`` values of ``inp``, as ``_one`` draws each."""
    if inp.dtype == "int":
        many = getattr(d, "values", None)
        if many is not None:
            return many(inp.values, count)
        return [d.value(inp.values) for _ in range(count)]
    if inp.dtype == "bool":
        return _chances(d, 1, 2, count)
    low, high = inp.length
    if inp.drafts and max_drafts is not None:
        high = max(low, max_drafts)
    lengths = draw_lengths(d, low, high, count)
    many = getattr(d, "integers", None)
    if many is None:
        return [[d.integer(0, 50_000) for _ in range(n)] for n in lengths]
    items = many(0, 50_000, sum(lengths))
    out, at = [], 0
    for n in lengths:
        out.append(items[at:at + n])
        at += n
    return out


def _draw_group(d: Draw, group: list[Input], tables: list[dict], req_ids: list[str],
                num_reqs: int, may_miss: bool, max_drafts: int | None) -> None:
    """One group's entries for a large batch: which requests have them (one decision
    per request), then each input's values for those requests (the same distribution
    as entry by entry, in fewer calls)."""
    lead = group[0]
    live, padded = req_ids[:num_reqs], req_ids[num_reqs:]
    if lead.presence == REQUIRED:
        present = list(live)
    elif lead.presence == MAY_MISS:
        present = (live if not may_miss else
                   [r for r, miss in zip(live, _chances(d, 1, 8, len(live))) if not miss])
    else:
        present = [r for r, yes in zip(live, _chances(d, 1, 2, len(live))) if yes]
    if lead.stale and padded:
        present += [r for r, yes in zip(padded, _chances(d, 1, 2, len(padded))) if yes]
    for inp, table in zip(group, tables):
        table.update(zip(present, _many(d, inp, len(present), max_drafts)))


def draw_scenario(schema: StagingSchema, d: Draw, max_capacity: int | None = None,
                  max_drafts: int | None = None,
                  batch: tuple[int, int] | None = None) -> StagingScenario:
    """An in-contract scenario of ``schema`` (``contract_breaches`` is empty for it).

    Guarantees: ``0 <= num_reqs <= capacity <= max_capacity`` (default: the schema's
    ``max_capacity``); ``num_reqs <= len(req_ids) <= capacity`` (trailing padded ids),
    or ``len(req_ids) == num_reqs`` where the schema says so; live ids unique and present
    in every required input; int values within their ranges; draft lists at most
    ``max_drafts`` long (default: the schema's bound). Free: the sizes (the size
    distribution: ``draw_batch``), empty and full batches, padded ids with stale entries
    or none, optional entries present or absent, may-miss entries absent about one time
    in eight (the failure path), previous contents of every view, and whatever
    ``schema.generate`` decides on top. ``batch``: ``(capacity, num_reqs)`` to draw the
    rest of a scenario of that size (a benchmark's), instead of the size distribution.
    """
    if max_capacity is None:
        max_capacity = schema.max_capacity
    capacity, num_reqs = batch if batch is not None else draw_batch(d, max_capacity)
    length = num_reqs if schema.num_reqs_is_len else _padded_length(d, num_reqs, capacity)
    req_ids = _ids(d, length, ID_POOL_PER_SLOT * max(capacity, SMALL))
    inputs: dict[str, Any] = {}
    for key, group in schema.request_groups().items():
        tables: list[dict] = [{} for _ in group]
        lead = group[0]
        # the failure path: up to SMALL live requests, each may miss the input (one time in
        # eight); in a larger batch that would be every batch, so one batch in four
        # takes the failure path (then each request misses it one time in eight)
        may_miss = lead.presence == MAY_MISS and (num_reqs <= SMALL or d.chance(1, 4))
        if len(req_ids) > SMALL:       # a large batch: each decision for every request
            _draw_group(d, group, tables, req_ids, num_reqs, may_miss, max_drafts)
            for inp, table in zip(group, tables):
                inputs[inp.name] = table
            continue
        for position, r in enumerate(req_ids):
            live = position < num_reqs
            if not live:
                present = lead.stale and d.chance(1, 2)
            elif lead.presence == REQUIRED:
                present = True
            elif lead.presence == MAY_MISS:
                present = not may_miss or not d.chance(1, 8)
            else:
                present = d.chance(1, 2)
            if present:
                for inp, table in zip(group, tables):
                    table[r] = _one(d, inp, max_drafts)
        for inp, table in zip(group, tables):
            inputs[inp.name] = table
    for inp in schema.inputs:
        if inp.kind == PER_SLOT:
            inputs[inp.name] = [_one(d, inp, max_drafts) for _ in range(capacity)]
        elif inp.kind == ID_SET:
            candidates = req_ids + ["req-gone"]
            inputs[inp.name] = [r for r in candidates if d.chance(1, 4)]
        elif inp.kind == FLAG:
            inputs[inp.name] = inp.default if not d.chance(1, 2) else not inp.default
        elif inp.kind == NUMBER:
            inputs[inp.name] = d.value(inp.values)
    cpu, gpu = d.contents(schema.fields, capacity)
    s = StagingScenario(capacity, num_reqs, req_ids, inputs, cpu, gpu, schema.name)
    if schema.generate is not None:
        schema.generate(d, s)
    return s


def breach_kinds(schema: StagingSchema) -> list[str]:
    """The ways the out-of-contract stream breaks the contract, one at a time."""
    kinds = [] if schema.num_reqs_is_len else [BREACH_ABOVE_CAPACITY]
    for key, group in schema.request_groups().items():
        if group[0].presence == REQUIRED:
            kinds.append(f"missing from {key}")
    for inp in schema.inputs:
        if inp.kind == PER_REQUEST and inp.dtype == "int" and inp.in_int32:
            kinds.append(f"{inp.name} beyond int32")
    # nothing else to break (every entry of req_ids live, per-slot inputs only): a batch
    # of more requests than the buffers have slots can always be built
    return kinds or [BREACH_ABOVE_CAPACITY]


def _fill_entries(schema: StagingSchema, s: StagingScenario, ids: list[str]) -> None:
    """Give each request of ``ids`` every required or may-miss entry it lacks (simple
    values)."""
    for key, group in schema.request_groups().items():
        if group[0].presence in (REQUIRED, MAY_MISS):
            for inp in group:
                table = s.inputs[inp.name]
                if inp.dtype == "int-list":
                    for r in ids:
                        if r not in table:
                            table[r] = []
                    continue
                simple = max(inp.values.low, min(1, inp.values.high))
                for r in ids:
                    table.setdefault(r, simple)


def draw_breach(schema: StagingSchema, d: Draw, max_capacity: int | None = None,
                max_drafts: int | None = None) -> tuple[str, StagingScenario]:
    """``(breach, scenario)``: an in-contract scenario with one breach of the contract."""
    kinds = breach_kinds(schema)
    breach = d.pick(kinds)
    s = draw_scenario(schema, d, max_capacity, max_drafts)
    if breach == BREACH_ABOVE_CAPACITY:
        extra = d.size(1, 3)
        for k in range(s.capacity + extra - len(s.req_ids)):
            s.req_ids.append(f"req-x{k}")
        _fill_entries(schema, s, s.req_ids)
        s.num_reqs = s.capacity + extra
        return breach, s
    if s.num_reqs == 0:
        if not s.req_ids:
            s.req_ids.append("req-x0")
        s.num_reqs = 1
        _fill_entries(schema, s, s.req_ids[:1])
    victim = s.req_ids[d.size(0, s.num_reqs - 1)]
    if breach.startswith("missing from "):
        for inp in schema.request_groups()[breach[len("missing from "):]]:
            s.inputs[inp.name].pop(victim, None)
    else:
        name = breach[: -len(" beyond int32")]
        high = d.chance(1, 2)
        s.inputs[name][victim] = (d.integer(INT32_MAX + 1, 2**40) if high
                                  else d.integer(-(2**40), INT32_MIN - 1))
    return breach, s


def repaired(schema: StagingSchema, s: StagingScenario) -> StagingScenario | None:
    """``s`` with each integer input outside its range set to the nearest value inside it,
    and each live request missing from a required or may-miss input given a simple entry
    there (``_fill_entries``' values: a success-path example); None unless that leaves an
    in-contract scenario that differs from ``s`` (a breach of another kind: num_reqs above
    capacity, a request id twice). A difference an out-of-contract example shows that its
    repair still shows is an in-contract one."""
    if not contract_breaches(schema, s):
        return None
    out = StagingScenario.from_dict(s.to_dict())
    live = out.live_ids
    missing = [r for key, group in schema.request_groups().items()
               if group[0].presence in (REQUIRED, MAY_MISS)
               and isinstance(out.inputs.get(group[0].name), dict)
               for r in live if r not in out.inputs[group[0].name]]
    changed = bool(missing)
    _fill_entries(schema, out, missing)
    for inp in schema.inputs:
        if inp.dtype != "int" or inp.kind not in (PER_REQUEST, PER_SLOT):
            continue
        low, high = inp.values.low, inp.values.high
        data = out.inputs.get(inp.name)
        keys = (list(data) if isinstance(data, dict) else range(len(data))
                if isinstance(data, list) else ())
        for k in keys:
            v = data[k]
            if isinstance(v, int) and not isinstance(v, bool) and not low <= v <= high:
                data[k] = min(max(v, low), high)
                changed = True
    if not changed or contract_breaches(schema, out):
        return None
    return out


def malformed(schema: StagingSchema, s: StagingScenario) -> list[str]:
    """Why ``s`` cannot be built at all (unlike a contract breach, which can be run)."""
    out: list[str] = []
    if not isinstance(s.capacity, int) or isinstance(s.capacity, bool) or s.capacity < 1:
        return [f"capacity={s.capacity!r} is not a whole number >= 1"]
    if not isinstance(s.num_reqs, int) or isinstance(s.num_reqs, bool):
        out.append(f"num_reqs={s.num_reqs!r} is not a whole number")
    if not isinstance(s.req_ids, list) or not all(isinstance(r, str) for r in s.req_ids):
        out.append("req_ids is not a list of strings")
    if not isinstance(s.inputs, dict):
        return out + ["inputs is not an object"]
    for inp in schema.inputs:
        if inp.name not in s.inputs:
            out.append(f"inputs lacks {inp.name!r}")
            continue
        value = s.inputs[inp.name]
        expected = {PER_REQUEST: dict, PER_SLOT: list, ID_SET: list, FLAG: bool, NUMBER: int}
        if not isinstance(value, expected[inp.kind]):
            out.append(f"inputs[{inp.name!r}] is not a {expected[inp.kind].__name__}")
        elif inp.kind == PER_SLOT and len(value) != s.capacity:
            out.append(f"inputs[{inp.name!r}] has {len(value)} values, capacity is {s.capacity}")
        elif inp.kind in (PER_REQUEST, PER_SLOT) and inp.dtype in _ELEMENT_KINDS:
            # a value of another type (an edited replay file's text) is no input at all
            items = value.items() if inp.kind == PER_REQUEST else enumerate(value)
            bad = next(((k, v) for k, v in items if not _ELEMENT_KINDS[inp.dtype](v)), None)
            if bad is not None:
                out.append(f"inputs[{inp.name!r}][{bad[0]!r}] = {bad[1]!r:.40} is not "
                           f"{_ELEMENT_SAID[inp.dtype]}")
    for view, table in (("initial_cpu", s.initial_cpu), ("initial_gpu", s.initial_gpu)):
        if not isinstance(table, dict):
            out.append(f"{view} is not an object")
            continue
        for buffer, values in table.items():
            f = schema.field_of_buffer(buffer)
            if f is None:
                out.append(f"{view} names {buffer!r}, which is not a staged buffer")
            elif not isinstance(values, list) or len(values) != s.capacity:
                out.append(f"{view}[{buffer!r}] does not hold {s.capacity} values")
            elif f.dtype in _RANGES and not all(
                    isinstance(v, int) and not isinstance(v, bool)
                    and _RANGES[f.dtype][0] <= v <= _RANGES[f.dtype][1] for v in values):
                out.append(f"{view}[{buffer!r}] holds values that are not {f.dtype}")
    return out
