"""The CPU model of the device: deterministic, its completion schedule chosen by the caller.

"Device" tensors are CPU tensors the model owns (``DeviceTensor``: they say ``cuda:0``
when asked their device, so code that passes ``x.device`` along keeps working); pinned
host tensors are CPU tensors the model registered as pinned. Nothing the host issues
runs when issued: each operation waits in its stream's queue until the model runs it,

- when the host waits for it (an event or stream synchronize, ``torch.cuda.synchronize``,
  a blocking copy, a host read of a device tensor), with everything it depends on, in
  issue order among the streams;
- at any point where the host calls into the device, if the completion in force is
  ``eager`` (every ready operation runs, oldest first);
- before the next operation of a protocol, if the schedule says ``drain`` there.

``lazy`` (the default) is the latest completion the stream order allows: copies stay
queued across steps until something waits for them. An upload reads its pinned source
when it runs (the DMA reads the page late), a download writes its pinned destination when
it runs. Device work and the host's torch operations on device tensors run in stream
order too (a host-issued operation runs once what is queued ahead of it on its stream has
run). Fresh device memory from ``torch.empty`` holds a poison value, so a read of memory
nothing wrote yet shows.

While a model is active in this process (``activate``), ``torch.cuda``'s ``Event``,
``Stream``, ``stream``, ``current_stream``, ``default_stream``, ``set_stream``,
``synchronize``, ``is_available`` and a few more are the model's, and the interception
mode of ``intercept.py`` routes torch calls to it; leaving restores torch.
"""

from __future__ import annotations

from contextlib import contextmanager

from stagecheck.oracles.device import standins
from stagecheck.oracles.device.intercept import DeviceMode, basic_index
from stagecheck.oracles.device.model import COPY_KINDS, DeviceModel, EventState, Op
from stagecheck.oracles.device.spans import address_of
from stagecheck.oracles.device.torchload import import_torch

__all__ = ["COMPLETIONS", "CpuDevice", "device_tensor_class", "poison"]

#: what the CPU model does at each point where the host calls into the device
COMPLETIONS = ("lazy", "eager", "drain")
#: the value fresh device memory holds (``torch.empty``): a read of it shows
POISON_INT = -7777
#: queries of an unfinished event after which the model runs it (a polling loop ends)
QUERIES_BEFORE_PROGRESS = 2

_DEVICE_TENSOR = None


def device_tensor_class():
    """``DeviceTensor``, made on first use (it needs torch)."""
    global _DEVICE_TENSOR
    if _DEVICE_TENSOR is not None:
        return _DEVICE_TENSOR
    torch = import_torch()
    cuda0 = torch.device("cuda", 0)

    plain = torch._C.DisableTorchFunctionSubclass
    base = torch.Tensor
    disabled = torch._C.DisableTorchFunction
    getitem = base.__getitem__
    shape_of = torch._C.TensorBase.shape.__get__

    class DeviceTensor(torch.Tensor):
        """A tensor in the CPU model's device memory (a CPU tensor that says cuda:0):
        what torch makes from one (a view, a result) is one too.

        Its shape and its views by a basic index (``t[:n]``, ``t[i]``), the most common
        calls on it, are made here with torch function handling off: the interception
        mode would only pass them through (``intercept.py``: a view or metadata), at the
        cost of a dispatch each; any other index goes through torch as before."""

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return call(func, args, kwargs)

        def __getitem__(self, key):
            if basic_index(key):
                with disabled():
                    return getitem(self, key).as_subclass(DeviceTensor)
            return getitem(self, key)

        @property
        def shape(self):
            with disabled():
                return shape_of(self)

        @property
        def device(self):
            return cuda0

        @property
        def is_cuda(self):
            return True

        def __repr__(self, *args, **kwargs):
            # a host read, as torch's repr of a CUDA tensor is (a blocking download): the
            # interception waits for what writes it (was: read with torch function off,
            # so str(t) of a pending upload's mirror showed the poison, f"{t}" the values)
            values = self.tolist()
            with torch._C.DisableTorchFunction():
                return f"DeviceTensor({values!r}, dtype={self.dtype})"

    def call(func, args, kwargs):
        """``func`` on arguments among which device tensors are the only tensors of a
        subclass: run as on plain tensors, each plain tensor it makes a device tensor."""
        with plain():
            result = func(*args, **kwargs) if kwargs else func(*args)
        kind = type(result)
        if kind is base:
            return result.as_subclass(DeviceTensor)
        if kind is tuple or kind is list:
            return kind(r.as_subclass(DeviceTensor) if type(r) is base else r for r in result)
        return result

    DeviceTensor._stagecheck_call = staticmethod(call)   # for the interception
    _DEVICE_TENSOR = DeviceTensor
    return DeviceTensor


