"""The CUDA backend of the device model: real pinned memory, streams and events.

The same interface as the CPU model (``model.DeviceModel``), and the same ordering and race
detection: every copy, record, wait and synchronization the code under test makes is seen
(the interception mode of ``intercept.py``, and ``torch.cuda``'s ``Event``, ``Stream``,
``current_stream``, ``default_stream`` and ``synchronize`` wrapped while active) and runs
on the GPU as issued. What differs is who decides when things complete: the GPU, held by
the host. In ``lazy`` completion every copy and every piece of device work waits behind a
gate (``gate.py``) that the host opens where the program waits for the device (a
synchronization, a blocking copy, an event synchronized or polled), and then only the
gates of what it waits for (the operations its clock covers, ``order.py``), so each runs
at the latest point the program's own synchronization allows, as on the CPU model, and
really after the host went on; ``busy_cycles`` of device work (``torch.cuda._sleep``) may be
queued at each boundary between a protocol's operations on top. ``eager`` synchronizes
the device at every point where the host calls into it (every operation completes before
the host goes on: what the host meant); ``drain`` synchronizes once at the boundary.
Nothing else synchronizes between steps. Fresh memory from ``torch.empty`` holds the CPU
model's poison value, so the two read the same where nothing wrote.

Hazards are found on the host side as with the CPU model: the happens-before order of
streams and events (``order.py``), snapshots of uploaded host ranges taken at issue and
compared at every later call (a host write no interception saw), and for each copy a CUDA
event recorded after it, whose ``query`` says whether it is still in flight.
What device work read is cloned on its stream when it is launched, and read back when the
run ends; so are the elements an index by tensors picks, and a race that depends on them is
judged then (``races_at_end.py``).
"""

from __future__ import annotations

import sys
import time
from bisect import bisect_left, bisect_right
from contextlib import contextmanager

from stagecheck.oracles.device.cpu import QUERIES_BEFORE_PROGRESS, poison
from stagecheck.oracles.device.gate import StreamGates, where_in
from stagecheck.oracles.device.intercept import HOST_READS, DeviceMode
from stagecheck.oracles.device.model import COPY_KINDS, DeviceModel, EventState, Op
from stagecheck.oracles.device.order import covers
from stagecheck.oracles.device.races_at_end import RacesAtEnd
from stagecheck.oracles.device.standins import restore_names, swap_names
from stagecheck.oracles.device.torchload import import_torch
from stagecheck.oracles.device.work import _logged

__all__ = ["CudaDevice"]

_EMPTY = ("empty", "empty_like", "empty_strided")
#: device factories that copy no host data (the others wait for the stream, as CUDA does)
_NO_HOST_DATA = frozenset(_EMPTY + ("zeros", "zeros_like", "ones", "ones_like", "full",
                                    "full_like", "arange", "eye", "linspace", "randint",
                                    "rand", "randn", "randperm"))
#: calls that copy a device tensor to the host, besides the reads of ``HOST_READS``
_DOWNLOADS = frozenset({"cpu", "to", "copy_", "numpy"})


