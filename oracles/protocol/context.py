"""The ``StepContext`` a protocol's ``build``, operations and ``observe`` receive.

It gives the protocol the device (the device model's), the target's component class and
functions (``oracles/protocol/component.py``), device tensors, and one staging call of a
scenario (one-step protocols). After ``build``, ``prepare_state`` names the memory of the
state for reports (``input_batch.temperature_cpu_tensor``, ``query_start_loc.gpu``: the
attribute paths of its tensors) and turns the protocol's device work methods into device
work on the model (``DeviceModel.launch``).
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

from stagecheck.oracles import messages
from stagecheck.oracles.device.spans import _span
from stagecheck.oracles.device.standins import ModelAcceleratorEvent, ModelEvent, ModelStream
from stagecheck.oracles.device.torchload import import_torch
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.observe import observe
from stagecheck.oracles.observe.instrumented import InstrumentedBackend
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.text import closest, did_you_mean
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.protocols import vllm
from stagecheck.spec.schema import StandInUnsupported

__all__ = ["RunContext", "prepare_state", "raised_by_work", "release_state"]

#: how deep ``prepare_state`` looks for tensors in the state's attributes (vLLM's model
#: runner holds pinned buffers six attributes down: ``block_tables.tables[0].buf.cpu``...)
NAME_DEPTH = 6
#: how many items of a list, tuple or dict of the state (a pool of pinned buffers) it names
NAME_ITEMS = 64
#: the dtypes staging code holds (what ``ctx.tensor``'s guess for a misspelt name tries first)
_COMMON_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "bool", "float16", "bfloat16",
                  "float32", "float64")


class RunContext:
    """The ``spec.protocol.StepContext`` of one run (see the module doc)."""

    def __init__(self, model, code, protocol, sequence, options) -> None:
        self.model, self.code, self.protocol, self.sequence = model, code, protocol, sequence
        self.options = options
        self.state: Any = None
        self._step = None
        self._pinned_named = 0
        self.device = model.device
        self.staged: list[dict] = []

    @property
    def step(self):
        return self._step

    @step.setter
    def step(self, view) -> None:
        """The step being run; at each step's start, pinned memory the state took on since
        the last one (an attribute the component allocates lazily, or anew each step) is
        named after its attribute path, as ``prepare_state`` names the built state's: a
        report says ``ids_cpu``, and a finding's id does not depend on how many pinned
        allocations came before (``pinned tensor 3``)."""
        self._step = view
        model = self.model
        count = getattr(model, "_pinned_count", 0)
        if count != self._pinned_named and self.state is not None:
            self._pinned_named = count
            with model.passthrough():
                _name_tensors(model, self.state, only_unnamed=True)

    def named_now(self) -> None:
        """The state's tensors were just named (``prepare_state``): the pinned memory
        allocated so far needs no look at the next step's start."""
        self._pinned_named = getattr(self.model, "_pinned_count", 0)

    def component(self, *args, **kwargs):
        return self.code.component()(*args, **kwargs)

    def function(self, name: str):
        """Module-level function ``name`` of the target's file or module; a name it lacks is
        the protocol's mistake (``SchemaError``, exit 2), never a None to call."""
        found = self.code.function(name)
        if found is None:
            names = self.code.function_names()
            caller = sys._getframe(1)
            raise SchemaError.of(messages.PROTOCOL_FUNCTION_MISSING, self.protocol.name,
                                 name=name, target=self.code.ref.spec,
                                 where=f"{caller.f_code.co_filename}:{caller.f_lineno}",
                                 guess=did_you_mean(str(name), names),
                                 names=", ".join(names) or "none")
        return found

    def tensor(self, values: list, dtype):
        """A device tensor of ``values``; ``dtype`` a torch dtype's name (``"int64"``,
        ``"torch.int64"``) or the dtype itself."""
        torch = import_torch()
        kind = dtype
        if isinstance(dtype, str):
            kind = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(kind, torch.dtype):
            names = sorted(n for n in dir(torch) if isinstance(getattr(torch, n, None),
                                                               torch.dtype))
            # the dtypes staging code uses are guessed first ('int23': int32, not the
            # closer-spelt int3 of torch's sub-byte integers)
            guess = did_you_mean(str(dtype), _COMMON_DTYPES) or did_you_mean(str(dtype), names)
            raise SchemaError.of(messages.PROTOCOL_TENSOR_DTYPE, self.protocol.name,
                                 dtype=dtype, guess=guess,
                                 names=", ".join(repr(n) for n in (
                                     "int32", "int64", "bool", "float32")))
        return torch.tensor(values, dtype=kind, device=self.device)

    def stage(self, scenario: dict):
        """One staging call of the target on ``scenario``, its buffers on this run's device
        model; what ``observe`` sees of it is kept for the schema's invariants."""
        target = self.code.staging_target()
        backend = InstrumentedBackend(self.options["device"], True, model=self.model)
        run = RunOptions(device=self.options["device"], timeout=self.options["timeout"],
                         deferred_copies=self.options["device"] == "cpu")
        seen = observe(target, StagingScenario.from_dict(scenario), run, backend,
                       exits_are_observations=True)
        self.staged.append({"scenario": scenario, "observation": seen.to_wire()})
        return None


