"""What the results of the oracles that compare two targets have in common."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TargetPair"]


@dataclass
class TargetPair:
    """The first fields of every result that compares two targets (``diff``, ``symbolic``,
    ``bench``): which two, by their specs as given (``baseline`` None: the candidate
    alone, against the spec)."""

    baseline: str | None
    candidate: str