class CudaDevice(RacesAtEnd, DeviceModel):
    """The device model on a real CUDA device (see the module doc)."""

    kind = "cuda"
    reads_wait = True

    def __init__(self, completion: str = "lazy", busy_cycles: int = 0) -> None:
        super().__init__()
        torch = import_torch()
        self._torch = torch
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.completion = completion
        self.busy_cycles = busy_cycles
        self.inside = False
        self._real = {"Event": torch.cuda.Event, "Stream": torch.cuda.Stream,
                      "current_stream": torch.cuda.current_stream,
                      "default_stream": torch.cuda.default_stream,
                      "synchronize": torch.cuda.synchronize}
        self._pending_reads: list[tuple] = []
        self._picked_later: list[tuple] = []     # ``_picked``: (op, lo, item, positions)
        self.gates = StreamGates(torch)
        #: stream id -> (its driver handle, the sequence numbers of the operations a gate
        #: was put in front of, those gates' numbers), both growing
        self._gates_at: dict[int, tuple[int, list[int], list[int]]] = {}
        self._queries: dict[int, int] = {}          # record op index -> unfinished queries
        self._hold_races()

    # ---------------------------------------------------------------- memory
    def memory(self, t) -> str:
        with self._torch._C.DisableTorchFunction():
            if t.is_cuda:
                return "device"
            return "pinned" if t.is_pinned() else "pageable"

    def empty_device(self, shape, dtype):
        """Fresh device memory holding the CPU model's poison value (never what an earlier
        allocation left there), so that a read of memory nothing wrote shows alike."""
        with self._torch._C.DisableTorchFunction():
            t = self._torch.empty(shape, dtype=dtype, device=self.device)
            poison(self._torch, t)
            return t

    def empty_pinned(self, shape, dtype):
        with self._torch._C.DisableTorchFunction():
            t = self._torch.empty(shape, dtype=dtype, pin_memory=True)
            poison(self._torch, t)
        self._new_pinned_region(t)
        return t

    def make_device(self, func, args, kwargs):
        if getattr(func, "__name__", "") not in _NO_HOST_DATA:
            self.open_clock(self.current().clock)  # copied from pageable memory: the host waits
        with self._torch._C.DisableTorchFunction():
            made = func(*args, device=self.device, **kwargs)
            if getattr(func, "__name__", "") in _EMPTY:
                poison(self._torch, made)
            return made

    def make_pinned(self, func, args, kwargs):
        with self._torch._C.DisableTorchFunction():
            made = func(*args, pin_memory=True, **kwargs)
            if getattr(func, "__name__", "") in _EMPTY:
                poison(self._torch, made)
        self._new_pinned_region(made)
        return made

    def pinned(self, t):
        with self._torch._C.DisableTorchFunction():
            out = t.pin_memory()
        self._new_pinned_region(out)
        return out

    def as_device(self, t):
        with self._torch._C.DisableTorchFunction():
            return t.to(self.device)

    # ---------------------------------------------------------------- streams
    def _state_of(self, stream):
        return self.stream_state(stream, stream.cuda_stream)

    def current(self):
        return self._state_of(self._real["current_stream"]())

    # ---------------------------------------------------------------- gates
    def _start(self, op: Op, blocking: bool = False) -> None:
        """A blocking operation first opens every gate (the host waits for all before it
        on its stream); in ``lazy`` completion a copy or device work waits behind a gate
        of its own until the host waits for it (``gate.py``)."""
        if blocking:
            self.open_clock(op.clock)
        elif self.completion == "lazy" and (op.kind in COPY_KINDS or op.kind == "kernel"):
            handle = op.stream.handle.cuda_stream
            number = self.gates.hold(handle)
            if number:
                _, seqs, numbers = self._gates_at.setdefault(op.stream.id, (handle, [], []))
                seqs.append(op.seq)
                numbers.append(number)
        super()._start(op, blocking)

    def open_clock(self, clock: dict) -> None:
        """Open the gates in front of every operation ``clock`` covers (the host waits
        for them), and no other."""
        self.gates.open(self._gates_upto(clock))

    def _gates_upto(self, clock: dict) -> dict:
        """The gate number, by stream handle, of the last operation ``clock`` covers."""
        upto = {}
        for stream_id, seq in clock.items():
            gated = self._gates_at.get(stream_id)
            if gated is not None:
                handle, seqs, numbers = gated
                last = bisect_right(seqs, seq)
                if last:
                    upto[handle] = numbers[last - 1]
        return upto

    def checker_read(self, func, args) -> None:
        """The checker's own read of device memory (a protocol's ``observe`` calling
        ``t.tolist()``): on CUDA it waits for the current stream, so the gates of what
        that stream was issued open first, at once (not after the watchdog's stall), and
        are counted as opened early (``gates.forced``), where the read is. The model's
        order is not changed: the host program learnt nothing."""
        name = getattr(func, "__name__", "")
        if name not in HOST_READS and name not in _DOWNLOADS:
            return
        if not any(self.memory(t) == "device" for t in args
                   if isinstance(t, self._torch.Tensor)):
            return
        frame = sys._getframe(2)          # past the interception: the caller's read
        self.gates.opened_early(self._gates_upto(self.current().clock),
                                f"a read of device memory by the checker's call at "
                                f"{where_in(frame, 3)}")

    def _held(self, op: Op) -> bool:
        """Whether ``op`` still waits behind its gate (False: it had none)."""
        gated = self._gates_at.get(op.stream.id)
        if gated is None:
            return False
        handle, seqs, numbers = gated
        at = bisect_left(seqs, op.seq)
        return at < len(seqs) and seqs[at] == op.seq \
            and not self.gates.is_open(handle, numbers[at])

    def open_before(self, event_state: EventState) -> None:
        """Open the gates an event's record waits behind (the host waits for it)."""
        if event_state.clock is not None:
            self.open_clock(event_state.clock)

    def host_write(self, span, by: str) -> None:
        self.gates.last_call = time.monotonic()
        super().host_write(span, by)

    def host_read(self, span, by: str) -> None:
        self.gates.last_call = time.monotonic()
        super().host_read(span, by)

    def pending_reads(self, span):
        self.gates.last_call = time.monotonic()
        return super().pending_reads(span)

    # ---------------------------------------------------------------- running
    def _submit(self, op: Op) -> None:
        self.gates.last_call = time.monotonic()
        if op.action is not None:
            self.inside = True
            self.running = op if op.kind == "kernel" else None
            try:
                op.action()
            finally:
                self.inside = False
                self.running = None
            if op.kind == "kernel":
                self._writes_against_earlier(op)
        if op.kind in COPY_KINDS:
            op.event = self._real["Event"]()
            op.event.record()
        self.point()

    def point(self) -> None:
        if self.completion == "eager":
            self._real["synchronize"]()

    def boundary(self, completion: str) -> None:
        self.sweep()
        if completion in ("drain", "eager"):
            self.gates.open()
        if completion == "drain":
            self._real["synchronize"]()
            completion = "lazy"
        self.completion = completion
        if completion == "eager":
            self._real["synchronize"]()
        elif self.busy_cycles:
            self._torch.cuda._sleep(self.busy_cycles)

    def _complete(self, op: Op) -> None:
        """The wrapped call (a blocking copy, a synchronize) has already waited."""

    def _learn(self, clock: dict) -> None:
        """The host learnt ``clock``; a download it now knows landed is checked for values
        the host read before it did (the CPU model checks when it runs the download)."""
        super()._learn(clock)
        for op in self._open:
            if op.stale and self._known(op):
                self._check_stale(op)

    def release(self) -> None:
        self.gates.close()
        super().release()

    def _complete_all(self) -> None:
        self.gates.open()
        self._real["synchronize"]()

    def _host_waits_for(self, op: Op) -> None:
        self.open_clock(op.clock)

    def _run_now(self, op: Op, run):
        """A torch operation the host issued on device tensors, queued behind the gates of
        what is ahead of it. An upload still held behind its gate that it is ordered after
        and reads the destination of is marked (``Op.forced``, as the CPU model marks one
        it ran early): what the operation computes from it is not in the trace (only
        device_work's reads are), so a later host write racing with that upload cannot be
        shown harmless. An upload that has run (``eager``, ``drain``, its gate opened) is
        not marked, as the CPU model does not mark one it had run before."""
        if op.dev_reads:
            for o in self._still_open():
                if o.kind == "h2d" and not o.forced and self._held(o) \
                        and covers(op.clock, o.stream.id, o.seq) \
                        and any(r.overlaps(w) for r in op.dev_reads for w in o.dev_writes):
                    o.forced = op.what
        self.gates.last_call = time.monotonic()
        self.inside = True
        try:
            return run()
        finally:
            self.inside = False

    def _work(self, op: Op, name: str, fn, reads: dict, where: tuple, scalars: dict,
              held: tuple = ()):
        def run():
            with self._torch._C.DisableTorchFunction():
                op.seen = {k: t.detach().clone() for k, t in reads.items()}
            self._pending_reads.append((where, name, scalars, op, held))
            fn()
        return run

    def _landed(self, op: Op) -> bool:
        return op.event is None or op.event.query()

    def in_flight(self) -> int:
        return sum(1 for op in self._still_open()
                   if op.kind in COPY_KINDS and op.event is not None and not op.event.query())

    def query_event_now(self, state: EventState, done: bool) -> bool:
        """An event polled: after ``QUERIES_BEFORE_PROGRESS`` unfinished answers its gates
        open (a polling loop ends, as on the CPU model)."""
        self.sweep()
        if not done and state.record is not None:
            key = state.record.index
            self._queries[key] = self._queries.get(key, 0) + 1
            if self._queries[key] >= QUERIES_BEFORE_PROGRESS:
                self.open_before(state)
        return self.query_event(state, done)

    def _positions_on(self, t):
        return t.device

    def _picked(self, op: Op, lo: int, item: int, positions) -> None:
        """The positions an advanced index picked are computed on the device, behind the
        gates: they are noted when the run finishes."""
        self._picked_later.append((op, lo, item, positions))

    def finish(self) -> None:
        self.sync_all()
        with self._torch._C.DisableTorchFunction():
            for op, lo, item, positions in self._picked_later:
                super()._picked(op, lo, item, positions.cpu())
            self._picked_later.clear()
            for where, name, scalars, op, held in self._pending_reads:
                op.seen = {k: t.cpu().tolist() for k, t in op.seen.items()}
                self._only_touched(op, op.seen)
                self.reads_log.append((where, name, {**scalars, **_logged(op.seen, held)}))
            self._judge_held_races()
        self._pending_reads.clear()
        self.check_intents()

    # ---------------------------------------------------------------- activation
    @contextmanager
    def activate(self):
        try:
            with _wrapped(self), DeviceMode(self):
                yield self
        finally:
            self.gates.open()


