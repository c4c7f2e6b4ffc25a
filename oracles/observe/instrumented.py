"""The instrumented backend of ``observe``: every host write and copy, in order.

Writes through ``.np`` (an ndarray subclass) and through ``.cpu`` (a tensor
subclass) are logged as they happen, with the slots they touch. Anything that
bypasses both (``np.copyto``, ufunc ``out=``, a raw pointer) is still caught as an
``untracked`` write by comparing contents with the last logged state before every
copy and at the end of the run; only such a write of an equal value is invisible.

On the CPU the buffer lives in numpy arrays and its torch views are made when the
code first touches ``.cpu`` or ``.gpu`` (torch is not imported before); on CUDA the
host side is a pinned tensor and the mirror a device tensor from the start.
"""

from __future__ import annotations

import numpy as np

from stagecheck.oracles.observe.fast import _LazyTensor
from stagecheck.spec.observation import Copy, HostWrite, StaleTransfer

__all__ = ["InstrumentedBackend", "InstrumentedBuffer", "RecordingArray"]

# storage address -> InstrumentedBuffer; lets derived tensor views find their buffer
_BY_STORAGE: dict[int, "InstrumentedBuffer"] = {}

_NUMPY = {"int32": np.int32, "int64": np.int64, "bool": np.bool_}


def _slots_of(view_offset: int, view_stride: int, length: int, key) -> tuple[int, ...]:
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        k = int(key)
        if k < 0:
            k += length
        return (view_offset + k * view_stride,)
    try:
        local = np.arange(length)[key]
    except Exception:
        local = np.arange(length)
    return tuple(int(view_offset + j * view_stride) for j in np.atleast_1d(local))


class RecordingArray(np.ndarray):
    """``.np`` of an instrumented buffer: logs ``__setitem__`` and ``fill`` on it and on views
    of it."""

    _owner: "InstrumentedBuffer | None" = None

    def __array_finalize__(self, obj) -> None:
        self._owner = getattr(obj, "_owner", None)

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self._note(key)

    def fill(self, value) -> None:
        super().fill(value)
        self._note(slice(None))

    def _note(self, key) -> None:
        owner = self._owner
        if owner is not None and self.ndim == 1:
            if self is owner.np:
                offset, stride = 0, 1
            else:
                offset = (self.__array_interface__["data"][0] - owner.address) // self.itemsize
                stride = self.strides[0] // self.itemsize
            owner.note_write(_slots_of(offset, stride, self.shape[0], key), "np")


_RECORDING_TENSOR = None


def _recording_tensor_class():
    """``RecordingTensor``, defined on first use (it needs torch)."""
    global _RECORDING_TENSOR
    if _RECORDING_TENSOR is not None:
        return _RECORDING_TENSOR
    import torch  # heavy: only once the code touches a torch view (module doc)

    not_writes = frozenset({"requires_grad_", "share_memory_", "retain_grad", "record_stream_",
                            "pin_memory", "untyped_storage"})

    def note_tensor_write(target, key) -> None:
        with torch._C.DisableTorchFunctionSubclass():
            owner = _BY_STORAGE.get(target.untyped_storage().data_ptr())
            if owner is None or target.dim() != 1:
                return
            offset = (target.data_ptr() - owner.address) // target.element_size()
            length, stride = target.shape[0], target.stride(0)
        owner.note_write(_slots_of(offset, stride, length, key), "cpu")

    class RecordingTensor(torch.Tensor):
        """``.cpu`` of an instrumented buffer: logs ``__setitem__`` and in-place ops on it."""

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = super().__torch_function__(func, types, args, kwargs)
            name = getattr(func, "__name__", "")
            target = None
            if name == "__setitem__" or (name.endswith("_") and not name.startswith("_")
                                         and name not in not_writes):
                target = args[0] if args else None
            elif isinstance(kwargs.get("out"), torch.Tensor):
                target = kwargs["out"]
            if isinstance(target, torch.Tensor) and target.device.type == "cpu":
                note_tensor_write(target, args[1] if name == "__setitem__" else slice(None))
            return result

    _RECORDING_TENSOR = RecordingTensor
    return RecordingTensor


class _QueuedCopy:
    """A copy that was issued and may not have executed yet, with what the host held then."""

    def __init__(self, start: int, stop: int, snapshot: np.ndarray, event) -> None:
        self.start, self.stop, self.snapshot, self.event = start, stop, snapshot, event

    def executed(self) -> bool:
        return self.event is not None and self.event.query()

    def overlaps(self, slots) -> bool:
        return any(self.start <= s < self.stop for s in slots)


