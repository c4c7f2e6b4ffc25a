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
"""

from __future__ import annotations

import random
from typing import Any, Protocol, Sequence

from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import (FLAG, ID_SET, INT32_MAX, INT32_MIN, MAY_MISS, NUMBER,
                                    PER_REQUEST, PER_SLOT, REQUIRED, Field, Input, StagingSchema,
                                    Values, contract_breaches)

__all__ = ["BREACH_ABOVE_CAPACITY", "Draw", "breach_kinds", "buffer_contents",
           "contract_breaches", "draw_breach", "draw_scenario", "initial_values", "malformed"]

BREACH_ABOVE_CAPACITY = "num_reqs above capacity"
#: ids are "req-<k>" with k below this many per slot of the largest capacity
ID_POOL_PER_SLOT = 4
_EXTREMES = {"int32": (INT32_MIN, -1, 0, 1, INT32_MAX), "int64": (-(2**63), -1, 0, 1, 2**63 - 1)}
_RANGES = {"int32": (INT32_MIN, INT32_MAX), "int64": (-(2**63), 2**63 - 1)}


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


# --------------------------------------------------------------------------- contents

def buffer_contents(fields: Sequence[Field], capacity: int, fill: str,
                    seed: int) -> tuple[dict, dict]:
    """Previous contents from one decision and a seed (cheap to draw and to shrink).

    ``sentinel`` fills every CPU view with -1 and every GPU mirror with -2 (True/False
    for bool buffers), as upstream tests do, so a shrunk example reads easily;
    ``random`` draws every slot of every view independently (any bit pattern of the
    dtype, extremes included) from ``seed``.
    """
    cpu, gpu = {}, {}
    if fill == "sentinel":
        for f in fields:
            cpu[f.buffer] = [True] * capacity if f.dtype == "bool" else [-1] * capacity
            gpu[f.buffer] = [False] * capacity if f.dtype == "bool" else [-2] * capacity
        return cpu, gpu
    rng = random.Random(seed)
    uniform, bits = rng.random, rng.getrandbits
    for f in fields:
        for table in (cpu, gpu):
            if f.dtype == "bool":
                table[f.buffer] = [uniform() < 0.5 for _ in range(capacity)]
                continue
            low, high = _RANGES.get(f.dtype, _RANGES["int32"])
            extremes = _EXTREMES.get(f.dtype, _EXTREMES["int32"])
            width = (high - low).bit_length()        # the dtype's whole range: 2**width values
            values = []
            for _ in range(capacity):
                u = uniform()       # one in five an extreme, else any bit pattern
                values.append(extremes[int(u * 5 * len(extremes)) % len(extremes)]
                              if u < 0.2 else low + bits(width))
            table[f.buffer] = values
    return cpu, gpu


def initial_values(s: StagingScenario, schema: StagingSchema, buffer: str, view: str) -> list:
    """Initial contents of one view, zeros where the scenario does not say (the
    scenario's own list: read it, do not change it)."""
    table = s.initial_cpu if view == "cpu" else s.initial_gpu
    values = table.get(buffer)
    if values is None:
        f = schema.field_of_buffer(buffer)
        return [False if f is not None and f.dtype == "bool" else 0] * s.capacity
    return values


# --------------------------------------------------------------------------- drawing

def _ids(d: Draw, length: int, pool: int) -> list[str]:
    """``length`` distinct ids ``req-<k>`` (shrinks towards req-0, req-1, ...)."""
    taken: list[int] = []
    for _ in range(length):
        k = d.size(0, pool - 1)
        while k in taken:
            k = (k + 1) % pool
        taken.append(k)
    return [f"req-{k}" for k in taken]


def _one(d: Draw, inp: Input) -> Any:
    if inp.dtype == "int-list":
        return [d.integer(0, 50_000) for _ in range(d.size(*inp.length))]
    if inp.dtype == "bool":
        return d.chance(1, 2)
    return d.value(inp.values)


def draw_scenario(schema: StagingSchema, d: Draw, max_capacity: int = 8) -> StagingScenario:
    """An in-contract scenario of ``schema`` (``contract_breaches`` is empty for it).

    Guarantees: ``0 <= num_reqs <= capacity``; ``num_reqs <= len(req_ids) <= capacity``
    (trailing padded ids), or ``len(req_ids) == num_reqs`` where the schema says so; live
    ids unique and present in every required input; int values within their ranges.
    Free: empty and full batches, padded ids with stale entries or none, optional
    entries present or absent, may-miss entries absent about one time in eight (the
    failure path), previous contents of every view, and whatever ``schema.generate``
    decides on top.
    """
    capacity = d.size(1, max_capacity)
    num_reqs = d.size(0, capacity)
    length = num_reqs if schema.num_reqs_is_len else d.size(num_reqs, capacity)
    req_ids = _ids(d, length, ID_POOL_PER_SLOT * max_capacity)
    inputs: dict[str, Any] = {}
    for key, group in schema.request_groups().items():
        tables: list[dict] = [{} for _ in group]
        for position, r in enumerate(req_ids):
            live = position < num_reqs
            lead = group[0]
            if not live:
                present = lead.stale and d.chance(1, 2)
            elif lead.presence == REQUIRED:
                present = True
            elif lead.presence == MAY_MISS:
                present = not d.chance(1, 8)
            else:
                present = d.chance(1, 2)
            if present:
                for inp, table in zip(group, tables):
                    table[r] = _one(d, inp)
        for inp, table in zip(group, tables):
            inputs[inp.name] = table
    for inp in schema.inputs:
        if inp.kind == PER_SLOT:
            inputs[inp.name] = [_one(d, inp) for _ in range(capacity)]
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


def _fill_entries(schema: StagingSchema, s: StagingScenario, r: str) -> None:
    """Give request ``r`` every required or may-miss entry (simple values)."""
    for key, group in schema.request_groups().items():
        if group[0].presence in (REQUIRED, MAY_MISS):
            for inp in group:
                simple = [] if inp.dtype == "int-list" else max(inp.values.low, min(1, inp.values.high))
                s.inputs[inp.name].setdefault(r, simple)


def draw_breach(schema: StagingSchema, d: Draw, max_capacity: int = 8
                ) -> tuple[str, StagingScenario]:
    """``(breach, scenario)``: an in-contract scenario with one breach of the contract."""
    kinds = breach_kinds(schema)
    breach = d.pick(kinds)
    s = draw_scenario(schema, d, max_capacity)
    if breach == BREACH_ABOVE_CAPACITY:
        extra = d.size(1, 3)
        for k in range(s.capacity + extra - len(s.req_ids)):
            s.req_ids.append(f"req-x{k}")
        for r in s.req_ids:
            _fill_entries(schema, s, r)
        s.num_reqs = s.capacity + extra
        return breach, s
    if s.num_reqs == 0:
        if not s.req_ids:
            s.req_ids.append("req-x0")
        s.num_reqs = 1
        _fill_entries(schema, s, s.req_ids[0])
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
