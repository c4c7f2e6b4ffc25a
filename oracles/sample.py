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

from stagecheck.spec.contents import buffer_contents
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import Field, StagingSchema, Values
from stagecheck.spec.space import draw_breach, draw_scenario

__all__ = ["RandomDraw", "sample_breach", "sample_scenario"]

FILLS = ("sentinel", "random")
#: decisions drawn at once from a numpy generator (seeded by this source) from this many
BULK = 32


class RandomDraw:
    """Each decision from one seeded ``random.Random`` (``random()`` only: the C call)."""

    __slots__ = ("generator", "random", "rng")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.random = rng.random
        self.generator = None

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

    def _bulk(self):
        """This draw's numpy generator, seeded from its source when first asked (for
        decisions in bulk)."""
        if self.generator is None:
            import numpy as np   # only large batches draw in bulk: small runs never load it
            self.generator = np.random.default_rng(self.rng.getrandbits(64))
        return self.generator

    def values(self, values: Values, count: int) -> list[int]:
        """``count`` draws of ``value`` (the same distribution, in bulk)."""
        low, high, small, special = values.low, values.high, values.small, values.special
        if count < BULK or high - low >= 1 << 62:
            return [self.value(values) for _ in range(count)]
        import numpy as np   # as in _bulk: numpy only for large batches
        g = self._bulk()
        kind = g.integers(0, 4, count)
        wide = g.integers(low, high, count, endpoint=True)
        ends = np.array((low, min(low + 1, high), max(high - 1, low), high), dtype=np.int64)
        out = np.where(kind == 1, ends[g.integers(0, 4, count)], wide)
        if small is not None:
            out = np.where(kind == 0, g.integers(low, min(high, low + small), count,
                                                 endpoint=True), out)
        else:
            out = np.where(kind == 0, wide, out)
        if special:
            chosen = np.array(special, dtype=np.int64)[g.integers(0, len(special), count)]
            out = np.where(kind == 3, chosen, out)
        else:
            out = np.where(kind == 3, ends[g.integers(0, 4, count)], out)
        return out.tolist()

    def chances(self, numerator: int, denominator: int, count: int) -> list[bool]:
        """``count`` draws of ``chance``."""
        if count < BULK:
            return [self.chance(numerator, denominator) for _ in range(count)]
        return (self._bulk().random(count) * denominator < numerator).tolist()

    def integers(self, low: int, high: int, count: int) -> list[int]:
        """``count`` draws of ``integer``."""
        if count < BULK or high - low >= 1 << 62:
            return [self.integer(low, high) for _ in range(count)]
        return self._bulk().integers(low, high, count, endpoint=True).tolist()

    def distinct(self, pool: int, count: int) -> list[int]:
        """``count`` distinct whole numbers below ``pool`` (the ids of a batch)."""
        if count < BULK:
            return self.rng.sample(range(pool), count)
        return self._bulk().choice(pool, count, replace=False).tolist()

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
