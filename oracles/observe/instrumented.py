"""The instrumented backend of ``observe``: every host write and copy, in order.

Writes through ``.np`` (an ndarray subclass) and through ``.cpu`` (a tensor subclass) are
logged as they happen, with the slots they touch; a write of no element is no write and
is not logged. Anything that bypasses both (``np.copyto``, ufunc ``out=``, a raw pointer)
is still caught as an ``untracked`` write by comparing contents with the last logged state
before every copy and at the end of the run; only such a write of an equal value is
invisible.

Every form of copy of the host side into the mirror is one ``Copy`` (``copy_to_gpu(n)``,
``gpu[a:b].copy_(cpu[a:b], non_blocking=...)``, ``torch._foreach_copy_``, ``gpu[a:b] =
cpu[a:b]``, of ``cpu[a:b].to(device)`` or a clone, from ``torch.from_numpy(np[a:b])``...):
``.cpu`` and ``.gpu`` are tensor subclasses whose copies and assignments are classified by
``oracles/device/forms.py``, the one rule for what a copy of a buffer is.

A plain CPU run copies at once, in numpy. With asynchronous copies (CUDA, or
``deferred=True``: the CPU model of them) every copy goes through the device model
(``oracles/device``): real non-blocking copies from pinned memory on CUDA, the model's
queue on the CPU (its copies read host memory only when completed, as a DMA engine reads a
pinned page late). A host write into a range a pending upload still reads is a hazard.

On the CPU the buffer lives in numpy arrays and its torch views are made when the code
first touches ``.cpu`` or ``.gpu`` (torch is not imported before); on CUDA the host side
is a pinned tensor and the mirror a device tensor from the start.
"""

from __future__ import annotations

import numpy as np

from stagecheck.oracles.device import device_model
from stagecheck.oracles.device.forms import CLONING, MOVING, Pairs, mirror_copy
from stagecheck.oracles.device.intercept import is_device_spec
from stagecheck.oracles.device.spans import Span, span_of
from stagecheck.oracles.device.torchload import import_torch
from stagecheck.oracles.observe.fast import _as_left, _LazyTensor
from stagecheck.oracles.observe.written import (FIRST_ARGUMENT_WRITERS, RecordingFlat, masked,
                                                 one_slot_write, slots_of, tensor_key,
                                                 view_slots)
from stagecheck.spec.observation import Copy, HostWrite, StaleTransfer
from stagecheck.spec.schema_mistakes import ViewsKept

__all__ = ["InstrumentedBackend", "InstrumentedBuffer", "RecordingArray"]

#: the host side and mirror of every live instrumented buffer, by address
_PAIRS = Pairs()

_NUMPY = {"int32": np.int32, "int64": np.int64, "bool": np.bool_}


