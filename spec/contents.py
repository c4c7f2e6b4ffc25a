"""A staged buffer's contents before the call: drawn (``buffer_contents``: a sentinel
fill, or random bit patterns with the dtype's extremes, from one decision and a seed)
and read back from a scenario (``initial_values``). The scenario space
(``spec/space.py``) draws the decision; every engine builds its buffers from it.
"""

from __future__ import annotations

import random
import sys
from array import array
from collections import deque
from itertools import compress
from typing import Sequence

from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import INT32_MAX, INT32_MIN, Field, StagingSchema

__all__ = ["buffer_contents", "initial_values"]

_EXTREMES = {"int32": (INT32_MIN, -1, 0, 1, INT32_MAX), "int64": (-(2**63), -1, 0, 1, 2**63 - 1)}


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
    for f in fields:
        for table in (cpu, gpu):
            if f.dtype == "bool":
                table[f.buffer] = [b < 128 for b in rng.randbytes(capacity)]
                continue
            table[f.buffer] = _random_ints(rng, f.dtype, capacity)
    return cpu, gpu


def _random_ints(rng: random.Random, dtype: str, capacity: int) -> list[int]:
    """``capacity`` values of ``dtype``: one in five an extreme of the range, the others
    any bit pattern (each slot from the bytes of ``rng``, in bulk)."""
    code = "q" if dtype == "int64" else "i"
    values = array(code, rng.randbytes(capacity * array(code).itemsize))
    if sys.byteorder != "little":
        values.byteswap()
    out = values.tolist()
    marks = rng.randbytes(capacity)
    # about one slot in five (a mark below 51) takes the extreme its mark picks: the
    # slots found and their values set in C loops
    slots = list(compress(range(capacity), marks.translate(_TAKES_EXTREME)))
    extreme = _EXTREME_OF_MARK.get(dtype, _EXTREME_OF_MARK["int32"])
    deque(map(out.__setitem__, slots, map(extreme.__getitem__, map(marks.__getitem__, slots))),
          maxlen=0)
    return out


#: byte -> 1 where ``_random_ints`` puts an extreme in that slot, else 0
_TAKES_EXTREME = bytes(1 if b < 51 else 0 for b in range(256))
#: dtype -> (byte -> the extreme a slot marked with that byte takes)
_EXTREME_OF_MARK = {dtype: tuple(extremes[b % len(extremes)] for b in range(256))
                    for dtype, extremes in _EXTREMES.items()}


def initial_values(s: StagingScenario, schema: StagingSchema, buffer: str, view: str) -> list:
    """Initial contents of one view, zeros where the scenario does not say (the
    scenario's own list: read it, do not change it)."""
    table = s.initial_cpu if view == "cpu" else s.initial_gpu
    values = table.get(buffer)
    if values is None:
        f = schema.field_of_buffer(buffer)
        return [False if f is not None and f.dtype == "bool" else 0] * s.capacity
    return values
