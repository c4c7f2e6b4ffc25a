"""What device work does while the model runs it: the reads of its arguments it is seen to
make (``read_by_work``: only those elements are compared with what the host meant), the
device memory it writes (``wrote``), and the log of what each launch read (``_work``);
torch operations the host issues on device tensors (``device_op``), and pinned memory
device work reads in place (``_read_directly``). A mixin of ``DeviceModel`` (``model.py``), which holds the state these methods use
(``running``, ``reads_log``, ``_writers``, ``memory``)."""

from __future__ import annotations

from typing import Any, Callable

from stagecheck.oracles.device.ops import Op
from stagecheck.oracles.device.spans import Span, _span, span_of

__all__ = ["PICKED_MAX", "DeviceWork", "Passthrough", "bytes_view", "offsets_of", "take_torch"]

#: torch's ``DisableTorchFunction`` (set by ``take_torch`` when the first model is made)
_disabled = None
#: the dtypes whose equal values have equal bytes (``bytes_view``)
_EXACT: frozenset = frozenset()


#: ``torch.Tensor`` and ``torch.arange`` (``take_torch``)
_Tensor = _arange = None
#: the dtypes of an index that is a mask (``take_torch``)
_MASKS: frozenset = frozenset()
#: the most elements a tensor may span for the elements an advanced index picks of it to
#: be found one by one (``read_picked``); a larger one is read whole
PICKED_MAX = 1 << 20


def take_torch(torch) -> None:
    """Keep what the methods below need of torch (called once, by ``model._take_torch``)."""
    global _disabled, _EXACT, _Tensor, _arange, _MASKS
    _disabled = torch._C.DisableTorchFunction
    _Tensor, _arange = torch.Tensor, torch.arange
    _MASKS = frozenset({torch.bool, torch.uint8})
    _EXACT = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
                        torch.int64})