def prepare_state(model, state, protocol) -> list:
    """Name the state's tensors after their attribute paths; make its device work.
    Returns ``(owner, method)`` of each method made device work, for ``release_state``."""
    if state is None and (protocol.component or protocol.device_work):
        raise SchemaError.of(messages.PROTOCOL_BUILD_NONE, protocol.name)
    _name_tensors(model, state)
    require_row_order(state, protocol)
    made = []
    for path in protocol.device_work:
        owner = state
        *parents, method = path.split(".")
        parts = parents + [method]
        try:
            for k, part in enumerate(parts):    # the last: the method
                found = getattr(owner, part)
                if k < len(parents):
                    owner = found
            original = found
        except AttributeError:      # the closest name of the object the path stopped at
            close = closest(part, [n for n in dir(owner) if not n.startswith("__")])
            guess = "" if close is None else messages.DID_YOU_MEAN.format(
                option=".".join(parts[:k] + [close] + parts[k + 1:]))
            raise SchemaError.of(messages.PROTOCOL_DEVICE_WORK_MISSING, path,
                                 protocol=protocol.name, kind=type(state).__name__,
                                 guess=guess) from None
        if not callable(original) or isinstance(original, type):
            raise SchemaError.of(messages.PROTOCOL_DEVICE_WORK_NOT_METHOD, path,
                                 protocol=protocol.name, kind=type(state).__name__,
                                 what=_what(model, original))
        attributes = getattr(owner, "__dict__", None)
        if isinstance(attributes, dict) and method not in attributes:
            made.append((owner, method))
        setattr(owner, method, _device_work(model, path, original))
    return made


def _what(model, value) -> str:
    """``value`` in a few words: ``a device tensor``, ``an int (3)``, ``the class Event``."""
    torch = import_torch()
    if isinstance(value, torch.Tensor):
        with model.passthrough():
            kind = model.memory(value)
        return {"device": "a device tensor", "pinned": "a pinned host tensor"}.get(
            kind, "a host tensor")
    if isinstance(value, type):
        return f"the class {value.__name__}"
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    shown = f" ({value!r})" if isinstance(value, (int, float, str, bool)) or value is None \
        else ""
    return f"{article} {name}{shown}"


def require_row_order(state, protocol) -> None:
    """``protocol.row_order`` names an attribute path of the built ``state`` (a
    ``SchemaError`` naming the part, the value and the fix otherwise)."""
    path = protocol.row_order
    if not path or not isinstance(path, str):
        return
    value = state
    for part in path.split("."):
        try:
            value = getattr(value, part)
        except Exception:       # noqa: BLE001 - a missing or failing attribute alike
            raise SchemaError.of(messages.PROTOCOL_ROW_ORDER_MISSING, path,
                                 protocol=protocol.name, kind=type(state).__name__,
                                 missing=part) from None


def release_state(made: list) -> None:
    """Undo ``prepare_state``'s device work of a run that ended: each was an attribute of
    its owner referring back to it (the owner's bound method), a cycle the garbage
    collector would have to find."""
    for owner, method in made:
        try:
            delattr(owner, method)
        except Exception:       # noqa: BLE001 - the owner's own attribute rules: leave it
            pass


class DeviceResultUsed(StandInUnsupported):
    """The code under test used what a call of device work returned (``NoResult``)."""


def _refuse(operation: str):
    def refuse(self, *args, **kwargs):
        raise DeviceResultUsed(self._label, operation)
    return refuse