@contextmanager
def _wrapped(model: CudaDevice):
    """``torch.cuda``'s event, stream and synchronization calls (and ``torch.Event``,
    ``torch.Stream``), seen by ``model``."""
    torch = model._torch
    real = model._real
    RealEvent, RealStream = real["Event"], real["Stream"]

    class TrackedEvent(RealEvent):
        def __new__(cls, *args, **kwargs):
            event = super().__new__(cls, *args, **kwargs)
            event._stagecheck = EventState()
            return event

        def record(self, stream=None):
            super().record(stream)
            model.record(self._stagecheck, model._state_of(
                stream if stream is not None else real["current_stream"]()))

        def wait(self, stream=None):
            super().wait(stream)
            model.wait_event(model._state_of(
                stream if stream is not None else real["current_stream"]()), self._stagecheck)

        def query(self):
            return model.query_event_now(self._stagecheck, super().query())

        def synchronize(self):
            model.sweep()
            model.open_before(self._stagecheck)
            super().synchronize()
            model.sync_event(self._stagecheck)

    class TrackedStream(RealStream):
        def wait_event(self, event):
            if isinstance(event, TrackedEvent):
                event.wait(self)
            else:       # an event the model never saw recorded: what it waits for may be
                model.gates.open()     # anything issued so far, held by no later wait
                super().wait_event(event)

        def wait_stream(self, stream):
            marker = TrackedEvent()
            marker.record(stream)
            marker.wait(self)

        def record_event(self, event=None):
            event = event if event is not None else TrackedEvent()
            event.record(self)
            return event

        def synchronize(self):
            model.sweep()
            model.open_clock(model._state_of(self).clock)
            super().synchronize()
            model.sync_stream(model._state_of(self))

        def query(self):
            done = super().query()
            if done:
                model._learn(model._state_of(self).clock)
            else:
                model.open_clock(model._state_of(self).clock)     # a polling loop ends
            return done

    class TrackedAcceleratorEvent(TrackedEvent):
        """``torch.Event()`` (device-generic: the device comes first) as a tracked CUDA
        event."""

        def __new__(cls, device=None, **kwargs):
            return super().__new__(cls, **kwargs)

        def __init__(self, device=None, **kwargs):
            pass

    def tracked(stream):
        return TrackedStream(stream_id=stream.stream_id, device_index=stream.device_index,
                             device_type=stream.device_type)

    def synchronize(device=None):
        model.sweep()
        model.gates.open()
        real["synchronize"](device)
        model.sync_all()

    names = {"Event": TrackedEvent, "Stream": TrackedStream,
             "current_stream": lambda device=None: tracked(real["current_stream"](device)),
             "default_stream": lambda device=None: tracked(real["default_stream"](device)),
             "synchronize": synchronize}
    generic = {"Event": TrackedAcceleratorEvent, "Stream": TrackedStream}
    saved = swap_names([(torch.cuda, names), (torch, {name: value for name, value
                                                      in generic.items() if hasattr(torch, name)})])
    try:
        yield model
    finally:
        restore_names(saved)