class DeviceWork:
    """Device work's reads and writes, as the model runs it."""

    def device_op(self, run: Callable[[], Any], name: str, reads: list, writes: list,
                  waits: bool = False):
        """A torch operation on device tensors that the host issued (arithmetic, a fill, an
        index): ordered on the current stream like any kernel. It runs at once, after what
        is queued ahead of it on that stream (one of the orders the stream allows).
        ``waits``: one whose result's shape depends on the device's data (``unique``,
        ``nonzero``, a boolean mask): the host waits for the stream up to it, and then
        knows all of that complete."""
        op = self._issue("kernel", name)
        op.dev_reads = [span_of(t) for t in reads]
        op.dev_writes = [span_of(t) for t in writes]
        self._race_at_issue(op)
        self._open.append(op)
        if op.dev_writes:
            self._writers.append(op)
        if not waits:
            return self._run_now(op, run)
        self._host_waits_for(op)
        result = self._run_now(op, run)
        self._learn(op.clock)
        return result

    def _host_waits_for(self, op: Op) -> None:
        """The host is about to wait for ``op``'s stream up to ``op`` (CUDA: let it run)."""

    def _read_directly(self, t, name: str) -> Op:
        """Device work ``name`` reads pinned host memory ``t`` itself (on CUDA, through a
        device view of pinned memory: vLLM's UVA buffers): an upload with no device side,
        issued with the work and complete when the work has run, which the host must see
        complete before it writes that memory again (a write before is a race, as with
        any upload's source)."""
        with _disabled():
            span = _span(t)
            fast = bytes_view(t)
            snapshot = None if fast is not None else t.clone()
        op = self._issue("h2d", lambda: f"{self._name(t)} -> device work {name} (read in "
                                        f"place, not copied)")
        op.fast, op.snapshot, op.host_reads = fast, (snapshot, t), [span]
        op.action = _nothing
        self._start(op)
        return op

    def _work(self, op: Op, name: str, fn, reads: dict, where: tuple, scalars: dict,
              held: tuple = ()):
        """The action of device work ``op``: ``reads`` its arguments and the state's
        memory it may read (``held``: their labels, compared but not logged)."""
        def run():
            with _disabled():
                op.seen = {k: t.tolist() for k, t in reads.items()}   # host memory here
            entry = {**scalars, **_logged(op.seen, held)}
            self.reads_log.append((where, name, entry))
            fn()
            for label in held:      # the state's memory it never read: nothing to compare
                noted = op.touched.get(label)
                if noted is None or not noted[1]:
                    del op.seen[label]
            self._only_touched(op, op.seen)
            entry.update(_logged(op.seen, held))
        return run

    def read_by_work(self, tensors: list) -> None:
        """Device work being run read ``tensors``: the elements of its contiguous arguments
        they cover are noted (``op.touched``), so that what it read is compared only there.
        An argument read whole leaves ``op.reading`` (nothing more to note of it)."""
        op = self.running
        if op is None or not op.reading:
            return
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
                if not _note_read(op, lo, hi, elements):
                    return

    def read_picked(self, t, key) -> None:
        """``t[key]`` in device work, ``key`` holding tensors (an advanced index, a block
        table indexed by request and block): the key's tensors are read whole, and of
        ``t`` only the elements the key picks, found by indexing the positions of ``t``'s
        elements with the same key (``_picked``)."""
        keys = key if type(key) in (tuple, list) else (key,)
        tensors = [k for k in keys if isinstance(k, _Tensor)]
        self.read_by_work(tensors)
        op = self.running
        if op is None or not op.reading:
            return
        positions = _positions(t, key, tensors, self._positions_on(t))
        if positions is None:
            self.read_by_work([t])
        else:
            with _disabled():
                lo, item = t.data_ptr(), t.element_size()
            self._picked(op, lo, item, positions)

    def wrote_picked(self, t, key) -> None:
        """``t[key] = value`` in device work, ``key`` holding tensors (a scatter into a KV
        cache by block and offset): only the elements the key picks are written, found as
        ``read_picked`` finds those it reads (``_wrote_at``); a mask or a key torch refuses
        notes ``t`` whole."""
        keys = key if type(key) in (tuple, list) else (key,)
        tensors = [k for k in keys if isinstance(k, _Tensor)]
        positions = _positions(t, key, tensors, self._positions_on(t))
        if positions is None:
            self.wrote(t)
        else:
            self._wrote_at(t, positions)

    def _wrote_at(self, t, positions) -> None:
        """Device work wrote the elements of ``t`` at ``positions`` (a tensor of element
        offsets from its first; the CUDA backend, whose positions are computed on the
        device, judges them when the run finishes: ``races_at_end.py``)."""
        with _disabled():
            found = offsets_of(positions)
            lo, item = t.data_ptr(), t.element_size()
        if found:
            self.wrote(t, Span.of_elements(lo, item, found))

    def _positions_on(self, t):
        """The device ``read_picked`` finds ``t``'s elements on (the CPU model's device
        memory is host memory)."""
        return None

    def _picked(self, op: Op, lo: int, item: int, positions) -> None:
        """Note the elements at ``positions`` (a tensor of element offsets from ``lo``) as
        read by ``op`` (the CUDA backend, whose positions are computed on the device
        later, notes them when the run finishes)."""
        with _disabled():
            found = offsets_of(positions)
        if found:
            read = Span.of_elements(lo, item, found)
            _note_read(op, read.lo, read.hi, read.elements)

    def _only_touched(self, op: Op, values: dict) -> None:
        """In ``values`` (``{label: list}``, nested for more dimensions), the elements of
        each argument that the work never read become None: what it did not read is not
        what it read (a stale row of a block table the work does not index)."""
        for label, (_, seen, numel) in op.touched.items():
            listed = values.get(label)
            if isinstance(listed, list) and len(seen) < numel:
                values[label] = _blanked(listed, seen, [0])

    def wrote(self, t, span: Span | None = None) -> None:
        """Device work being run wrote tensor ``t`` in place (seen while it runs): device
        memory (one of its arguments, or any device tensor) is noted as written by it
        (``span``: the elements of ``t`` written, where not all of them)."""
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
            span = span or span_of(t)
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


