"""What the host meant device work to read, and what it read.

When device work is launched, the model notes, for each element it reads, the value of the
host memory that the last upload into that element (issued before the launch) reads: what
the host meant the work to see. After the run, every element that no operation wrote
between that upload and the launch must have been read with that value; the others are
``mismatches`` (a consumer launched before the uploads it reads, an upload that ran late
and read bytes the host wrote after the launch).
"""

from __future__ import annotations

from stagecheck.oracles.device.spans import Span
from stagecheck.oracles.device.torchload import import_torch

__all__ = ["HostIntent"]

#: a source of at most this many elements is read whole (cheaper than a view of it)
SMALL = 256
_DISABLED = None


class HostIntent:
    """Mixin of ``DeviceModel``: what the host meant (module doc)."""

    def _intent(self, t, before: int, shape: tuple | None = None):
        """For each element of device tensor ``t`` (contiguous): the value of the host
        memory that the last upload into it, issued before op ``before``, reads, and that
        upload's index (None, None where no upload wrote it). ``shape``: ``(contiguous,
        numel, element size, storage address)`` of ``t``, where the caller read them."""
        global _DISABLED
        if _DISABLED is None:
            _DISABLED = import_torch()._C.DisableTorchFunction
        with _DISABLED():
            if shape is None:
                contiguous, count = t.is_contiguous(), t.numel()
                storage = t.untyped_storage().data_ptr() if contiguous and count else None
                shape = (contiguous, count, t.element_size(), storage)
            contiguous, count, item, storage = shape
            if not contiguous or count == 0:
                return None
            uploads = self._uploads.get(storage)
            lo = t.data_ptr()
            values: list = [None] * count
            sources: list = [None] * count
            if not uploads:
                return values, sources, lo, item
            left = count
            end = lo + count * item
            for up in reversed(uploads):
                if left == 0:
                    break
                if up.index >= before:
                    continue
                dst = up.dev_writes[0]
                first, last = max(dst.lo, lo), min(dst.hi, end)
                if first >= last or dst.elements is not None or dst.item != item:
                    continue
                p0, p1 = (first - lo) // item, (last - lo) // item
                q0 = (first - dst.lo) // item
                fast = up.fast
                if fast is not None:    # integer memory: read through its numpy view
                    flat = fast[2].reshape(-1)
                    held = (flat.tolist()[q0:q0 + (p1 - p0)] if flat.size <= SMALL
                            else flat[q0:q0 + (p1 - p0)].tolist())
                    left = _take(values, sources, held, p0, p1, up.index, left, count)
                    continue
                src = up.snapshot[1]
                if not src.is_contiguous():
                    continue
                if src.numel() <= SMALL:      # all of it as a list, then the part wanted
                    held = (src.tolist() if src.dim() == 1 else
                            src.reshape(-1).tolist())[q0:q0 + (p1 - p0)]
                else:
                    flat = src if src.dim() == 1 else src.reshape(-1)
                    held = flat[q0:q0 + (p1 - p0)].tolist()
                left = _take(values, sources, held, p0, p1, up.index, left, count)
            return values, sources, lo, item

    def check_intents(self) -> None:
        """After the run: every device work against what the host meant (``mismatches``)."""
        for op in self._work_ops:
            for label, intent in op.intents.items():
                seen = op.seen.get(label)
                if intent is None or seen is None:
                    continue
                meant, sources, lo, item = intent
                flat = _flatten(seen)
                bad = []
                for p, (want, source) in enumerate(zip(meant, sources)):
                    if source is None or p >= len(flat) or flat[p] is None \
                            or flat[p] == want:     # None: an element the work never read
                        continue
                    if self._overwritten(lo + p * item, item, source, op.index):
                        continue
                    bad.append(p)
                if bad:
                    region, slots = self.describe(Span(lo + bad[0] * item,
                                                       lo + bad[-1] * item + item, item,
                                                       tuple(lo + p * item for p in bad)))
                    self.mismatches.append({
                        "where": op.location, "work": op.what, "arg": label,
                        "region": region, "slots": list(slots) or bad,
                        "meant": [meant[p] for p in bad], "read": [flat[p] for p in bad]})

    def _overwritten(self, address: int, item: int, after: int, before: int) -> bool:
        """Whether an op issued between ``after`` and ``before`` wrote ``address``."""
        probe = Span(address, address + item, item)
        for op in self._writers:
            if after < op.index < before and any(w.overlaps(probe) for w in op.dev_writes):
                return True
        return False


def _flatten(values) -> list:
    if type(values) is list and not any(issubclass(kind, list)
                                        for kind in set(map(type, values))):
        return values                     # flat already (the values of a 1-D tensor)
    if isinstance(values, list):
        out: list = []
        for v in values:
            out.extend(_flatten(v) if isinstance(v, list) else [v])
        return out
    return [values]


def _take(values: list, sources: list, held: list, p0: int, p1: int, index: int, left: int,
          count: int) -> int:
    """Positions ``p0 .. p1`` of ``values`` get ``held`` (what upload ``index`` wrote
    there) where no later upload was found for them yet; the count of positions left."""
    if left == count and len(held) == p1 - p0:      # nothing found yet: all new
        values[p0:p1] = held
        sources[p0:p1] = [index] * (p1 - p0)
        return left - (p1 - p0)
    for p in range(p0, p1):
        if sources[p] is None:
            values[p], sources[p] = held[p - p0], index
            left -= 1
    return left