class RecordingArray(np.ndarray):
    """``.np`` of an instrumented buffer: logs ``__setitem__`` and ``fill`` on it, views too."""

    _owner: "InstrumentedBuffer | None" = None

    def __array_finalize__(self, obj) -> None:
        self._owner = getattr(obj, "_owner", None)

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        owner = self._owner
        if type(key) is int and owner is not None and owner.model is None \
                and self is owner.np:
            # one element of the buffer itself, copies synchronous: a staging loop's usual
            # write, logged as ``_note`` logs it (the slot is in range: the write above
            # raised otherwise) without its general path over views and index arrays
            slot = key + self.shape[0] if key < 0 else key
            owner.events.append(one_slot_write(owner.name, slot))
            owner._last_seen[slot] = owner._raw[slot]
            return
        self._note(key)

    def fill(self, value) -> None:
        super().fill(value)
        self._note(slice(None))

    def put(self, indices, values, mode="raise") -> None:
        super().put(indices, values, mode)
        # an empty list of indices is a float array: as integers, it writes no slot
        self._note(np.asarray(indices).astype(np.intp).reshape(-1) % max(self.shape[0], 1)
                   if self.ndim == 1 else slice(None))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """A ufunc writing into a view of the buffer (``out=``, an in-place operator) is
        a write of every element of that view; it runs on plain arrays."""
        out = kwargs.get("out") or ()
        plain = [x.view(np.ndarray) if isinstance(x, RecordingArray) else x for x in inputs]
        if out:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, RecordingArray) else o
                                  for o in out)
        result = getattr(ufunc, method)(*plain, **kwargs)
        for o in out:
            if isinstance(o, RecordingArray):
                o._note(slice(None))
        if out and len(out) == 1 and isinstance(out[0], RecordingArray):
            return out[0]                  # ``a += 1`` binds ``a`` to what this returns
        return result

    def __array_function__(self, func, types, args, kwargs):
        """``np.copyto``, ``np.putmask``, ``np.place`` into a view of the buffer write the
        elements their mask (``where`` for ``copyto``) selects: all of them without one;
        an all-False mask writes none."""
        result = super().__array_function__(func, types, args, kwargs)
        if func in FIRST_ARGUMENT_WRITERS:
            written = args[0] if args else kwargs.get("dst", kwargs.get("a", kwargs.get("arr")))
            if isinstance(written, RecordingArray):
                written._note(masked(func, written, args, kwargs))
        return result

    @property
    def flat(self):
        """``ndarray.flat``, its writes logged (``a.flat[0] = v``)."""
        return RecordingFlat(self)

    def _note(self, key, flat: bool = False) -> None:
        owner = self._owner
        if owner is None:
            return
        if self is owner.np and not flat:
            owner.note_write(slots_of(0, 1, self.shape[0], key), "np")
            return
        offset = (self.__array_interface__["data"][0] - owner.address) // self.itemsize
        strides = tuple(st // self.itemsize for st in self.strides)
        owner.note_write(view_slots(offset, strides, self.shape, key, flat), "np")


_TENSOR_CLASSES = None


def _recording_classes():
    """``(RecordingTensor, RecordingMirror)``, defined on first use (they need torch)."""
    global _TENSOR_CLASSES
    if _TENSOR_CLASSES is not None:
        return _TENSOR_CLASSES
    torch = import_torch()
    not_writes = frozenset({"requires_grad_", "share_memory_", "retain_grad", "record_stream_",
                            "pin_memory", "untyped_storage"})
    # reads of a mirror's values on the host: each waits for the device's queued work
    host_reads = frozenset({"tolist", "item", "numpy", "cpu", "__array__", "__repr__",
                            "__format__", "__bool__", "__int__", "__float__", "__index__"})
    plain = torch._C.DisableTorchFunctionSubclass

    def owner_of(t):    # the buffer t lies in, or was made or cloned from
        span = span_of(t) if isinstance(t, torch.Tensor) else None
        side = span and (_PAIRS.side(span) or _PAIRS.clone_side(span))
        return None if not side else side[0].owner

    def note_tensor_write(target, key) -> None:
        with plain():
            side = _PAIRS.side(span_of(target))
            if side is None or side[0].kind != "pinned":
                return
            owner = side[0].owner
            offset = (target.data_ptr() - owner.address) // target.element_size()
            shape, strides = tuple(target.shape), tuple(target.stride())
        owner.note_write(view_slots(offset, strides, shape, key), "cpu")

    recording: set = {torch.Tensor}     # the classes a copy's sides are made plain from

    def copied(dst, src, non_blocking: bool) -> bool:
        """Route a copy between a buffer's sides; False when it is none of ours."""
        owner = owner_of(dst) or owner_of(src)
        if owner is None:
            return False
        with plain():    # the recording views become plain; a device model's tensor stays
            dst_plain, src_plain = (t.as_subclass(torch.Tensor) if type(t) in recording
                                    else t for t in (dst, src))
        return owner.copy(dst_plain, src_plain, non_blocking)

    def hooked(cls, func, types, args, kwargs):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "_foreach_copy_" and len(args) > 1 and all(     # a copy_ per pair
                isinstance(t, torch.Tensor) for t in (*args[0], *args[1])):
            for dst, src in zip(args[0], args[1]):
                dst.copy_(src, *args[2:], **kwargs)
            return list(args[0])
        if name == "copy_" and len(args) > 1 and isinstance(args[1], torch.Tensor):
            if copied(args[0], args[1], bool(kwargs.get("non_blocking",
                                                        args[2] if len(args) > 2 else False))):
                return args[0]
        elif name == "__setitem__" and isinstance(args[2], torch.Tensor) \
                and args[2].dim() > 0 and not isinstance(args[1], (torch.Tensor, list)):
            with plain():
                view = args[0][args[1]]
            if copied(view, args[2], False):
                return None
        elif name in ("to", "cuda") and args:
            owner = owner_of(args[0])
            if owner is not None and owner.model is not None:
                moved = owner.to_device(func, args, kwargs)
                if moved is not None:
                    return moved
        elif name in host_reads and args and type(args[0]) is RecordingMirror:
            owner = owner_of(args[0])
            if owner is not None and owner.model is not None:
                owner.model.sync_all()    # a blocking read of the device: the copies ran
        with plain():
            result = func(*args, **kwargs)
        target = None
        if name == "__setitem__" or (name.endswith("_") and not name.startswith("_")
                                     and name not in not_writes):
            target = args[0] if args else None
        elif isinstance(kwargs.get("out"), torch.Tensor):
            target = kwargs["out"]
        if isinstance(target, torch.Tensor) and target.device.type == "cpu":
            with plain():
                key = tensor_key(torch, name, args, target)
            note_tensor_write(target, key)
        if (name in CLONING or name in MOVING) and isinstance(result, torch.Tensor) \
                and args and isinstance(args[0], torch.Tensor) and result is not args[0]:
            owner = owner_of(args[0])    # a clone, or ``to``'s copy: a copy from it is of the
            with plain():                # range it came from (a host clone stays recorded)
                for pairs in (_PAIRS, owner.model.pairs) if owner and owner.model else (_PAIRS,):
                    pairs.cloned_from(result, args[0])
                if owner is not None and name in CLONING and result.device.type == "cpu":
                    result = result.as_subclass(cls)
        elif isinstance(result, torch.Tensor) or type(result) in (tuple, list) \
                or name == "__iter__":
            result = recorded(cls, result)
        return result

    def recorded(cls, result):
        """A view of a buffer stays recorded: a tensor, each piece ``split``, ``chunk`` or
        ``unbind`` gives, each row iterating gives."""
        if isinstance(result, torch.Tensor):
            if isinstance(result, cls) or owner_of(result) is None:
                return result
            with plain():
                return result.as_subclass(cls)
        pieces = [recorded(cls, t) if isinstance(t, torch.Tensor) else t for t in result]
        return type(result)(pieces) if type(result) in (tuple, list) else iter(pieces)

    class RecordingTensor(torch.Tensor):
        """``.cpu`` of an instrumented buffer: logs ``__setitem__`` and in-place ops on it,
        and routes its copies into the mirror."""

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return hooked(cls, func, types, args, kwargs)

    class RecordingMirror(torch.Tensor):
        """``.gpu`` of an instrumented buffer: copies into it from its host side are
        ``Copy`` events."""

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return hooked(cls, func, types, args, kwargs)

    _TENSOR_CLASSES = (RecordingTensor, RecordingMirror)
    recording.update(_TENSOR_CLASSES)
    return _TENSOR_CLASSES


class InstrumentedBuffer(ViewsKept):
    """A paired buffer with given initial contents whose host writes and copies are logged.

    ``deferred=True`` (or a CUDA device) makes copies asynchronous through a device model
    (``model``: the one every buffer of a call shares; made here when not given).
    """

    def __init__(self, name: str, initial_cpu: list, initial_gpu: list, dtype: str,
                 device: str, events: list, deferred: bool = False, model=None) -> None:
        self.name, self.events, self.dtype, self.device = name, events, dtype, device
        self.cuda = device == "cuda"
        self.asynchronous = self.cuda or deferred
        self._cpu = self._gpu_view = self._gpu = None
        self._requested: tuple | None = None       # (n,) while copy_to_gpu(n) runs
        self.queued: list[tuple[int, int, np.ndarray]] = []
        if self.cuda:
            torch = import_torch()
            tdtype = {"int32": torch.int32, "int64": torch.int64, "bool": torch.bool}[dtype]
            host = torch.tensor(initial_cpu, dtype=tdtype).pin_memory()
            self._raw = host.numpy()
            self._plain_cpu = host
            self._gpu = torch.tensor(initial_gpu, dtype=tdtype, device=device)
            self._mirror = None
        else:
            self._raw = np.array(initial_cpu, dtype=_NUMPY[dtype])
            self._plain_cpu = None
            self._mirror = np.array(initial_gpu, dtype=_NUMPY[dtype])
        self.address = self._raw.ctypes.data
        self.np = self._raw.view(RecordingArray)
        self.np._owner = self
        self._last_seen = self._raw.copy()
        self._registered = False
        self.model = None
        if self.asynchronous:
            if model is None:
                model = device_model("cuda" if self.cuda else "cpu", completion="lazy")
            self.model = model
            model.pair(self, self._plain_host(), self._plain_mirror())
            self._register()

    # ---------------------------------------------------------------- torch views
    def _plain_host(self):
        if self._plain_cpu is None:
            self._plain_cpu = import_torch().from_numpy(self._raw)
        return self._plain_cpu

    def _plain_mirror(self):
        if self._gpu is None:
            self._gpu = import_torch().from_numpy(self._mirror)
        return self._gpu

    def _register(self) -> None:
        if not self._registered:
            _PAIRS.add(self, span_of(self._plain_host()), span_of(self._plain_mirror()))
            self._registered = True

    @property
    def cpu(self):
        if self._cpu is None:
            self._register()
            self._cpu = self._plain_host().as_subclass(_recording_classes()[0])
        return self._cpu

    @property
    def gpu(self):
        if self._gpu_view is None:
            self._register()
            self._gpu_view = self._plain_mirror().as_subclass(_recording_classes()[1])
        return self._gpu_view

    # ---------------------------------------------------------------- logging
    def _host_span(self, slots) -> Span:
        item = self._raw.itemsize
        addresses = tuple(self.address + s * item for s in sorted(set(slots)))
        return Span(addresses[0], addresses[-1] + item, item, addresses)

    def note_write(self, slots: tuple[int, ...], via: str) -> None:
        slots = tuple(s for s in slots if 0 <= s < self._raw.shape[0])
        if not slots:
            return                    # a write of no element is no write
        pending: tuple[int, ...] = ()
        if self.model is not None:
            pending = self.model.pending_reads(self._host_span(slots))
        self.events.append(HostWrite(self.name, slots, via, bool(pending), pending))
        idx = list(slots)
        self._last_seen[idx] = self._raw[idx]

    def sweep_untracked(self) -> None:
        """Log writes that bypassed the recording views (seen as changed values)."""
        changed = np.flatnonzero(self._raw != self._last_seen)
        if changed.size:
            slots = tuple(int(i) for i in changed)
            self._last_seen[changed] = self._raw[changed]
            pending = self.model.pending_reads(self._host_span(slots)) if self.model else ()
            self.events.append(HostWrite(self.name, slots, "untracked", bool(pending),
                                         pending))

    # ---------------------------------------------------------------- copies
    def on_copy(self, start: int, stop: int) -> None:
        """A copy of host slots ``[start, stop)`` into the mirror was issued (any form)."""
        self.sweep_untracked()
        if self._requested is not None:
            requested = self._requested[0]
        else:
            requested = None if (start, stop) == (0, self._raw.shape[0]) else stop
        self.events.append(Copy(self.name, start, stop, requested))
        if self.asynchronous:
            self.queued.append((start, stop, self._raw[start:stop].copy()))

    def copy(self, dst, src, non_blocking: bool) -> bool:
        """A copy between tensors over this buffer's memory: through the device model, or
        at once; False when it is not a copy of the host side into the mirror (the caller
        runs it as it is)."""
        self.sweep_untracked()
        if self.model is not None:
            host = self.model.memory(dst) != "device" and self.model.memory(src) != "device"
            self.model.copy(dst, src, non_blocking)
            side = _PAIRS.side(span_of(dst)) if host else None
            if side is not None and side[0].kind == "pinned":   # a host copy into the
                side[0].owner.note_write(side[1], "cpu")      # host side: a host write
            return True
        found = mirror_copy(_PAIRS, span_of(dst), span_of(src))
        if found is None:
            return False
        owner, start, stop = found
        owner.on_copy(start, stop)
        with import_torch()._C.DisableTorchFunction():
            dst.copy_(src)
        return True

    def to_device(self, func, args, kwargs):
        """``t.to(device)`` / ``t.cuda()`` of this buffer's host memory, through the model
        (None: not a move to the device)."""
        torch = import_torch()
        t = args[0].as_subclass(torch.Tensor)
        if getattr(func, "__name__", "") == "cuda":
            device, dtype, non_blocking = "cuda", None, kwargs.get("non_blocking", False)
        else:
            kw = {k: v for k, v in kwargs.items() if k != "copy"}
            device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args[1:], **kw)
        if not is_device_spec(device) and not self._mirror_device(device, non_blocking):
            return None
        self.sweep_untracked()
        return self.model.to_device(t, dtype, bool(non_blocking))

    def _mirror_device(self, device, non_blocking) -> bool:
        """Under the CPU model of deferred copies the mirror lives in host memory, so
        ``cpu[:n].to(buf.gpu.device, non_blocking=True)`` names the CPU: a non-blocking
        move of this buffer's host memory to the mirror's device is the upload it is on
        CUDA (a blocking ``.to("cpu")`` stays what it is, a no-op)."""
        if self.cuda or not non_blocking or device is None:
            return False
        return str(device) == str(self._plain_mirror().device)

    def copy_to_gpu(self, n: int | None = None):
        size = self._raw.shape[0]
        stop = size if n is None else len(range(size)[:n])
        if not self.asynchronous:
            self.sweep_untracked()
            self.events.append(Copy(self.name, 0, stop, n))
            self._mirror[:stop] = self._raw[:stop]
            return _LazyTensor(self, stop)
        self._requested = (n,)
        try:
            self.copy(self._plain_mirror()[:stop], self._plain_host()[:stop], True)
        finally:
            self._requested = None
        if self.cuda:
            return self._gpu[:stop]
        return _LazyTensor(self, stop)

    def complete_copies(self) -> None:
        """Let every queued copy execute, then check what the device received."""
        self.sweep_untracked()
        if self.model is not None:
            self.model.sync_all()
        latest: dict[int, int] = {}
        for start, stop, snapshot in self.queued:
            for slot in range(start, stop):
                latest[slot] = snapshot[slot - start].item()
        if latest:
            slots = sorted(latest)
            final = self.final_gpu()
            received = [final[s] for s in slots]
            queued = [latest[s] for s in slots]
            bad = [i for i, (a, b) in enumerate(zip(queued, received)) if a != b]
            if bad:
                self.events.append(StaleTransfer(self.name, tuple(slots[i] for i in bad),
                                                 tuple(queued[i] for i in bad),
                                                 tuple(received[i] for i in bad)))
        self.queued.clear()

    def release(self) -> None:
        if self._registered:
            _PAIRS.remove(self)
            self._registered = False

    def own_memory(self) -> tuple:
        mirror = self._mirror.ctypes.data if self._mirror is not None and self._mirror.size \
            else self._gpu.untyped_storage().data_ptr() if self._gpu is not None else 0
        size = self._raw.shape[0]
        return (("cpu", self._cpu, self.address if self._raw.size else 0, size),
                ("gpu", self._gpu_view, mirror, size))

    def final_cpu(self) -> list:
        return self._raw.tolist()

    def final_gpu(self) -> list:
        view = self._gpu_view
        if view is not None and view.numel() != self._raw.shape[0]:
            return _as_left(view)       # resized by the code
        if self._mirror is not None:
            return self._mirror.tolist()
        return self._gpu.cpu().tolist()


class InstrumentedBackend:
    """The ``observe`` backend of instrumented buffers on one device; with asynchronous
    copies, the buffers of one call share one device model."""

    def __init__(self, device: str = "cpu", deferred: bool = False, model=None) -> None:
        self.device, self.deferred = device, deferred
        self.kept: dict = {}       # what ``Builder`` made for one call, for the next
        self._events: list | None = None
        self._model = model
        self._shared = model is not None      # every buffer on this model (a protocol's)
        if (device == "cuda" or deferred) and model is None:
            # the device model needs torch: import it now, before any call is timed
            device_model(device, "lazy")

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list,
                    events: list) -> InstrumentedBuffer:
        model = self._model if self._shared else None
        if (self.device == "cuda" or self.deferred) and not self._shared:
            if events is not self._events or self._model is None:
                self._events, self._model = events, device_model(self.device, "lazy")
            model = self._model
        return InstrumentedBuffer(name, cpu, gpu, dtype, self.device, events, self.deferred,
                                  model)

    def passes_through(self, exc: BaseException) -> bool:
        return False
