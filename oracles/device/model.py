"""The device model: what was issued to the device, what the host knows complete, races.

``DeviceModel`` is the one interface both implementations offer: the CPU model
(``cpu.py``: a deterministic simulation whose completion schedule the caller chooses) and
the CUDA backend (``cuda.py``: real pinned memory, streams and events). Oracles never ask
which one they got: they issue through it (``copy``, ``launch``, ``device_op``, the stream
and event calls), tell it about host accesses (``host_write``, ``host_read``), and read
back the same things from either (``hazards``, ``reads_log``, ``in_flight``).

What this base class does is the same for both: it classifies each copy (host to device,
device to host, device to device, pinned or pageable host memory), orders every operation
on its stream (``order.py``), keeps the host's knowledge of what completed, and raises the
four hazards (``spec.observation.HAZARD_KINDS``) at the access that races:

(i)   a host write into pinned memory an upload the host has not seen complete reads;
(ii)  a host read (or write) of pinned memory a download the host has not seen complete
      writes;
(iii) device work or a copy reading (or writing) device memory that an operation not
      ordered before it writes (or reads): a consumer reading a mirror whose upload is
      still pending on another stream, an upload overwriting what a kernel still reads;
(iv)  a pinned range handed to another copy that the stream order does not put after the
      copy still reading or writing it (a pinned buffer reused while its copy is pending).

A pinned tensor freed while its copy is pending is safe, as with PyTorch's caching host
allocator (which keeps the block until the copy's event completes): the model keeps every
allocation of a run alive until the run ends. A copy from pageable memory reads its source
when it is issued, as CUDA does (the host waits until the bytes are staged).
"""

from __future__ import annotations

from typing import Any, Callable

from stagecheck.oracles.device.forms import Pairs, mirror_copy
from stagecheck.oracles.device.intent import HostIntent
from stagecheck.oracles.device.ops import COPY_KINDS, EventState, Op, StreamState
from stagecheck.oracles.device.order import join
from stagecheck.oracles.device.races import RaceDetection
from stagecheck.oracles.device.work import DeviceWork, Passthrough, bytes_view, take_torch
from stagecheck.oracles.device.spans import Region, Regions, Span, _span, span_of
from stagecheck.oracles.device.torchload import import_torch
from stagecheck.spec.observation import Hazard, slot_text

__all__ = ["COPY_KINDS", "DeviceModel", "EventState", "Op", "StreamState"]


