"""What device work does while the model runs it: the reads of its arguments it is seen to
make (``read_by_work``: only those elements are compared with what the host meant), the
device memory it writes (``wrote``), and the log of what each launch read (``_work``).
A mixin of ``DeviceModel`` (``model.py``), which holds the state these methods use
(``running``, ``reads_log``, ``_writers``, ``memory``)."""

from __future__ import annotations

from stagecheck.oracles.device.ops import Op
from stagecheck.oracles.device.spans import _span, span_of

__all__ = ["DeviceWork", "take_torch"]

#: torch's ``DisableTorchFunction`` (set by ``take_torch`` when the first model is made)
_disabled = None


def take_torch(torch) -> None:
    """Keep what the methods below need of torch (called once, by ``model._take_torch``)."""
    global _disabled
    _disabled = torch._C.DisableTorchFunction


class DeviceWork:
    """Device work's reads and writes, as the model runs it."""

    def _work(self, op: Op, name: str, fn, reads: dict, where: tuple, scalars: dict):
        def run():
            with _disabled():
                op.seen = {k: t.tolist() for k, t in reads.items()}   # host memory here
            entry = {**scalars, **op.seen}
            self.reads_log.append((where, name, entry))
            fn()
            self._only_touched(op, op.seen)
            entry.update(op.seen)
        return run

    def read_by_work(self, tensors: list) -> None:
        """Device work being run read ``tensors``: the elements of its 1-D arguments they
        cover are noted (``op.touched``), so that what it read is compared only there.
        An argument read whole leaves ``op.reading`` (nothing more to note of it)."""
        op = self.running
        if op is None or not op.reading:
            return
        reading = op.reading
        low, high = op.bounds
        with _disabled():       # metadata only
            for t in tensors:
                if t.is_contiguous():       # its span, as ``span_of`` gives it
                    size = t.nbytes
                    if size == 0:
                        continue
                    lo = t.data_ptr()
                    hi, elements = lo + size, None
                else:
                    span = _span(t)
                    lo, hi, elements = span.lo, span.hi, span.elements
                    if hi <= lo:
                        continue
                if hi <= low or high <= lo:
                    continue                # outside every argument (a temporary)
                for label, (arg, seen, count) in list(reading.items()):
                    if hi <= arg.lo or arg.hi <= lo:
                        continue            # no byte shared
                    item = arg.item
                    if elements is not None:    # only the elements inside the argument
                        seen.update((a - arg.lo) // item for a in elements
                                    if arg.lo <= a < arg.hi)
                    elif lo <= arg.lo and hi >= arg.hi:
                        seen.update(range(count))           # all of it
                    else:
                        seen.update(range((max(lo, arg.lo) - arg.lo) // item,
                                          (min(hi, arg.hi) - arg.lo + item - 1) // item))
                    if len(seen) >= count:
                        del reading[label]
                if not reading:
                    return

    def _only_touched(self, op: Op, values: dict) -> None:
        """In ``values`` (``{label: list}``), the elements of each 1-D argument that the
        work never read become None: what it did not read is not what it read."""
        for label, (_, seen) in op.touched.items():
            listed = values.get(label)
            if isinstance(listed, list) and len(seen) < len(listed):
                values[label] = [v if i in seen else None for i, v in enumerate(listed)]

    def wrote(self, t) -> None:
        """Device work being run wrote tensor ``t`` in place (seen while it runs): device
        memory (one of its arguments, or any device tensor) is noted as written by it."""
        op = self.running
        if op is not None:
            plain = type(t) is not self._device_type()
            if plain:
                lo = t.data_ptr()           # a plain tensor: outside every argument?
                for r in op.dev_reads:
                    if r.lo <= lo < r.hi:
                        break
                else:
                    if self.memory(t) != "device":
                        return
            span = span_of(t)
            if span.empty:
                return
            for r in op.dev_reads:
                if span.overlaps(r):
                    break
            else:
                if self.memory(t) != "device":
                    return                # a temporary of its own
            op.dev_writes.append(span)
            if op not in self._writers:
                self._writers.append(op)
