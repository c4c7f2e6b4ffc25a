"""Scenarios from a seeded random source: fast, reproducible, no shrinking.

``RandomDraw`` answers the decisions of ``spec/space.py`` from ``random.Random``, with
the same distribution as the hypothesis strategies (``oracles/generate.py``): sizes
uniform over their range, values mostly small, any in range, or the special ones,
buffer contents one fill and a seed. Every scenario is reproducible from
``(seed, index)``: ``sample_scenario(schema, seed, index)``.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import Field, StagingSchema, Values
from stagecheck.spec.space import buffer_contents, draw_breach, draw_scenario

__all__ = ["RandomDraw", "sample_breach", "sample_scenario"]

FILLS = ("sentinel", "random")


class RandomDraw:
    """Each decision from one seeded ``random.Random``."""

    __slots__ = ("rng",)

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def size(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def chance(self, numerator: int, denominator: int) -> bool:
        return self.rng.randrange(denominator) >= denominator - numerator

    def pick(self, options: Sequence) -> Any:
        return options[self.rng.randrange(len(options))]

    def value(self, values: Values) -> int:
        """Small values, any in range, the ends of the range (as hypothesis favours them)
        and the special values, about equally often."""
        rng = self.rng
        k = rng.randrange(4)
        if k == 0 and values.small is not None:
            return rng.randint(values.low, min(values.high, values.low + values.small))
        if k == 1 or (k == 3 and not values.special):
            ends = (values.low, min(values.low + 1, values.high), max(values.high - 1, values.low),
                    values.high)
            return ends[rng.randrange(4)]
        if k == 3:
            return values.special[rng.randrange(len(values.special))]
        return rng.randint(values.low, values.high)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def contents(self, fields: Sequence[Field], capacity: int) -> tuple[dict, dict]:
        fill = FILLS[self.rng.randrange(2)]
        return buffer_contents(fields, capacity, fill, self.rng.getrandbits(32))


def _rng(seed: int, index: int, stream: str) -> random.Random:
    return random.Random(f"{seed}/{stream}/{index}")


def sample_scenario(schema: StagingSchema, seed: int, index: int,
                    max_capacity: int = 8) -> StagingScenario:
    """The ``index``-th in-contract scenario of ``schema`` for ``seed``."""
    return draw_scenario(schema, RandomDraw(_rng(seed, index, "in")), max_capacity)


def sample_breach(schema: StagingSchema, seed: int, index: int,
                  max_capacity: int = 8) -> tuple[str, StagingScenario]:
    """The ``index``-th out-of-contract scenario of ``schema`` for ``seed``, labeled."""
    return draw_breach(schema, RandomDraw(_rng(seed, index, "out")), max_capacity)
