"""The generate stage with hypothesis: scenarios of a schema, by construction.

``spec/space.py`` states how a scenario of a schema is drawn, decision by decision,
against a ``Draw``; ``HypothesisDraw`` answers each decision with a hypothesis draw,
so the examples shrink. ``staging_scenarios(schema)`` yields only in-contract inputs
(``spec.contract_breaches`` is empty for every one); ``out_of_contract_scenarios``
yields inputs that should not happen, each labeled with the breach it carries.
"""

from __future__ import annotations

from typing import Any, Sequence

from hypothesis import strategies as st

from stagecheck.spec.schema import Field, StagingSchema, Values
from stagecheck.spec.schemas import DEFAULT_SCHEMA
from stagecheck.spec.space import buffer_contents, draw_breach, draw_scenario

__all__ = ["FILLS", "HypothesisDraw", "out_of_contract_scenarios", "staging_scenarios"]

#: How previous buffer contents are made (``spec.space.buffer_contents``): one draw of
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
    chances to False, picks to the first option, values towards 0)."""

    def __init__(self, draw) -> None:
        self._draw = draw
        self._values: dict[Values, st.SearchStrategy[int]] = {}

    def size(self, low: int, high: int) -> int:
        return self._draw(st.integers(low, high))

    def chance(self, numerator: int, denominator: int) -> bool:
        return self._draw(st.integers(0, denominator - 1)) >= denominator - numerator

    def pick(self, options: Sequence) -> Any:
        return self._draw(st.sampled_from(list(options)))

    def value(self, values: Values) -> int:
        strategy = self._values.get(values)
        if strategy is None:
            strategy = self._values[values] = _values(values)
        return self._draw(strategy)

    def integer(self, low: int, high: int) -> int:
        return self._draw(st.integers(low, high))

    def contents(self, fields: Sequence[Field], capacity: int) -> tuple[dict, dict]:
        fill = self._draw(st.sampled_from(FILLS))
        return buffer_contents(fields, capacity, fill, self._draw(st.integers(0, 2**32 - 1)))


@st.composite
def staging_scenarios(draw, max_capacity: int = 8, schema: StagingSchema = DEFAULT_SCHEMA):
    """In-contract scenarios of ``schema`` (see ``spec.space.draw_scenario``)."""
    return draw_scenario(schema, HypothesisDraw(draw), max_capacity)


@st.composite
def out_of_contract_scenarios(draw, max_capacity: int = 8,
                              schema: StagingSchema = DEFAULT_SCHEMA):
    """``(breach, scenario)``: an in-contract scenario of ``schema`` with one breach."""
    return draw_breach(schema, HypothesisDraw(draw), max_capacity)