def _positions(t, key, tensors: list, device):
    """The offset from ``t``'s first element of each element ``t[key]`` picks (a tensor on
    ``device``, shaped as ``t[key]``), or None where they are not found one by one: a mask
    (on CUDA what it picks is known only by waiting for it), a tensor spanning more than
    ``PICKED_MAX`` elements, a key torch refuses (it raises for the code too)."""
    with _disabled():
        shape, strides = t.shape, t.stride()
        extent = 1 + sum((n - 1) * k for n, k in zip(shape, strides))  # elements spanned
        if not t.numel() or extent > PICKED_MAX or any(k.dtype in _MASKS for k in tensors):
            return None
        try:
            return _arange(extent, device=device).as_strided(shape, strides)[key]
        except Exception:
            return None


def offsets_of(positions) -> list[int]:
    """The distinct element offsets a tensor of positions (``_positions``) holds, sorted:
    on the host (torch function handling off in the caller)."""
    return sorted(set(positions.reshape(-1).tolist()))


def _logged(seen: dict, held: tuple) -> dict:
    """What device work read of its arguments: ``seen`` without the state's memory it
    was not given (``held``), which is compared with what the host meant, not logged
    (two targets may name it differently)."""
    return {k: v for k, v in seen.items() if k not in held} if held else seen


def _note_read(op: Op, lo: int, hi: int, elements) -> bool:
    """Note bytes ``[lo, hi)`` (``elements``: each element's start address, where not
    every byte is read) as read by ``op``; whether an argument is still not read whole."""
    reading = op.reading
    low, high = op.bounds
    if hi <= low or high <= lo:
        return True                 # outside every argument (a temporary)
    for label, (arg, seen, count) in list(reading.items()):
        if hi <= arg.lo or arg.hi <= lo:
            continue            # no byte shared
        item = arg.item
        if elements is not None:    # only the elements inside the argument
            seen.update((a - arg.lo) // item for a in elements if arg.lo <= a < arg.hi)
        elif lo <= arg.lo and hi >= arg.hi:
            seen.update(range(count))           # all of it
        else:
            seen.update(range((max(lo, arg.lo) - arg.lo) // item,
                              (min(hi, arg.hi) - arg.lo + item - 1) // item))
        if len(seen) >= count:
            del reading[label]
    return bool(reading)


def _blanked(listed: list, seen: set, at: list) -> list:
    """``listed`` (nested lists in row-major order) with each element whose flat index
    (``at[0]`` onwards) is not in ``seen`` replaced by None."""
    if listed and type(listed[0]) is list:
        return [_blanked(row, seen, at) for row in listed]
    start = at[0]
    at[0] = start + len(listed)
    return [v if start + i in seen else None for i, v in enumerate(listed)]


def bytes_view(now):
    """``Op.fast`` of a copy's pinned memory ``now`` at issue: for integer and bool memory
    (equal values exactly where the bytes are, as ``torch.equal`` says) its key, bytes now
    and a flat numpy view; None for floats (NaN, -0.0: ``torch.equal`` against a copy,
    ``Op.snapshot``). Torch function handling is off in the caller."""
    if now.dtype not in _EXACT or not now.is_contiguous() or now.requires_grad:
        return None
    try:
        view = now.numpy().reshape(-1)      # flat: what is meant reads it by position
        return (now.data_ptr(), view.nbytes, now.dtype), view.tobytes(), view
    except (TypeError, RuntimeError):
        return None


def _nothing() -> None:
    """The action of a read in place: the work reads the memory when it runs."""


class Passthrough:
    """``DeviceModel.passthrough``'s block: the model sees and orders none of its torch
    calls (the checker's own reads of the state)."""

    def __init__(self, model) -> None:
        self.model, self.saved = model, None

    def __enter__(self):
        model = self.model
        self.saved = (model.inside, model.running, model.checking)
        model.inside, model.running, model.checking = True, None, model.reads_wait
        return model

    def __exit__(self, *exc) -> None:
        self.model.inside, self.model.running, self.model.checking = self.saved