class DeviceModel(RaceDetection, HostIntent, DeviceWork):
    """The interface, and the ordering and race detection both implementations share."""

    #: "cpu-model" or "cuda": for reports only; oracles never branch on it
    kind = "model"

    def __init__(self) -> None:
        if _disabled is None:
            _take_torch()
        self.regions = Regions()
        self.order = "issue"   # ready work of several streams runs oldest first (or newest)
        self.hazards: list[Hazard] = []
        self.reads_log: list[tuple[str, str, dict]] = []   # (where, work, {arg: values})
        self.where = ""               # the caller's location, e.g. "step 2, prepare_inputs"
        self.location: tuple = ()     # the same as data, e.g. (2, "prepare_inputs")
        self.ops_issued = 0
        self._open: list[Op] = []     # copies and device work the host has not seen complete
        self._host: dict = {}         # the host's clock
        self._pruned = True           # ``_open`` holds nothing the host knows complete
        self._streams: dict[Any, StreamState] = {}
        self.pairs = Pairs(self.regions)   # paired buffers: copies into a mirror are told
        self._paired = False
        self.inside = False               # the model's own work runs: torch calls pass through
        self.running: Op | None = None    # device work being run (its writes are recorded)
        #: in a ``passthrough`` block of a model whose own reads of device memory must let
        #: held work run first (``reads_wait``): each torch call goes to ``checker_read``
        self.checking = False
        self.mismatches: list[dict] = []  # device work that read other than the host meant
        self.stale_reads: list[dict] = []  # host reads of pinned memory a download changed
        #: downloads into pinned memory as they landed (the CPU model): (op, values written)
        self.landed: list[tuple] = []
        #: uploads in issue order, by the storage of the device memory they write (memory
        #: of two storages never overlaps: every allocation lives until the run ends)
        self._uploads: dict[int, list[Op]] = {}
        self._sources: dict = {}      # of those storages, what the uploads read (``intent``)
        self._pending: dict = {}      # and the uploads the host may not know complete
        self._writers: list[Op] = []      # ops that wrote device memory, in issue order
        self._issued: list[Op] = []       # every copy and device work, in issue order
        self._work_ops: list[Op] = []     # device work launched, in launch order
        self._keep: list = []         # every allocation of the run stays alive until it ends
        #: ids of the tensors named after a path of the state (``name_region``): alive
        #: until the run ends (``_keep``), so an id names one tensor
        self.named_objects: set[int] = set()
        #: device memory named after a path of the state, by its bounds: ``(name, tensor,
        #: storage address)``; what device work may read besides its arguments (``launch``)
        self._state_device: dict[tuple[int, int], tuple] = {}
        self._pinned_count = 0
        self.pinned_downloads = 0     # downloads into pinned memory issued

    # ================================================================ implemented below
    def memory(self, t) -> str:
        """``device``, ``pinned`` or ``pageable``: where tensor ``t`` lives."""
        raise NotImplementedError

    def current(self) -> StreamState:
        raise NotImplementedError

    def _submit(self, op: Op) -> None:
        """Hand ``op`` to the device (the CPU model queues it; CUDA runs its action)."""
        raise NotImplementedError

    def _complete(self, op: Op) -> None:
        """Return once ``op`` has executed."""
        raise NotImplementedError

    def _complete_all(self) -> None:
        raise NotImplementedError

    def empty_device(self, shape, dtype):
        raise NotImplementedError

    def empty_pinned(self, shape, dtype):
        raise NotImplementedError

    def in_flight(self) -> int:
        """Copies issued and not yet executed (the CPU model: its queues; CUDA: by event)."""
        raise NotImplementedError

    # ================================================================ memory
    def name_region(self, t, name: str, owner: Any = None, kind: str | None = None) -> Region:
        """Call the memory of ``t`` ``name`` in reports. ``kind``: ``device`` or ``pinned``
        (default: what ``memory`` says, pinned for host memory); ``owner``: told of copies
        of its host region into its device region, ``on_copy(start, stop)``."""
        with _disabled():       # its span and shape, read at once
            span, shape = _span(t), t.shape
        kind = kind or ("device" if self.memory(t) == "device" else "pinned")
        # (row, column) in a 2-D table; more dimensions are said as flat offsets
        row = shape[-1] if len(shape) == 2 and span.elements is None else 0
        region = self.regions.add(Region(name, kind, span.lo, max(span.hi, span.lo + 1),
                                         span.item, owner, row))
        self._keep.append(t)
        self.named_objects.add(id(t))
        if kind == "device" and span.elements is None and region.hi > region.lo:
            with _disabled():
                self._state_device[(region.lo, region.hi)] = (
                    name, t, t.untyped_storage().data_ptr())
        return region

    def _new_pinned_region(self, t) -> None:
        self._pinned_count += 1
        self.name_region(t, f"pinned tensor {self._pinned_count}")
        self.named_objects.discard(id(t))     # named by the counter, not after a path

    def describe(self, span: Span) -> tuple[str, tuple[int, ...]]:
        return self.describe_in_rows(span)[:2]

    def describe_in_rows(self, span: Span) -> tuple[str, tuple[int, ...], int]:
        """``describe`` and the elements per row of the memory (``Region.row``; 0 for
        memory of one dimension or without a name), to say its slots as (row, column)."""
        region = self.regions.of(span)
        if region is None:
            return "an unnamed tensor", (), 0
        slots = region.slots(span)
        return region.name, slots, region.row if slots else 0

    # ================================================================ issuing
    def _issue(self, kind: str, what: str, stream: StreamState | None = None) -> Op:
        stream = stream or self.current()
        self.ops_issued += 1
        op = Op(self.ops_issued, kind, stream, what, self.where)
        op.location = self.location
        stream.seq += 1
        op.seq = stream.seq
        op.clock = dict(stream.clock)
        op.clock[stream.id] = op.seq
        stream.clock[stream.id] = op.seq
        return op

    def _start(self, op: Op, blocking: bool = False) -> None:
        """Check ``op`` against what is open, open it, hand it to the device; a blocking
        one is waited for (and the host then knows it, and all before it, complete)."""
        if op.snapshot is not None:        # pinned bytes an earlier download may still write
            self._note_device_owned(op)
        if op.kind in COPY_KINDS or op.kind == "kernel":
            self._race_at_issue(op)
            self._open.append(op)
            self._issued.append(op)
            if op.dev_writes or op.kind == "kernel":
                self._writers.append(op)
        self._submit(op)
        if blocking:
            self._complete(op)
            self._learn(op.clock)

    def copy(self, dst, src, non_blocking: bool = False, to: str | None = None,
             frm: str | None = None):
        """``dst.copy_(src, non_blocking=...)`` on the current stream; returns ``dst``
        (``to``, ``frm``: ``memory`` of ``dst`` and ``src``, where the caller has them)."""
        if to is None:
            to = self.memory(dst)
        if frm is None:
            frm = self.memory(src)
        if to != "device" and frm != "device":          # host to host: the host does it
            self.host_read(span_of(src), "a host copy")
            self.host_write(span_of(dst), "a host copy")
            self._raw_copy(dst, src)
            return dst
        with _disabled():       # the spans of both sides, read once
            dst_span, src_span = _span(dst), _span(src)
        if to == "device" and frm != "device":
            blocking = not (non_blocking and frm == "pinned")
            op = self._upload(dst, src, frm == "pinned", not blocking, dst_span, src_span)
        elif frm == "device" and to != "device":
            blocking = not (non_blocking and to == "pinned")
            op = self._download(dst, src, not blocking, dst_span, src_span, to)
        else:
            blocking = False
            op = self._issue("d2d", lambda: f"{self._name(src)} -> {self._name(dst)}")
            op.dev_reads, op.dev_writes = [src_span], [dst_span]
            op.action = lambda: self._raw_copy(dst, src, True)
        if self._paired and op.kind != "d2h":
            self._note_mirror_copy(dst, src, op.kind, dst_span, src_span)
        self._start(op, blocking)
        return dst

    def _upload(self, dst, src, pinned: bool, non_blocking: bool, dst_span: Span,
                src_span: Span) -> Op:
        op = self._issue("h2d", lambda: f"{self._name(src)} -> {self._name(dst)}")
        op.dev_writes = [dst_span]
        with _disabled():
            storage = dst.untyped_storage().data_ptr()
            op.fast = bytes_view(src)
            snapshot = None if pinned and op.fast is not None else src.clone()  # _snapshot
        self._note_upload(storage, op)
        op.snapshot = (snapshot, src)
        if pinned:
            op.host_reads = [src_span]
            # the DMA reads host memory when the copy runs, not when it was issued
            op.action = lambda: self._raw_copy(dst, src, non_blocking)
        else:
            op.action = lambda: self._raw_copy(dst, snapshot, non_blocking)  # staged now
        return op

    def _download(self, dst, src, non_blocking: bool, dst_span: Span, src_span: Span,
                  to: str) -> Op:
        op = self._issue("d2h", lambda: f"{self._name(src)} -> {self._name(dst)}")
        op.dev_reads = [src_span]
        if to == "pinned":
            self.pinned_downloads += 1
            self.sweep()          # host writes so far, before the device may write there too
            span = dst_span
            op.host_writes = [span]
            with _disabled():         # what the host held when it issued it (``_snapshot``)
                op.fast = bytes_view(dst)
                op.snapshot = (None if op.fast is not None else dst.clone(), dst)
            for other in self._still_open():          # bytes the device may now change
                if other.snapshot is not None:
                    for h in other.host_reads + other.host_writes:
                        if h.overlaps(span):
                            other.device_owned.append(span)
                            break
        op.action = lambda: self._raw_copy(dst, src, non_blocking)
        return op

    def to_device(self, src, dtype=None, non_blocking: bool = False):
        """``src.to(device, dtype, non_blocking)`` of a host tensor: a new device tensor."""
        out = self.empty_device(tuple(src.shape), dtype or src.dtype)
        self.copy(out, src, non_blocking)
        return out

    def to_host(self, src, dtype=None, non_blocking: bool = False):
        """``src.to("cpu", non_blocking)`` / ``.cpu()`` of a device tensor. As in PyTorch,
        a non-blocking one lands in fresh pinned memory and does not wait."""
        shape, dtype = tuple(src.shape), dtype or src.dtype
        out = self.empty_pinned(shape, dtype) if non_blocking else self._empty_host(shape, dtype)
        self.copy(out, src, non_blocking)
        return out

    def launch(self, name: str, fn: Callable[[], Any], reads: dict, writes: tuple = (),
               scalars: dict | None = None, pinned: dict | None = None):
        """Device work ``name`` on the current stream: ``fn()`` runs when the device runs
        it; ``reads`` (``{label: device tensor}``) are the tensors it reads, whose values
        then are logged in ``reads_log`` (with ``scalars``, plain arguments, as given);
        ``writes`` the device tensors it is known to write (what it writes is also seen
        while it runs). What the host meant each read element to hold is noted now: the
        value of the host memory the last upload into it (issued before now) reads.
        ``pinned`` (``{label: host tensor}``): pinned memory it reads in place (UVA,
        ``_read_directly``), meant to hold what it holds now, compared where read and
        never logged (as the state's memory it was not given)."""
        direct = [(k, t, self._read_directly(t, name)) for k, t in (pinned or {}).items()]
        op = self._issue("kernel", name)
        touched, reading, intents, index, low, high = {}, {}, {}, op.index, 2**64, 0

        def note(label: str, t, later: bool = False, read=None) -> Span:
            """What the work may read of ``t``: its span, where its reads are noted, and
            what the host meant it to hold (``later``: worked out only if it reads it;
            ``read``: the op reading ``t`` in place, ``_read_directly``)."""
            nonlocal low, high
            numel = t.numel()
            if numel and t.is_contiguous():     # its span, as ``_span`` gives it
                item, lo = t.element_size(), t.data_ptr()
                span = Span(lo, lo + numel * item, item)
                if t.dim():       # its elements read are noted, flat (row-major)
                    touched[label] = reading[label] = (span, set(), numel)
                    low, high = min(low, lo), max(high, span.hi)
                intents[label] = self._intent_in_place(read, numel, lo, item) if read \
                    else (self._intent_later if later else self._intent)(
                        index, numel, item, lo, t.untyped_storage().data_ptr())
            else:       # empty or not contiguous: nothing meant is noted
                span, intents[label] = _span(t), None
            return span

        with _disabled():       # each argument's metadata, read once
            spans = [note(label, t) for label, t in reads.items()]
            held = self._held_by_state(reads, spans)
            for label, t in held.items():      # compared where read, never logged
                note(label, t, self.defers_held)
            for label, t, read in (d for d in direct if d[0] not in held):
                note(label, t, read=read)
                held[label] = t
        op.dev_reads = spans
        op.dev_writes = [span_of(t) for t in writes] if writes else []
        op.intents, op.touched, op.reading = intents, touched, reading
        if touched:
            op.bounds = (low, high)
        op.action = self._work(op, name, fn, {**reads, **held} if held else reads,
                               self.location, dict(scalars or {}), tuple(held))
        self._work_ops.append(op)
        self._start(op)
        return op

    def _device_type(self):
        """The class of device tensors, where the model has one (the CPU model's)."""
        return None

    # ================================================================ streams and events
    def stream_state(self, handle: Any, key: Any) -> StreamState:
        state = self._streams.get(key)
        if state is None:
            state = self._streams[key] = StreamState(len(self._streams), handle)
        return state

    def record(self, event_state: EventState, stream: StreamState | None = None) -> Op:
        op = self._issue("record", "event", stream)
        event_state.clock, event_state.record = dict(op.clock), op
        self._submit(op)
        return op

    def wait_event(self, stream: StreamState, event_state: EventState) -> None:
        if event_state.clock is None:
            return                     # never recorded: nothing to wait for
        op = self._issue("wait", "event", stream)
        op.waits_for = event_state.record
        stream.clock = join(stream.clock, event_state.clock)
        op.clock = join(op.clock, event_state.clock)
        self._submit(op)

    def wait_stream(self, stream: StreamState, other: StreamState) -> None:
        if stream is other or other.seq == 0:
            return
        marker = EventState()
        self.record(marker, other)
        self.wait_event(stream, marker)

    def sync_event(self, event_state: EventState) -> None:
        if event_state.clock is None:
            return
        self.sweep()
        self._complete(event_state.record)
        self._learn(event_state.clock)

    def query_event(self, event_state: EventState, done: bool) -> bool:
        """``done``: whether the device has run the event's record; True teaches the host."""
        if event_state.clock is None:
            return True
        if done:
            self._learn(event_state.clock)
        return done

    def sync_stream(self, stream: StreamState) -> None:
        self.sweep()
        if stream.queue or stream.seq:
            last = stream.queue[-1] if stream.queue else None
            if last is not None:
                self._complete(last)
        self._learn(stream.clock)

    def sync_all(self) -> None:
        self.sweep()
        self._complete_all()
        for stream in list(self._streams.values()):
            self._learn(stream.clock)

    def release(self) -> None:
        """The run is over (``finish``) and what it showed was read: let go of its
        operations, streams and memory. Their actions and names refer back to the model,
        so without this they would be freed only by the garbage collector, all at once."""
        for stream in self._streams.values():
            stream.queue = []
            stream.handle = None
        for op in self._issued:
            op.action = None
        self._streams = {}
        self._open, self._issued, self._writers, self._work_ops = [], [], [], []
        self._uploads, self._sources, self._pending = {}, {}, {}
        self._keep = []
        self.named_objects = set()
        self._state_device = {}
        self.regions = Regions()
        self.pairs = Pairs(self.regions)
        self.running = None

    # ================================================================ internals
    def _name(self, t) -> str:
        span = span_of(t)
        region = self.regions.of(span)
        if region is None:
            with _disabled():
                shape = list(t.shape)
            return f"{self.memory(t)} tensor{shape}"
        slots = region.slots(span)
        if not slots:
            return f"{region.name}[]"
        whole, row = len(slots) == slots[-1] - slots[0] + 1, region.row
        if row and whole and not slots[0] % row and not len(slots) % row:    # whole rows
            return f"{region.name}[{slots[0] // row}:{(slots[-1] + 1) // row}, :]"
        if row:
            more = " ..." if len(slots) > 8 else ""      # part of rows: (row, column) pairs
            return f"{region.name}{slot_text(slots, row)[:-1]}{more}]"
        return (f"{region.name}[{slots[0]}:{slots[-1] + 1}]" if whole
                else f"{region.name}{list(slots)}")

    def pair(self, buffer, host, mirror) -> None:
        """``host`` (pinned) and ``mirror`` (device) are the two sides of ``buffer``
        (regions ``NAME.cpu`` and ``NAME.gpu``): every copy of host slots into the same
        mirror slots, in any form, calls ``buffer.on_copy(start, stop)``."""
        self.pairs.add(buffer, span_of(host), span_of(mirror))
        self._keep += [host, mirror]
        self._paired = True

    def _note_mirror_copy(self, dst, src, kind: str, to: Span, frm: Span) -> None:
        """A copy of ``src`` (span ``frm``) into ``dst`` (``to``) of kind ``h2d`` or
        ``d2d``: a paired buffer's mirror copy is told to the buffer."""
        found = mirror_copy(self.pairs, to, frm)
        if found is not None:
            buffer, start, stop = found
            buffer.on_copy(start, stop)
        elif kind == "h2d" and self.regions.of(to) is None:
            self.pairs.made_from(dst, src)    # a device tensor made from a host range

    # ---------------------------------------------------------------- torch helpers
    #: whether the checker's own read of device memory waits for work the model holds
    #: back (the CUDA backend's gates); the CPU model reads its memory as it is
    reads_wait = False

    def passthrough(self):
        """A block whose torch calls the model neither sees nor orders (the checker's own
        reads of the state)."""
        return Passthrough(self)

    def checker_read(self, func, args) -> None:
        """A torch call in a ``passthrough`` block, where ``reads_wait``."""

    def _run_now(self, op: Op, run: Callable[[], Any]):
        raise NotImplementedError

    @staticmethod
    def _raw_copy(dst, src, non_blocking: bool = False) -> None:
        with _disabled():
            dst.copy_(src, non_blocking=non_blocking)

    @staticmethod
    def _clone(t):
        with _disabled():
            return t.clone()

    @staticmethod
    def _values(t):
        with _disabled():
            return t.tolist()             # host memory in this model: no copy to make

    def _empty_host(self, shape, dtype):
        torch = import_torch()
        with torch._C.DisableTorchFunction():
            return torch.empty(shape, dtype=dtype)


_disabled = None


def _take_torch() -> None:
    global _disabled
    torch = import_torch()
    _disabled = torch._C.DisableTorchFunction
    take_torch(torch)

