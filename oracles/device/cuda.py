"""The CUDA backend of the device model: real pinned memory, streams and events.

The same interface as the CPU model (``model.DeviceModel``), and the same ordering and race
detection: every copy, record, wait and synchronization the code under test makes is seen
(the interception mode of ``intercept.py``, and ``torch.cuda``'s ``Event``, ``Stream``,
``current_stream``, ``default_stream`` and ``synchronize`` wrapped while active) and runs
on the GPU as issued. What differs is who decides when things complete: the GPU. So that
copies really lag behind the host, the ``lazy`` completion queues ``busy_cycles`` of device
work (``torch.cuda._sleep``) on the current stream at each boundary between a protocol's
operations; ``eager`` synchronizes the device at every point where the host calls into it
(every operation completes before the host goes on: what the host meant); ``drain``
synchronizes once at the boundary. Nothing else synchronizes between steps.

Hazards are found on the host side as with the CPU model: the happens-before order of
streams and events (``order.py``), snapshots of uploaded host ranges taken at issue and
compared at every later call (a host write no interception saw), and for each copy a CUDA
event recorded after it, whose ``query`` says whether it is still in flight.
What device work read is cloned on its stream when it is launched, and read back when the
run ends.
"""

from __future__ import annotations

from contextlib import contextmanager

from stagecheck.oracles.device.intercept import DeviceMode
from stagecheck.oracles.device.model import COPY_KINDS, DeviceModel, EventState, Op
from stagecheck.oracles.device.torchload import import_torch

__all__ = ["CudaDevice"]


class CudaDevice(DeviceModel):
    """The device model on a real CUDA device (see the module doc)."""

    kind = "cuda"

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
        self._pending_reads: list[tuple[str, str, dict]] = []

    # ---------------------------------------------------------------- memory
    def memory(self, t) -> str:
        with self._torch._C.DisableTorchFunction():
            if t.is_cuda:
                return "device"
            return "pinned" if t.is_pinned() else "pageable"

    def empty_device(self, shape, dtype):
        with self._torch._C.DisableTorchFunction():
            return self._torch.empty(shape, dtype=dtype, device=self.device)

    def empty_pinned(self, shape, dtype):
        with self._torch._C.DisableTorchFunction():
            t = self._torch.empty(shape, dtype=dtype, pin_memory=True)
        self._new_pinned_region(t)
        return t

    def make_device(self, func, args, kwargs):
        with self._torch._C.DisableTorchFunction():
            return func(*args, device=self.device, **kwargs)

    def make_pinned(self, func, args, kwargs):
        with self._torch._C.DisableTorchFunction():
            made = func(*args, pin_memory=True, **kwargs)
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

    # ---------------------------------------------------------------- running
    def _submit(self, op: Op) -> None:
        if op.action is not None:
            self.inside = True
            self.running = op if op.kind == "kernel" else None
            try:
                op.action()
            finally:
                self.inside = False
                self.running = None
        if op.kind in COPY_KINDS:
            op.event = self._real["Event"]()
            op.event.record()
        self.point()

    def point(self) -> None:
        if self.completion == "eager":
            self._real["synchronize"]()

    def boundary(self, completion: str) -> None:
        self.sweep()
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

    def _complete_all(self) -> None:
        self._real["synchronize"]()

    def _run_now(self, op: Op, run):
        self.inside = True
        try:
            return run()
        finally:
            self.inside = False

    def _work(self, op: Op, name: str, fn, reads: dict, where: tuple, scalars: dict):
        def run():
            with self._torch._C.DisableTorchFunction():
                op.seen = {k: t.detach().clone() for k, t in reads.items()}
            self._pending_reads.append((where, name, scalars, op))
            fn()
        return run

    def _landed(self, op: Op) -> bool:
        return op.event is None or op.event.query()

    def in_flight(self) -> int:
        return sum(1 for op in self._still_open()
                   if op.kind in COPY_KINDS and op.event is not None and not op.event.query())

    def query_event_now(self, state: EventState, done: bool) -> bool:
        self.sweep()
        return self.query_event(state, done)

    def finish(self) -> None:
        self.sync_all()
        with self._torch._C.DisableTorchFunction():
            for where, name, scalars, op in self._pending_reads:
                op.seen = {k: t.cpu().tolist() for k, t in op.seen.items()}
                self.reads_log.append((where, name, {**scalars, **op.seen}))
        self._pending_reads.clear()
        self.check_intents()

    # ---------------------------------------------------------------- activation
    @contextmanager
    def activate(self):
        with _wrapped(self), DeviceMode(self):
            yield self


@contextmanager
def _wrapped(model: CudaDevice):
    """``torch.cuda``'s event, stream and synchronization calls, seen by ``model``."""
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
            super().synchronize()
            model.sync_event(self._stagecheck)

    class TrackedStream(RealStream):
        def wait_event(self, event):
            if isinstance(event, TrackedEvent):
                event.wait(self)
            else:
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
            super().synchronize()
            model.sync_stream(model._state_of(self))

        def query(self):
            done = super().query()
            if done:
                model._learn(model._state_of(self).clock)
            return done

    def tracked(stream):
        return TrackedStream(stream_id=stream.stream_id, device_index=stream.device_index,
                             device_type=stream.device_type)

    def synchronize(device=None):
        model.sweep()
        real["synchronize"](device)
        model.sync_all()

    names = {"Event": TrackedEvent, "Stream": TrackedStream,
             "current_stream": lambda device=None: tracked(real["current_stream"](device)),
             "default_stream": lambda device=None: tracked(real["default_stream"](device)),
             "synchronize": synchronize}
    saved = {name: getattr(torch.cuda, name) for name in names}
    for name, value in names.items():
        setattr(torch.cuda, name, value)
    try:
        yield model
    finally:
        for name, value in saved.items():
            setattr(torch.cuda, name, value)
