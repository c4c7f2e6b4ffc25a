"""Which memory a tensor covers, and which named region (and which of its slots) that is.

A ``Span`` is the set of bytes a tensor view covers, as absolute addresses: an interval
``[lo, hi)`` and, for a view that is not contiguous (a column of a 2-D table, a strided
slice), the start address of each element. Two accesses race only where their spans share
an element; a view of no element covers nothing (``empty``), so a write of nothing is no
write. A ``Region`` is a named allocation the model knows (a buffer's host side, its
mirror, an anonymous pinned tensor); ``Regions`` finds the region of an address and says
which of its slots a span covers.

The functions read tensor metadata only (pointer, sizes, strides, element size), with
torch's function handling off, so they can run inside the interception itself.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

from stagecheck.oracles.device.torchload import import_torch

__all__ = ["Region", "Regions", "Span", "address_of", "span_of"]


class Span(NamedTuple):
    """Bytes a view covers: ``[lo, hi)``; ``elements``: each element's start address where
    the view is not contiguous (None where every byte of ``[lo, hi)`` is covered)."""

    lo: int
    hi: int
    item: int
    elements: tuple[int, ...] | None = None

    @classmethod
    def of_elements(cls, lo: int, item: int, offsets) -> "Span":
        """The elements at sorted, distinct element ``offsets`` (non-empty) from ``lo``."""
        return cls(lo + offsets[0] * item, lo + offsets[-1] * item + item, item,
                   tuple(lo + k * item for k in offsets))

    @property
    def empty(self) -> bool:
        return self.hi <= self.lo

    def overlaps(self, other: "Span") -> bool:
        if self.hi <= other.lo or other.hi <= self.lo or self.empty or other.empty:
            return False
        if self.elements is None and other.elements is None:
            return True
        return bool(self.shared(other))

    def shared(self, other: "Span") -> list[int]:
        """Start addresses of this span's elements that ``other`` covers."""
        mine = self.addresses()
        if other.elements is None:
            return [a for a in mine if other.lo <= a < other.hi]
        theirs = other.elements
        return [a for a in mine if _covers(theirs, other.item, a)]

    def addresses(self) -> tuple[int, ...] | range:
        return self.elements if self.elements is not None else range(self.lo, self.hi,
                                                                      self.item)


def _covers(starts: tuple[int, ...], item: int, address: int) -> bool:
    k = bisect.bisect_right(starts, address) - 1
    return k >= 0 and starts[k] <= address < starts[k] + item


def address_of(t) -> int:
    """Where ``t``'s first element is (or would be, for an empty view: torch gives 0)."""
    address = t.data_ptr()
    if address == 0 and t.numel() == 0:
        address = t.untyped_storage().data_ptr() + t.storage_offset() * t.element_size()
    return address


_TORCH = None


def span_of(t) -> Span:
    """The span of tensor ``t`` (its elements, not its whole storage)."""
    global _TORCH
    torch = _TORCH
    if torch is None:
        torch = import_torch()
        _TORCH = torch
    with torch._C.DisableTorchFunction():   # a mode or a subclass would see each call
        return _span(t)


def _span(t) -> Span:
    item = t.element_size()
    numel = t.numel()
    if numel == 0:        # torch says 0 for an empty view's pointer: where it would be
        lo = t.untyped_storage().data_ptr() + t.storage_offset() * item
        return Span(lo, lo, item)
    lo = t.data_ptr()
    if t.is_contiguous():
        return Span(lo, lo + numel * item, item)
    return _strided(lo, item, list(t.shape), list(t.stride()))


def _strided(lo: int, item: int, sizes: list, strides: list) -> Span:
    starts = [lo]
    extent = 0
    for size, stride in zip(sizes, strides):
        if size == 1:
            continue
        starts = [s + k * stride * item for s in starts for k in range(size)]
        extent += (size - 1) * stride * item
    ordered = tuple(sorted(set(starts)))
    return Span(ordered[0], ordered[-1] + item, item, ordered)


class Region(NamedTuple):
    """A named allocation: ``[lo, hi)`` in its address space, elements of ``item`` bytes."""

    name: str
    kind: str           # "pinned" | "device"
    lo: int
    hi: int
    item: int
    owner: object = None   # what the region belongs to (a buffer), for its listeners
    row: int = 0           # elements per row of a contiguous tensor of 2 dimensions, else 0

    def first(self, span: Span) -> int:
        """The slot where ``span`` starts (an empty span too)."""
        return (span.lo - self.lo) // self.item

    def slots(self, span: Span) -> tuple[int, ...]:
        """The elements of this region that ``span`` covers, as indices from its start."""
        if span.empty:
            return ()
        lo, hi = max(span.lo, self.lo), min(span.hi, self.hi)
        if lo >= hi:
            return ()
        if span.elements is None:
            first = (lo - self.lo) // self.item
            last = (hi - self.lo + self.item - 1) // self.item
            return tuple(range(first, last))
        return tuple(sorted({(a - self.lo) // self.item for a in span.elements
                             if self.lo <= a < self.hi}))


class Regions:
    """Named regions by address (device and host regions never share an address in one
    run: the model keeps every allocation alive until it ends)."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._regions: list[Region] = []
        self._reach: list[int] = []      # _reach[k]: the largest hi of regions 0..k

    def add(self, region: Region) -> Region:
        """Add ``region``; one at the same address is replaced (a name given to an
        allocation the model registered), one inside another is found first."""
        k = bisect.bisect_left(self._starts, region.lo)
        if k < len(self._starts) and self._starts[k] == region.lo \
                and self._regions[k].hi == region.hi:
            self._regions[k] = region
            return region
        k = bisect.bisect_right(self._starts, region.lo)
        self._starts.insert(k, region.lo)
        self._regions.insert(k, region)
        # ``_reach`` is a running maximum: the regions after ``k`` keep theirs, raised to
        # the new region's end where it was below it (only up to the first that reaches
        # as far already: from there on every one does)
        reach, hi = self._reach, region.hi
        reach.insert(k, max(reach[k - 1], hi) if k else hi)
        for j in range(k + 1, len(reach)):
            if reach[j] >= hi:
                break
            reach[j] = hi
        return region

    def at(self, address: int) -> Region | None:
        k = bisect.bisect_right(self._starts, address) - 1
        while k >= 0 and self._reach[k] > address:
            region = self._regions[k]
            if region.lo <= address < region.hi:
                return region
            k -= 1
        return None

    def of(self, span: Span) -> Region | None:
        """The region holding the first element of ``span`` (of an empty span: its
        address; None: memory the model has no name for)."""
        return self.at(span.lo)

    def __iter__(self):
        return iter(self._regions)
