"""``torch.cuda`` while the CPU model is the device: streams, events and synchronization.

A CPU build of torch has no CUDA: its ``torch.cuda.Event`` and ``Stream`` cannot be made
and ``current_stream`` raises. While a ``CpuDevice`` is active (``installed``), these names
of ``torch.cuda`` are the model's (and ``torch.Event``, ``torch.Stream``, the
device-generic classes engines now make), looked up where code calls them (``torch.cuda.Event()``
at call time; a name imported with ``from torch.cuda import Event`` before the model was
active keeps torch's):

``Event`` (``record``, ``wait``, ``query``, ``synchronize``, ``elapsed_time``), ``Stream``
(``wait_event``, ``wait_stream``, ``record_event``, ``synchronize``, ``query``),
``stream(s)`` (a context that makes ``s`` current), ``current_stream``, ``default_stream``,
``set_stream``, ``synchronize``, ``is_available`` (True), ``device_count`` (1),
``current_device`` (0), ``device(d)`` and ``set_device`` (one device: nothing to
select), ``_sleep`` (queues nothing: the model decides when work runs),
``empty_cache``; a ``Stream`` is a context (``with stream:``) too; ``torch.accelerator``'s
``current_stream``, ``set_stream``, ``synchronize`` and the like are the model's, and
``torch.cuda.nvtx``'s ranges do nothing; and ``Tensor.record_stream`` takes the model's
streams (a no-op).
Leaving restores every name.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

from stagecheck.oracles.device.model import EventState
from stagecheck.oracles.device.torchload import import_torch

__all__ = ["ModelAcceleratorEvent", "ModelEvent", "ModelStream", "installed",
           "restore_names", "swap_names", "watch_names"]

_ACTIVE: list = []      # the active CPU models, innermost last


def _model():
    if not _ACTIVE:
        raise RuntimeError("a stagecheck stand-in for torch.cuda was used after its device "
                           "model ended")
    return _ACTIVE[-1]


class ModelStream:
    """``torch.cuda.Stream`` of the CPU model."""

    def __init__(self, device=None, priority: int = 0, _state=None, **_ignored) -> None:
        model = _model() if _state is None else None
        self.priority = priority
        if _state is None:
            _state = model.stream_state(self, ("stream", len(model._streams)))
        _state.handle = self
        self._state = _state

    @property
    def device(self):
        torch = import_torch()
        return torch.device("cuda", 0)

    @property
    def cuda_stream(self) -> int:
        return self._state.id

    stream_id = cuda_stream
    device_index = 0

    def wait_event(self, event) -> None:
        model = _model()
        model.wait_event(self._state, event._state)
        model.point()

    def wait_stream(self, stream) -> None:
        model = _model()
        model.wait_stream(self._state, stream._state)
        model.point()

    def record_event(self, event=None):
        event = event if event is not None else ModelEvent()
        event.record(self)
        return event

    def synchronize(self) -> None:
        _model().sync_stream(self._state)

    def query(self) -> bool:
        model = _model()
        model.sweep()
        model.point()
        if all(op.done for op in self._state.queue):
            model._learn(self._state.clock)
            return True
        return False

    def __enter__(self):
        """``with stream:`` makes it current, as a ``torch.Stream`` does."""
        context = _StreamContext(self)
        self.__dict__.setdefault("_contexts", []).append(context)
        return context.__enter__()

    def __exit__(self, *exc) -> None:
        self._contexts.pop().__exit__(*exc)

    def __eq__(self, other) -> bool:
        return isinstance(other, ModelStream) and other._state is self._state

    def __hash__(self) -> int:
        return hash(id(self._state))

    def __repr__(self) -> str:
        return f"<stagecheck model stream {self._state.id}>"


class ModelEvent:
    """``torch.cuda.Event`` of the CPU model."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False, **_ignored) -> None:
        self._state = EventState()
        self._misses = 0

    def record(self, stream=None) -> None:
        model = _model()
        model.record(self._state, stream._state if stream is not None else None)
        self._misses = 0

    def wait(self, stream=None) -> None:
        model = _model()
        model.wait_event(stream._state if stream is not None else model.current(),
                         self._state)
        model.point()

    def query(self) -> bool:
        done = _model().query_event_now(self._state, self._misses)
        self._misses = 0 if done else self._misses + 1
        return done

    def synchronize(self) -> None:
        _model().sync_event(self._state)

    def elapsed_time(self, end_event) -> float:
        return 0.0

    def __repr__(self) -> str:
        return "<stagecheck model event>"


