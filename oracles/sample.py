"""Scenarios from a seeded random source: fast, reproducible, no shrinking.

``RandomDraw`` answers the decisions of ``spec/space.py`` from ``random.Random``, with
the same distribution as the hypothesis strategies (``oracles/generate.py``): sizes
as ``spec.space`` draws them (each ``size`` uniform over its range, the bands of the
size distribution on top), values mostly small, any in range, or the special ones,
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
    """Each decision from one seeded ``random.Random`` (``random()`` only: the C call)."""

    __slots__ = ("random", "rng")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.random = rng.random

    def size(self, low: int, high: int) -> int:
        return low + int(self.random() * (high - low + 1))

    def chance(self, numerator: int, denominator: int) -> bool:
        return self.random() * denominator < numerator

    def pick(self, options: Sequence) -> Any:
        return options[int(self.random() * len(options))]

    def value(self, values: Values) -> int:
        """Small values, any in range, the ends of the range (as hypothesis favours them)
        and the special values, about equally often."""
        k = int(self.random() * 4)
        low, high = values.low, values.high
        if k == 0 and values.small is not None:
            return self.integer(low, min(high, low + values.small))
        if k == 1 or (k == 3 and not values.special):
            return (low, min(low + 1, high), max(high - 1, low), high)[int(self.random() * 4)]
        if k == 3:
            return values.special[int(self.random() * len(values.special))]
        return self.integer(low, high)

    def integer(self, low: int, high: int) -> int:
        span = high - low + 1
        if span <= 1 << 52:
            return low + int(self.random() * span)
        return self.rng.randint(low, high)

    def contents(self, fields: Sequence[Field], capacity: int) -> tuple[dict, dict]:
        fill = FILLS[self.rng.randrange(2)]
        return buffer_contents(fields, capacity, fill, self.rng.getrandbits(32))


def _rng(seed: int, index: int, stream: str) -> random.Random:
    # an int seed (a string one costs a SHA-512): one per (seed, index, stream)
    return random.Random((seed << 48) + (index << 1) + (stream == "out"))


def sample_scenario(schema: StagingSchema, seed: int, index: int,
                    max_capacity: int | None = None,
                    max_drafts: int | None = None) -> StagingScenario:
    """The ``index``-th in-contract scenario of ``schema`` for ``seed`` (bounds: the
    schema's where None)."""
    return draw_scenario(schema, RandomDraw(_rng(seed, index, "in")), max_capacity,
                         max_drafts)


def sample_breach(schema: StagingSchema, seed: int, index: int,
                  max_capacity: int | None = None,
                  max_drafts: int | None = None) -> tuple[str, StagingScenario]:
    """The ``index``-th out-of-contract scenario of ``schema`` for ``seed``, labeled."""
    return draw_breach(schema, RandomDraw(_rng(seed, index, "out")), max_capacity,
                       max_drafts)
