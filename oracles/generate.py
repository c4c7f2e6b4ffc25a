"""The generate stage with hypothesis: scenarios of a schema, by construction.

``spec/space.py`` states how a scenario of a schema is drawn, decision by decision,
against a ``Draw``; ``HypothesisDraw`` answers each decision with a hypothesis draw,
so the examples shrink. ``staging_scenarios(schema)`` yields only in-contract inputs
(``spec.contract_breaches`` is empty for every one); ``out_of_contract_scenarios``
yields inputs that should not happen, each labeled with the breach it carries.

Both draw sizes from the one size distribution of ``spec/space.py`` (mostly small, a
share on thresholds, a few full batches of the schema's ``max_capacity``). A scenario
of hundreds of requests would take more decisions than hypothesis keeps for one
example: after ``DECISIONS`` hypothesis draws, one more draws a seed and the rest of
the scenario comes from a ``RandomDraw`` of that seed (the same distribution). What
shrinks is the beginning (the sizes first): as a scenario gets smaller it fits in the
budget again and every decision shrinks.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from hypothesis import strategies as st

from stagecheck.oracles.sample import RandomDraw
from stagecheck.spec.contents import buffer_contents
from stagecheck.spec.schema import Field, StagingSchema, Values
from stagecheck.spec.schemas import DEFAULT_SCHEMA
from stagecheck.spec.space import draw_breach, draw_scenario

__all__ = ["DECISIONS", "FILLS", "HypothesisDraw", "out_of_contract_scenarios",
           "staging_scenarios"]

#: hypothesis draws one scenario takes at most before a seeded source answers the rest
DECISIONS = 200

#: How previous buffer contents are made (``spec.contents.buffer_contents``): one draw of
#: a fill and a seed instead of one per slot keeps generation cheap; shrinking goes to
#: "sentinel".
FILLS = ("sentinel", "random")


def _values(values: Values) -> st.SearchStrategy[int]:
    """Small values most of the time, any in range, and the special ones on purpose."""
    parts = []
    if values.small is not None:
        parts.append(st.integers(values.low, min(values.high, values.low + values.small)))
    parts.append(st.integers(values.low, values.high))
    if values.special:
        parts.append(st.sampled_from(values.special))
    return st.one_of(*parts)


class HypothesisDraw:
    """Each decision of ``spec.space`` as a hypothesis draw (sizes shrink to their low end,
    chances to False, picks to the first option, values towards 0); past ``decisions``
    draws, a ``RandomDraw`` seeded by one more hypothesis draw."""

    def __init__(self, draw, decisions: int = DECISIONS) -> None:
        self._draw = draw
        self._values: dict[Values, st.SearchStrategy[int]] = {}
        self._left = decisions
        self._rest: RandomDraw | None = None

    def _bulk(self) -> RandomDraw | None:
        """The seeded source once the budget of hypothesis draws is spent."""
        if self._rest is None:
            self._left -= 1
            if self._left >= 0:
                return None
            self._rest = RandomDraw(random.Random(self._draw(st.integers(0, 2**32 - 1))))
        return self._rest

    def size(self, low: int, high: int) -> int:
        rest = self._bulk()
        if rest is not None:
            return rest.size(low, high)
        return self._draw(st.integers(low, high))

    def chance(self, numerator: int, denominator: int) -> bool:
        rest = self._bulk()
        if rest is not None:
            return rest.chance(numerator, denominator)
        return self._draw(st.integers(0, denominator - 1)) >= denominator - numerator

    def pick(self, options: Sequence) -> Any:
        rest = self._bulk()
        if rest is not None:
            return rest.pick(options)
        return self._draw(st.sampled_from(list(options)))

    def value(self, values: Values) -> int:
        rest = self._bulk()
        if rest is not None:
            return rest.value(values)
        strategy = self._values.get(values)
        if strategy is None:
            strategy = self._values[values] = _values(values)
        return self._draw(strategy)

    def integer(self, low: int, high: int) -> int:
        rest = self._bulk()
        if rest is not None:
            return rest.integer(low, high)
        return self._draw(st.integers(low, high))

    def contents(self, fields: Sequence[Field], capacity: int) -> tuple[dict, dict]:
        rest = self._bulk()
        if rest is not None:
            return rest.contents(fields, capacity)
        fill = self._draw(st.sampled_from(FILLS))
        return buffer_contents(fields, capacity, fill, self._draw(st.integers(0, 2**32 - 1)))


@st.composite
def staging_scenarios(draw, max_capacity: int | None = None,
                      schema: StagingSchema = DEFAULT_SCHEMA, max_drafts: int | None = None):
    """In-contract scenarios of ``schema`` (see ``spec.space.draw_scenario``); the bounds
    are the schema's where None (capacity up to 1,024 for the built-in ones)."""
    return draw_scenario(schema, HypothesisDraw(draw), max_capacity, max_drafts)


@st.composite
def out_of_contract_scenarios(draw, max_capacity: int | None = None,
                              schema: StagingSchema = DEFAULT_SCHEMA,
                              max_drafts: int | None = None):
    """``(breach, scenario)``: an in-contract scenario of ``schema`` with one breach."""
    return draw_breach(schema, HypothesisDraw(draw), max_capacity, max_drafts)