class InstrumentedBuffer:
    """A paired buffer with given initial contents whose host writes and copies are logged.

    On CUDA the host side is pinned and copies are non-blocking: each queued copy keeps a
    snapshot of the range and a CUDA event, so a host write into a range whose copy has
    not executed is logged as a hazard. ``deferred=True`` models the same on the CPU:
    copies execute only at ``complete_copies()``, reading host memory then, the way a
    DMA engine reads a pinned page late.
    """

    def __init__(self, name: str, initial_cpu: list, initial_gpu: list, dtype: str,
                 device: str, events: list, deferred: bool = False) -> None:
        self.name, self.events, self.dtype, self.device = name, events, dtype, device
        self.cuda = device == "cuda"
        self._cpu = self._gpu = None
        if self.cuda:
            import torch  # heavy: only once the code touches a torch view (module doc)
            tdtype = {"int32": torch.int32, "int64": torch.int64, "bool": torch.bool}[dtype]
            plain = torch.tensor(initial_cpu, dtype=tdtype).pin_memory()
            self._raw = plain.numpy()
            self._plain_cpu = plain
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
        self.asynchronous = self.cuda or deferred
        self.deferred = deferred and not self.cuda
        self.queued: list[_QueuedCopy] = []
        _BY_STORAGE[self.address] = self

    # ---------------------------------------------------------------- torch views
    @property
    def cpu(self):
        if self._cpu is None:
            if self._plain_cpu is None:
                import torch  # heavy: only once the code touches a torch view (module doc)
                self._plain_cpu = torch.from_numpy(self._raw)
            self._cpu = self._plain_cpu.as_subclass(_recording_tensor_class())
        return self._cpu

    @property
    def gpu(self):
        if self._gpu is None:
            import torch  # heavy: only once the code touches a torch view (module doc)
            self._gpu = torch.from_numpy(self._mirror)
        return self._gpu

    # ---------------------------------------------------------------- logging
    def _into_pending_copy(self, slots) -> bool:
        return any(q.overlaps(slots) and not q.executed() for q in self.queued)

    def note_write(self, slots: tuple[int, ...], via: str) -> None:
        hazard = self.asynchronous and self._into_pending_copy(slots)
        self.events.append(HostWrite(self.name, slots, via, hazard))
        idx = [s for s in slots if 0 <= s < self._raw.shape[0]]
        self._last_seen[idx] = self._raw[idx]

    def sweep_untracked(self) -> None:
        """Log writes that bypassed the recording views (seen as changed values)."""
        changed = np.flatnonzero(self._raw != self._last_seen)
        if changed.size:
            slots = tuple(int(i) for i in changed)
            hazard = self.asynchronous and self._into_pending_copy(slots)
            self.events.append(HostWrite(self.name, slots, "untracked", hazard))
            self._last_seen[changed] = self._raw[changed]

    # ---------------------------------------------------------------- copies
    def copy_to_gpu(self, n: int | None = None):
        self.sweep_untracked()
        size = self._raw.shape[0]
        stop = size if n is None else len(range(size)[:n])
        self.events.append(Copy(self.name, 0, stop, n))
        if not self.asynchronous:
            self._mirror[:stop] = self._raw[:stop]
            return _LazyTensor(self, stop)
        snapshot = self._raw[:stop].copy()
        if self.deferred:
            self.queued.append(_QueuedCopy(0, stop, snapshot, None))
            return _LazyTensor(self, stop)
        import torch  # heavy: only once the code touches a torch view (module doc)

        from stagecheck.impl.buffer import copy_prefix  # imports torch (see above)
        result = copy_prefix(self._plain_cpu, self._gpu, n)
        event = torch.cuda.Event()
        event.record()
        self.queued.append(_QueuedCopy(0, stop, snapshot, event))
        return result

    def complete_copies(self) -> None:
        """Let every queued copy execute, then check what the device received."""
        self.sweep_untracked()
        if self.deferred:
            for q in self.queued:       # the DMA reads host memory now, not when queued
                self._mirror[q.start:q.stop] = self._raw[q.start:q.stop]
        elif self.queued:
            import torch  # heavy: only once the code touches a torch view (module doc)
            torch.cuda.synchronize()
        latest: dict[int, int] = {}
        for q in self.queued:
            for slot in range(q.start, q.stop):
                latest[slot] = q.snapshot[slot - q.start].item()
        if latest:
            slots = sorted(latest)
            received = [self.final_gpu()[s] for s in slots]
            queued = [latest[s] for s in slots]
            bad = [i for i, (a, b) in enumerate(zip(queued, received)) if a != b]
            if bad:
                self.events.append(StaleTransfer(self.name, tuple(slots[i] for i in bad),
                                                 tuple(queued[i] for i in bad),
                                                 tuple(received[i] for i in bad)))
        self.queued.clear()

    def release(self) -> None:
        _BY_STORAGE.pop(self.address, None)

    def final_cpu(self) -> list:
        return self._raw.tolist()

    def final_gpu(self) -> list:
        if self._mirror is not None:
            return self._mirror.tolist()
        return self._gpu.cpu().tolist()


class InstrumentedBackend:
    """The ``observe`` backend of instrumented buffers on one device."""

    def __init__(self, device: str = "cpu", deferred: bool = False) -> None:
        self.device, self.deferred = device, deferred

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list,
                    events: list) -> InstrumentedBuffer:
        return InstrumentedBuffer(name, cpu, gpu, dtype, self.device, events, self.deferred)

    def passes_through(self, exc: BaseException) -> bool:
        return False