class CpuDevice(DeviceModel):
    """The deterministic CPU model (see the module doc)."""

    judges_reads_when_run = True     # it runs device work itself: its reads are known then
    defers_held = True               # held memory's intents worked out where read (``_Later``)

    kind = "cpu-model"

    def __init__(self, completion: str = "lazy") -> None:
        super().__init__()
        torch = import_torch()
        self._torch = torch
        self._mode = None            # the interception mode while the model is active
        #: downloads a host-issued operation made run early, with the values they wrote,
        #: held back from host memory until the host learns them complete (``_run_now``)
        self._late: list = []
        self.device = torch.device("cuda", 0)
        self.completion = completion
        self.inside = False          # running device work: its torch calls pass through
        self._device_class = device_tensor_class()
        self._disabled = torch._C.DisableTorchFunction
        self._current = self.stream_state(None, "default")
        self.default_stream = standins.ModelStream(_state=self._current)

    # ---------------------------------------------------------------- memory
    def memory(self, t) -> str:
        if isinstance(t, self._device_class):
            return "device"
        regions = self.regions
        if not regions._starts:
            return "pageable"
        with self._disabled():
            address = t.data_ptr()
            if address == 0 and t.numel() == 0:
                address = address_of(t)
        region = regions.at(address)
        return region.kind if region is not None else "pageable"

    def _device_type(self):
        return self._device_class

    def as_device(self, t):
        """``t`` (a CPU tensor) as a tensor of the model's device memory."""
        with self._torch._C.DisableTorchFunction():
            return t.as_subclass(self._device_class)

    def empty_device(self, shape, dtype):
        torch = self._torch
        with torch._C.DisableTorchFunction():
            t = torch.empty(shape, dtype=dtype)
            poison(torch, t)
            return t.as_subclass(self._device_class)

    def empty_pinned(self, shape, dtype):
        with self._torch._C.DisableTorchFunction():
            t = self._torch.empty(shape, dtype=dtype)
            poison(self._torch, t)
        self._new_pinned_region(t)
        return t

    def make_device(self, func, args, kwargs):
        """A torch factory (``zeros``, ``empty``, ``tensor``...) asked for device memory."""
        torch = self._torch
        with torch._C.DisableTorchFunction():
            made = func(*args, **kwargs)
            if getattr(func, "__name__", "") in ("empty", "empty_like", "empty_strided"):
                if made.is_contiguous() and not made.requires_grad:
                    poison(torch, made)        # what ``empty_device`` would make
                    return made.as_subclass(self._device_class)
                return self.empty_device(tuple(made.shape), made.dtype)
            return made.as_subclass(self._device_class)

    def make_pinned(self, func, args, kwargs):
        """A torch factory asked for pinned memory (``pin_memory=True``)."""
        with self._torch._C.DisableTorchFunction():
            made = func(*args, **kwargs)
            if getattr(func, "__name__", "") in ("empty", "empty_like", "empty_strided"):
                poison(self._torch, made)
        self._new_pinned_region(made)
        return made

    def pinned(self, t):
        """A pinned copy of host tensor ``t`` (``t.pin_memory()``)."""
        with self._torch._C.DisableTorchFunction():
            out = t.clone()
        self._new_pinned_region(out)
        return out

    # ---------------------------------------------------------------- streams
    def current(self):
        return self._current

    def set_current(self, state) -> None:
        self._current = state

    # ---------------------------------------------------------------- running
    def _submit(self, op: Op) -> None:
        op.stream.queue.append(op)
        self.point()

    def point(self) -> None:
        """A point where the host called into the device: the completion in force runs."""
        if self.completion == "eager":
            self._run_ready()

    def boundary(self, completion: str) -> None:
        """Between two operations of a protocol: ``completion`` holds until the next one
        (``drain`` runs everything queued now, then behaves as ``lazy``). The caller has
        swept the host's writes of the operation before."""
        if completion == "drain":
            self._complete_all()
            self.completion = "lazy"
        else:
            self.completion = completion
            self.point()

    def _first_ready(self) -> Op | None:
        """The ready operation to run next (None: nothing is ready): of the heads of the
        streams' queues, the one issued first, or issued last where ``order`` is
        ``newest``."""
        first = None
        newest = self.order == "newest"
        for stream in self._streams.values():
            queue = stream.queue
            if queue:
                op = queue[0]
                if (op.kind != "wait" or op.waits_for.done) and (
                        first is None or (op.index > first.index if newest
                                          else op.index < first.index)):
                    first = op
        return first

    def _run_ready(self) -> None:
        while True:
            op = self._first_ready()
            if op is None:
                return
            self._execute(op)

    def _land(self, which) -> None:
        """Write into host memory what the held-back downloads ``which(op)`` picks wrote."""
        keep = []
        for o, values in self._late:
            if which(o):
                self._raw_copy(o.snapshot[1], values)
            else:
                keep.append((o, values))
        self._late = keep

    def _learn(self, clock: dict) -> None:
        super()._learn(clock)
        if self._late:
            self._land(self._known)

    def release(self) -> None:
        self._late = []
        super().release()

    def _execute(self, op: Op) -> None:
        queue = op.stream.queue
        assert queue and queue[0] is op
        queue.pop(0)
        if self._late and op.kind == "h2d" and op.host_reads:   # it reads what they wrote
            self._land(lambda o: any(r.overlaps(w) for r in op.host_reads
                                     for w in o.host_writes))
        if op.kind == "d2h" and op.snapshot is not None:
            self.download_touched(op)        # host writes it is about to overwrite
        if op.action is not None:
            self.inside = True
            self.running = op if op.kind == "kernel" else None
            try:
                if op.kind == "kernel" and self._mode is not None \
                        and not self._torch._C._len_torch_function_stack():
                    # queued work that a torch call's handler runs (a synchronous copy
                    # waits for it): torch leaves a mode while its handler runs, so the
                    # mode is entered again, or the work's reads and writes go unseen
                    with self._mode:
                        op.action()
                else:
                    op.action()
            finally:
                self.inside = False
                self.running = None
        op.done = True
        if op.kind == "kernel":
            self._writes_against_earlier(op)
            self._after_work(op)
        elif op.kind == "d2h" and op.snapshot is not None:
            self._note_landed(op)
            if op.stale:
                self._check_stale(op)

    def _complete(self, op: Op) -> None:
        while not op.done:
            head = op.stream.queue[0]
            if head.kind == "wait" and not head.waits_for.done:
                self._complete(head.waits_for)
            else:
                self._execute(head)

    def _complete_all(self) -> None:
        while any(s.queue for s in self._streams.values()):
            op = self._first_ready()
            if op is None:
                raise RuntimeError("the device model's queues wait on each other")
            self._execute(op)
        if self._late:          # everything ran: what it wrote is in host memory
            self._land(lambda o: True)

    def _run_now(self, op: Op, run):
        """A torch operation the host issued on device tensors runs at once, after what is
        queued ahead of it: copies ahead of it run early, not when a completion schedule
        would have run them. An upload that did is marked (a later host write into its
        source cannot be shown reaching it: ``Op.forced``); a download that did keeps what
        it wrote out of host memory until the host learns it complete, as on a GPU, where
        it may land any time before that (a host read before then sees the old values)."""
        if op.stream.queue:
            ahead = [o for s in self._streams.values() for o in s.queue if o.kind in COPY_KINDS]
            held = {o.index: self._clone(o.snapshot[1]) for o in ahead
                    if o.kind == "d2h" and o.snapshot is not None}
            self._complete(op.stream.queue[-1])
            for o in ahead:
                if not o.done:
                    continue
                if o.kind == "h2d" and not o.forced:
                    o.forced = op.what
                elif o.index in held and not self._known(o):
                    dst = o.snapshot[1]
                    self._late.append((o, self._clone(dst)))
                    self._raw_copy(dst, held[o.index])
        self.inside = True
        try:
            result = run()
        finally:
            self.inside = False
        op.done = True
        return result

    def in_flight(self) -> int:
        return sum(1 for s in self._streams.values() for op in s.queue if op.kind in COPY_KINDS)

    def query_event_now(self, state: EventState, misses: int) -> bool:
        """``Event.query()``: whether its record ran (after ``misses`` earlier queries that
        said no, the model runs it: a polling loop ends)."""
        self.sweep()
        self.point()
        if state.record is not None and not state.record.done \
                and misses + 1 >= QUERIES_BEFORE_PROGRESS:
            self._complete(state.record)
        done = state.record is None or state.record.done
        return self.query_event(state, done)

    def finish(self) -> None:
        """The run ends: everything queued runs, and the host knows it; then what each
        device work read is checked against what the host meant."""
        self.sync_all()
        self.check_intents()

    # ---------------------------------------------------------------- activation
    @contextmanager
    def activate(self):
        """This model is the device while the block runs (torch.cuda and torch calls)."""
        mode = DeviceMode(self)
        with standins.installed(self), mode:
            self._mode = mode
            try:
                yield self
            finally:
                self._mode = None


def poison(torch, t) -> None:
    """Fill fresh memory ``t`` with the poison value of its dtype (NaN, True, or an
    integer no staging code writes)."""
    if t.dtype == torch.bool:
        t.fill_(True)
    elif t.is_floating_point():
        t.fill_(float("nan"))
    else:
        t.fill_(POISON_INT if t.dtype not in (torch.uint8, torch.int8) else 77)