class ModelAcceleratorEvent(ModelEvent):
    """``torch.Event`` (the device-generic event vLLM makes: ``torch.Event()``) of the CPU
    model: its first argument is the device."""

    def __init__(self, device=None, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        super().__init__(enable_timing, blocking, interprocess)


class _StreamContext:
    def __init__(self, stream) -> None:
        self.stream, self._previous = stream, None

    def __enter__(self):
        if self.stream is not None:
            model = _model()
            self._previous = model.current()
            model.set_current(self.stream._state)
        return self.stream

    def __exit__(self, *exc) -> None:
        if self.stream is not None and self._previous is not None:
            _model().set_current(self._previous)


class _DeviceContext:
    """``torch.cuda.device(d)``: the model has one device, so selecting it changes nothing
    (torch's raised "PyTorch was compiled without CUDA support" on a CPU build)."""

    def __init__(self, device=None) -> None:
        self.idx = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def _current_stream(device=None):
    return _model().current().handle


def _default_stream(device=None):
    return _model().default_stream


def _set_stream(stream) -> None:
    if stream is not None:
        _model().set_current(stream._state)


def _synchronize(device=None) -> None:
    _model().sync_all()


_NAMES = {
    "Event": ModelEvent, "Stream": ModelStream, "stream": _StreamContext,
    "StreamContext": _StreamContext, "current_stream": _current_stream,
    "default_stream": _default_stream, "set_stream": _set_stream,
    "synchronize": _synchronize, "is_available": lambda: True, "device_count": lambda: 1,
    "current_device": lambda: 0, "_sleep": lambda cycles: None, "empty_cache": lambda: None,
    "is_initialized": lambda: True, "init": lambda: None,
    "device": _DeviceContext, "set_device": lambda device: None,
}


#: the device-generic names of ``torch`` itself that are the model's too
_TORCH_NAMES = {"Event": ModelAcceleratorEvent, "Stream": ModelStream}


def _accelerator():
    return import_torch().device("cuda", 0)


#: ``torch.accelerator``, the device-generic face of the current stream (torch's raised
#: "Cannot access accelerator device when none is available" on a CPU build)
_ACCELERATOR_NAMES = {
    "current_stream": _current_stream, "set_stream": _set_stream,
    "synchronize": _synchronize, "is_available": lambda: True, "device_count": lambda: 1,
    "current_device_index": lambda: 0, "current_device_idx": lambda: 0,
    "current_accelerator": lambda check_available=False: _accelerator(),
    "empty_cache": lambda: None,
}

#: ``torch.cuda.nvtx``: profiler ranges, which mean nothing to the model (torch's raised
#: "NVTX functions not installed" on a CPU build)
_NVTX_NAMES = {
    "range_push": lambda msg: 0, "range_pop": lambda: 0, "range_start": lambda msg: 0,
    "range_end": lambda range_id: None, "mark": lambda msg: None,
    "range": lambda msg, *args, **kwargs: nullcontext(),
}


#: ``swap_names``: a name the place did not have
_MISSING = object()


#: the namespaces of code under test (``watch_names``), the most recent ``_WATCHED_HELD``
_WATCHED: list = []
_WATCHED_HELD = 64


def watch_names(namespace: dict) -> None:
    """``namespace`` (a target module's globals, or those a target file was compiled in)
    is code under test's: a name it bound when it loaded to one of torch's that
    ``swap_names`` replaces (``from torch.cuda import Event`` at module level, before any
    model was active) is the replacement there too while the model is (was: torch's own
    class, which raised on a CPU build, a finding against correct code, and on CUDA made
    events the model never saw recorded)."""
    if any(watched is namespace for watched in _WATCHED):
        return
    if len(_WATCHED) >= _WATCHED_HELD:
        del _WATCHED[0]
    _WATCHED.append(namespace)


def swap_names(places: list) -> list:
    """Set each ``(place, {name: value})`` of ``places`` (a module such as ``torch.cuda``),
    and the same in the watched namespaces where a name holds what a place held; what they
    all held before, for ``restore_names``."""
    saved = [(place, {name: getattr(place, name, _MISSING) for name in table})
             for place, table in places]
    for place, table in places:
        for name, value in table.items():
            setattr(place, name, value)
    # torch's objects replaced, by id (alive in ``saved``: no id is another object's)
    replaced = {id(old): (old, table[name]) for (_, table), (_, olds) in zip(places, saved)
                for name, old in olds.items() if old is not _MISSING and old is not table[name]}
    for namespace in _WATCHED:
        held = {}
        for name, value in list(namespace.items()):
            hit = replaced.get(id(value))
            if hit is not None and hit[0] is value:
                held[name] = value
                namespace[name] = hit[1]
        if held:
            saved.append((namespace, held))
    return saved


def restore_names(saved: list) -> None:
    """Put back what ``swap_names`` replaced (a name it added is removed)."""
    for place, values in saved:
        if isinstance(place, dict):       # a watched namespace: only names it had
            place.update(values)
            continue
        for name, value in values.items():
            if value is _MISSING:
                delattr(place, name)
            else:
                setattr(place, name, value)


def _record_stream_of(torch_record_stream):
    """``Tensor.record_stream`` taking the model's streams: torch's own parses its argument
    as a ``torch.Stream`` before any override sees the call, so it raised "unknown
    parameter type" for a ``ModelStream`` (a step_outcome finding against code such as an
    offloading worker's ``t.record_stream(side)``). On the model it is a no-op: every
    allocation of a run stays alive until the run ends (docs/protocols.md)."""
    def record_stream(self, stream):
        if isinstance(stream, ModelStream):
            return None
        return torch_record_stream(self, stream)
    return record_stream


@contextmanager
def installed(model):
    """``torch.cuda``'s names (and ``torch.Event``, ``torch.Stream``) are ``model``'s while
    the block runs, and ``Tensor.record_stream`` takes the model's streams."""
    torch = import_torch()
    _ACTIVE.append(model)
    saved = swap_names([(torch.cuda, _NAMES), (torch, _TORCH_NAMES),
                        (torch.accelerator, _ACCELERATOR_NAMES),
                        (torch.cuda.nvtx, _NVTX_NAMES)])
    tensor = torch.Tensor
    own = vars(tensor).get("record_stream", _MISSING)    # torch's is inherited
    if not _is_model_record_stream(own):
        tensor.record_stream = _record_stream_of(tensor.record_stream)
    try:
        yield model
    finally:
        _ACTIVE.remove(model)
        if not _ACTIVE:         # an outer model still active: its names stay
            restore_names(saved)
            if own is _MISSING:
                del tensor.record_stream
            else:
                tensor.record_stream = own


def _is_model_record_stream(method) -> bool:
    """Whether ``method`` is already the model's ``record_stream`` (an outer model's)."""
    return getattr(method, "__qualname__", "").startswith("_record_stream_of.")