class NoResult:
    """What a call of device work returns under the model: it is queued, so it has no
    result yet; any use of it stops the run as a limit of the model (exit 2, never a
    finding), where real device work would have returned its output tensor."""

    __slots__ = ("_label",)

    def __init__(self, label: str) -> None:
        self._label = label

    def __repr__(self) -> str:
        return f"<the result of device work {self._label!r}: not modelled>"

    def __getattr__(self, name: str):
        raise DeviceResultUsed(object.__getattribute__(self, "_label"), f"its attribute .{name}")

    __getitem__ = _refuse("an item of it")
    __setitem__ = _refuse("an assignment into it")
    __iter__ = _refuse("its items")
    __len__ = _refuse("its length")
    __bool__ = _refuse("its truth value")
    __call__ = _refuse("a call of it")
    __index__ = __int__ = __float__ = _refuse("its value as a number")
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse("a comparison with it")
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse("arithmetic on it")
    __truediv__ = __floordiv__ = __mod__ = __and__ = __or__ = _refuse("arithmetic on it")
    __array__ = _refuse("its value as an array")
    __hash__ = object.__hash__


#: the attribute of an exception device work raised: (its path, the model's location at
#: its launch), for ``raised_by_work``
WORK_RAISED = "_stagecheck_device_work"


def raised_by_work(exc: BaseException) -> str:
    """`` (raised by device work W, launched at step 1 (execute))`` for an exception queued
    device work raised (it ends the operation that made the device run it, often a later
    one: a synchronization), '' for any other."""
    work = getattr(exc, WORK_RAISED, None)
    if not (isinstance(work, tuple) and len(work) == 2):
        return ""
    label, location = work
    where = f"step {location[0]} ({location[1]})" if len(location) == 2 and \
        isinstance(location[0], int) else "the state's build"
    return messages.PROTOCOL_WORK_RAISED.format(work=label, where=where)


def _device_work(model, label: str, original):
    """``original`` made device work: a call is queued on the current stream, and runs
    when the device runs it; its tensor arguments on the device are what it reads, and
    those in pinned host memory it reads in place (vLLM's UVA buffers)."""
    torch = import_torch()
    names = _positional_names(original)

    def queued(*args, **kwargs):
        arguments = {names[k] if k < len(names) else f"arg{k}": a for k, a in enumerate(args)}
        arguments.update(kwargs)
        reads, scalars, pinned = {}, {}, {}
        for name, value in arguments.items():
            if isinstance(value, torch.Tensor):
                memory = model.memory(value)
                if memory == "device":
                    reads[name] = value
                elif memory == "pinned":
                    pinned[name] = value
            elif isinstance(value, (int, float, bool, str)) or value is None:
                scalars[name] = value
        launched = model.location

        def run():
            try:
                return original(*_plain(args), **_plain(kwargs)) if kwargs else \
                    original(*_plain(args))
            except Exception as exc:    # said where it ran: name the work and its launch
                if not hasattr(exc, WORK_RAISED):
                    try:
                        setattr(exc, WORK_RAISED, (label, launched))
                    except Exception:   # noqa: BLE001 (an exception without attributes)
                        pass
                raise
        model.launch(label, run, reads, scalars=scalars, pinned=pinned)
        return NoResult(label)

    queued.__name__ = getattr(original, "__name__", label)
    return queued


#: the positional parameters of device work, by function (every run makes its state
#: anew, so its bound methods are new; their functions are not)
_NAMES: dict = {}


