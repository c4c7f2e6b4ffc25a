"""The symbolic scenario: one path's scenario, drawn by ``spec.space`` from CrossHair.

``SymbolicDraw`` answers the decisions of ``spec/space.py`` for any schema: sizes,
chances and picks fork the path (so they are concrete on it, and CrossHair's random
descent of the path tree tries them all), values are CrossHair symbolic ints within
their range, and every slot of every buffer's previous contents is a symbolic value.
About one path in five carries one breach of the contract (``draw_breach``), so the
symbolic oracle also explores inputs that should not happen, as the fuzzer does.
"""

from __future__ import annotations

from typing import Any, Sequence

from stagecheck.oracles.symbolic._crosshair import assume, fork, symbolic_bool, symbolic_int
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import INT32_MAX, INT32_MIN, Field, StagingSchema, Values
from stagecheck.spec.space import draw_breach, draw_scenario

__all__ = ["SYMBOLIC_MAX_DRAFTS", "SymbolicDraw", "pick", "symbolic_scenario"]

_RANGES = {"int32": (INT32_MIN, INT32_MAX), "int64": (-(2**63), 2**63 - 1)}


def pick(space, desc: str, weighted: list[tuple[Any, float]]) -> Any:
    """Choose one of ``weighted`` (value, weight) by a chain of forks.

    The weights steer CrossHair's random descent of the path tree (the shapes that
    matter most are tried first); every option stays reachable.
    """
    options = [(v, w) for v, w in weighted if w > 0]
    for i, (value, weight) in enumerate(options[:-1]):
        rest = sum(w for _, w in options[i:])
        if fork(space, f"{desc}={value!r}", weight / rest):
            return value
    return options[-1][0]


class SymbolicDraw:
    """The decisions of one path: forks for its shape, symbolic ints for its values."""

    def __init__(self, space) -> None:
        self.space = space
        self._n = 0

    def _name(self, what: str) -> str:
        self._n += 1
        return f"{what}_{self._n}"

    def size(self, low: int, high: int) -> int:
        # the ends (an empty or a full batch, the smallest and largest capacity) first
        weights = [(v, 3.0 if v in (low, high) else 1.0) for v in range(high, low - 1, -1)]
        return pick(self.space, self._name("size"), weights)

    def chance(self, numerator: int, denominator: int) -> bool:
        return fork(self.space, self._name("chance"), numerator / denominator)

    def pick(self, options: Sequence) -> Any:
        return pick(self.space, self._name("pick"), [(o, 1.0) for o in options])

    def integer(self, low: int, high: int) -> int:
        x = symbolic_int(self.space, self._name("int"))
        assume(self.space, x >= low)
        assume(self.space, x <= high)
        return x

    def value(self, values: Values) -> int:
        return self.integer(values.low, values.high)

    def contents(self, fields: Sequence[Field], capacity: int) -> tuple[dict, dict]:
        cpu, gpu = {}, {}
        for f in fields:
            for table, view in ((cpu, "cpu"), (gpu, "gpu")):
                if f.dtype == "bool":
                    table[f.buffer] = [symbolic_bool(self.space, self._name(f"{f.buffer}_{view}"))
                                       for _ in range(capacity)]
                else:
                    low, high = _RANGES.get(f.dtype, _RANGES["int32"])
                    table[f.buffer] = [self.integer(low, high) for _ in range(capacity)]
        return cpu, gpu


#: the longest draft list a path draws: every length is a fork of the path tree, so the
#: symbolic oracle keeps the small bounds (capacity: ``--max-capacity``, default 4) where
#: the fuzzer draws the schema's (docs/symbolic.md)
SYMBOLIC_MAX_DRAFTS = 4


def symbolic_scenario(space, schema: StagingSchema, max_capacity: int,
                      max_drafts: int = SYMBOLIC_MAX_DRAFTS) -> StagingScenario:
    """Build (under tracing) one path's scenario of ``schema``."""
    d = SymbolicDraw(space)
    if fork(space, "in_contract", 0.8):
        return draw_scenario(schema, d, max_capacity, max_drafts)
    return draw_breach(schema, d, max_capacity, max_drafts)[1]
