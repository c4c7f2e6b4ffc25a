"""Races of device work that the CUDA backend judges when the run ends, by element.

The CPU model runs device work itself, so it knows which elements the work read of each
argument, and which an assignment through tensors (``kv[blocks, offsets] = values``)
wrote, when it runs it. On CUDA the host issues the work at its launch, and the elements
an advanced index picks are computed on the device, behind the gates: they are known only
when the run ends. A race one of whose sides is such memory (an argument whose reads are
noted by element, or a scatter's destination) is therefore held, with where it was seen,
and judged at the end against the elements read or written, as the CPU model judges it: a
copy still loading another block of a KV cache the work scatters into, or an upload after
the launch into a block the work never indexed, is no race on either backend.
"""

from __future__ import annotations

from stagecheck.oracles.device.ops import Op
from stagecheck.oracles.device.races import _elements
from stagecheck.oracles.device.spans import Span, span_of
from stagecheck.oracles.device.work import offsets_of

__all__ = ["RacesAtEnd"]


class RacesAtEnd:
    """Mixin of ``CudaDevice`` (before ``DeviceModel`` in its bases): the races held until
    ``finish`` knows the elements device work read and wrote (module doc)."""

    def _hold_races(self) -> None:
        #: ``id(span)`` -> (the span, what stands for its elements: the device work and
        #: the argument span whose reads it notes, or the positions a scatter wrote, a
        #: device tensor, with the span's first address and element size)
        self._by_element: dict[int, tuple] = {}
        #: op index -> what ``_reads_so_far`` gives for it (made once)
        self._reads_of: dict[int, list] = {}
        #: (pending op, kind, held span, touched span, by, where it was seen)
        self._races_held: list[tuple] = []

    def _reads_so_far(self, op: Op) -> list[Span]:
        """What device work ``op`` may read, for a race with a write issued after its
        launch (and, as ``_reads_at_issue``, with one open at it): its arguments' spans,
        those whose reads it notes by element standing for the elements it read (copies
        of the spans, judged at the end)."""
        if op.kind != "kernel" or not op.touched:
            return op.dev_reads
        out = self._reads_of.get(op.index)
        if out is None:
            noted = {id(span) for span, _, _ in op.touched.values()}
            out = self._reads_of[op.index] = []
            for span in op.dev_reads:
                if id(span) in noted:
                    copy = span._replace()
                    self._by_element[id(copy)] = (copy, (op, span))
                    span = copy
                out.append(span)
        return out

    _reads_at_issue = _reads_so_far      # the same elements, in the other direction

    def _wrote_at(self, t, positions) -> None:
        with self._torch._C.DisableTorchFunction():
            span = span_of(t)
            self._by_element[id(span)] = (span, (span.lo, t.element_size(), positions))
        self.wrote(t, span)

    def _race(self, pending: Op, kind: str, held: Span, touched: Span, by: str,
              at: tuple = ()) -> None:
        by_element = self._by_element
        if by_element and (id(held) in by_element or id(touched) in by_element):
            if held.overlaps(touched):
                self._races_held.append((pending, kind, held, touched, by,
                                         tuple(at) or tuple(self.location)))
            return
        super()._race(pending, kind, held, touched, by, at)

    def _judge_held_races(self) -> None:
        """The run has ended and the device is idle (torch function handling off): each
        held race, judged against the elements now known (none shared: no race)."""
        held, by_element, exact = self._races_held, self._by_element, {}
        self._hold_races()
        for pending, kind, span, touched, by, at in held:
            span, touched = _exact(by_element, exact, span), _exact(by_element, exact, touched)
            if span is not None and touched is not None:
                super()._race(pending, kind, span, touched, by, at)


def _exact(by_element: dict, exact: dict, span: Span) -> Span | None:
    """The elements of ``span`` device work read or wrote (None: none), found once
    (``exact``); ``span`` itself where it is not judged by element."""
    key = id(span)
    entry = by_element.get(key)
    if entry is None:
        return span
    if key not in exact:
        what = entry[1]
        if isinstance(what[0], Op):
            op, argument = what
            seen = next((seen for noted, seen, _ in op.touched.values() if noted is argument),
                        None)
            exact[key] = span if seen is None else _elements(span, seen) if seen else None
        else:
            lo, item, positions = what
            found = offsets_of(positions.cpu())
            exact[key] = Span.of_elements(lo, item, found) if found else None
    return exact[key]