def _positional_names(original) -> list:
    function = getattr(original, "__func__", None)
    key = (function, getattr(original, "__self__", None) is not None) \
        if function is not None and inspect.isfunction(function) else None
    if key is not None and key in _NAMES:
        return _NAMES[key]
    try:
        names = [p.name for p in inspect.signature(original).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    if key is not None:
        _NAMES[key] = names
    return names


def _plain(values):
    """``values`` with every device tensor as a plain tensor over the same memory: device
    work runs on the model's memory without the device tensor's dispatch (what it writes
    is still seen: ``DeviceModel.wrote``)."""
    torch = import_torch()
    if isinstance(values, dict):
        return {k: _plain_one(torch, v) for k, v in values.items()}
    Tensor = torch.Tensor
    if not any(isinstance(v, Tensor) and type(v) is not Tensor for v in values):
        return values                   # no device tensor among them: as they are
    return tuple([_plain_one(torch, v) for v in values])


def _plain_one(torch, value):
    if type(value) is not torch.Tensor and isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            return value.as_subclass(torch.Tensor)
    return value


#: what the device model calls a pinned allocation nothing named (``pinned tensor 3``)
_ALLOCATED = "pinned tensor "


def _name_tensors(model, state, only_unnamed: bool = False) -> None:
    """Name the memory of each tensor the state holds (to ``NAME_DEPTH``) after its
    attribute path; ``only_unnamed``: only memory the model has no name for, or only the
    allocation counter's (``pinned tensor 3``).

    Run at each step's start where pinned memory was allocated since the last (most
    steps of some runners): a value of a plain type (an int, a string) can hold no
    tensor and is no container, so it is passed over before its path is even written."""
    torch = import_torch()
    with torch._C.DisableTorchFunction():     # tensor metadata only: no dispatch for it
        _name_all(model, state, only_unnamed, torch.Tensor)


def _name_all(model, state, only_unnamed: bool, Tensor) -> None:
    seen: set[int] = set()
    # memory named at a shallower depth keeps that name: of two paths to one tensor the
    # shortest names it (``gpu_kv``, not ``load.dst_tensor`` of a handler holding it)
    named: set[tuple[int, int]] = set()
    queue = [(state, "")]
    for depth in range(NAME_DEPTH):
        following, here = [], []
        for obj, path in queue:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, (list, tuple)):        # a pool: pool[0], pool[1], ...
                items, form = list(enumerate(obj[:NAME_ITEMS])), _ITEM
            elif isinstance(obj, dict):
                items, form = list(obj.items())[:NAME_ITEMS], _KEY
            else:
                attributes = getattr(obj, "__dict__", None)
                if not isinstance(attributes, dict):
                    continue
                items, form = list(attributes.items()), _ATTRIBUTE
            for key, value in items:
                if type(value) in _LEAVES:      # no tensor, nothing to look into
                    continue
                if isinstance(value, Tensor):
                    if only_unnamed and id(value) in model.named_objects:
                        continue        # this very tensor was named after its path
                    kind = model.memory(value)
                    if kind != "pageable" and value.numel() and (
                            not only_unnamed or _unnamed_here(model, value)):
                        span = _span(value)
                        if (span.lo, span.hi) not in named:
                            here.append((span.lo, span.hi))
                            model.name_region(value, _path(path, key, form), kind=kind)
                elif isinstance(value, (list, tuple, dict)) or (
                        hasattr(value, "__dict__") and not _routine(value)
                        and not isinstance(value, (type, types.ModuleType))):
                    following.append((value, _path(path, key, form)))
        named.update(here)
        queue = following


def _path(path: str, key, form: str) -> str:
    """The path of a value of the state: ``path.key``, ``path[k]``, ``path['key']``."""
    if form is _ATTRIBUTE:
        return f"{path}.{key}" if path else key
    if form is _ITEM:
        return f"{path}[{key}]"
    return f"{path}[{key!r}]"


def _unnamed_here(model, value) -> bool:
    """Whether the model has no name for ``value``'s memory but its allocation counter's
    (torch function handling is off: ``_name_tensors``)."""
    region = model.regions.of(_span(value))
    return region is None or region.name.startswith(_ALLOCATED)


#: ``inspect.isroutine`` by type (it asks only the type), for ``_name_tensors``; at most
#: ``_ROUTINES_HELD`` types (it holds them: classes of code loaded again and again, as
#: mutants are, are let go)
_ROUTINES: dict = {}
_ROUTINES_HELD = 4096


def _routine(value) -> bool:
    kind = type(value)
    if value.__class__ is not kind:       # a value that says it is of another class
        return inspect.isroutine(value)
    known = _ROUTINES.get(kind)
    if known is None:
        if len(_ROUTINES) >= _ROUTINES_HELD:
            _ROUTINES.clear()
        known = _ROUTINES[kind] = inspect.isroutine(value)
    return known


#: ``_name_tensors``: values of these exact types are neither tensors nor looked into (plain
#: values and sets have no ``__dict__``; functions and methods are routines; the device
#: model's streams and events and the scheduler output of vLLM's built-in protocols hold
#: no memory of the state)
_LEAVES = frozenset({int, float, bool, str, bytes, complex, type(None), set, frozenset,
                     types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                     ModelStream, ModelEvent, ModelAcceleratorEvent,
                     vllm.SchedulerOutput, vllm.NewRequestData, vllm.SamplingParams,
                     vllm.CachedRequestData})
#: ``_name_tensors``: how a value's path is written (``.name``, ``[k]``, ``[repr(key)]``)
_ATTRIBUTE, _ITEM, _KEY = "attribute", "item", "key"
