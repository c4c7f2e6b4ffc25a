"""The fast backend of ``observe``: paired buffers over numpy, torch only when touched.

``.np`` is a plain numpy array (numpy 2 int32/bool semantics, as the real buffer's
``.np``); ``.cpu`` and ``.gpu`` are torch tensors sharing the memory of the host view
and of the mirror, made on first use; ``copy_to_gpu(n)`` copies ``[0, n)`` into the
mirror at once (a CPU run's copies are synchronous) and logs a ``Copy``. Every other form
of the same copy (``gpu[:n].copy_(cpu[:n], non_blocking=True)``, ``gpu[:n] = cpu[:n]``, an
assignment of ``cpu[:n].to(device)``...) logs the same ``Copy``: ``.cpu`` and ``.gpu``
are tensor subclasses whose copies are classified by ``oracles/device/forms.py`` (the one
rule for what a copy of a buffer is); this costs only code that touches them. Host writes
are not logged one by one: a write is seen in the final contents, and a write after
a copy of a different value in the mirror (``mirror_consistency``). What only the
order of writes shows (an equal value written again after its copy, a write into a
buffer that must not be staged of the value it held) is the instrumented backend's
job, which the engine runs on flagged and sampled examples.

Staging code that never touches ``.cpu``/``.gpu`` (or the tensor ``copy_to_gpu``
returns) runs without importing torch, so a worker starts in a fraction of a second.
"""

from __future__ import annotations

import numpy as np

from stagecheck.oracles.device.forms import CLONING, MOVING, Pairs, mirror_copy
from stagecheck.oracles.device.spans import span_of
from stagecheck.oracles.device.torchload import import_torch
from stagecheck.oracles.observe.build import keep
from stagecheck.spec.observation import Copy
from stagecheck.spec.schema_mistakes import ViewsKept

__all__ = ["FastBackend", "FastBuffer", "FastCudaBackend", "FastCudaBuffer"]

_NUMPY = {"int32": np.int32, "int64": np.int64, "bool": np.bool_}
#: the host side and mirror of every fast buffer whose torch views were made, by address
_PAIRS = Pairs()
_HOOKED = None


def _hooked_class():
    """The tensor subclass of ``.cpu`` and ``.gpu`` (made on first use: it needs torch)."""
    global _HOOKED
    if _HOOKED is not None:
        return _HOOKED
    torch = import_torch()

    def copied(dst, src) -> None:
        with torch._C.DisableTorchFunctionSubclass():
            found = mirror_copy(_PAIRS, span_of(dst), span_of(src))
        if found is not None:
            owner, start, stop = found
            owner.on_copy(start, stop)

    class CopyWatchingTensor(torch.Tensor):
        """A side of a fast buffer: a copy of its host slots into its mirror logs a Copy."""

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name == "copy_" and len(args) > 1 and isinstance(args[1], torch.Tensor):
                copied(args[0], args[1])
            elif name == "_foreach_copy_" and len(args) > 1:     # a copy_ per pair
                for dst, src in zip(args[0], args[1]):
                    if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
                        copied(dst, src)
            elif name == "__setitem__" and len(args) > 2 and isinstance(args[2], torch.Tensor) \
                    and args[2].dim() > 0 and not isinstance(args[1], (torch.Tensor, list)):
                with torch._C.DisableTorchFunctionSubclass():
                    view = args[0][args[1]]
                copied(view, args[2])
            result = super().__torch_function__(func, types, args, kwargs)
            if (name in CLONING or name in MOVING) and isinstance(result, torch.Tensor) \
                    and args and result is not args[0] and isinstance(args[0], torch.Tensor):
                with torch._C.DisableTorchFunctionSubclass():
                    if name in CLONING:
                        _PAIRS.cloned_from(result, args[0])
                    else:
                        _PAIRS.made_from(result, args[0])
            return result

    _HOOKED = CopyWatchingTensor
    return CopyWatchingTensor


def _logged_copy(buffer, start: int, stop: int, size: int) -> None:
    """Log a copy of ``buffer``'s ``[start, stop)`` made in a form other than
    ``copy_to_gpu`` (``requested``: the stop of a range from 0, None for the whole)."""
    requested = None if (start, stop) == (0, size) else stop
    buffer.events.append(Copy(buffer.name, start, stop, requested))


class _LazyTensor:
    """What ``copy_to_gpu`` returns: the mirror's slice, made a tensor on first use."""

    __slots__ = ("_buffer", "_stop")

    def __init__(self, buffer: "FastBuffer", stop: int) -> None:
        self._buffer, self._stop = buffer, stop

    def _tensor(self):
        return self._buffer.gpu[: self._stop]

    def __getattr__(self, name: str):
        return getattr(self._tensor(), name)

    def __getitem__(self, key):
        return self._tensor()[key]

    def __len__(self) -> int:
        return self._stop

    def __repr__(self) -> str:
        return repr(self._tensor())


class FastBuffer(ViewsKept):
    """A ``CpuGpuBuffer`` of given contents for a CPU run, cheap to make and to read."""

    __slots__ = ("name", "np", "mirror", "events", "_cpu", "_gpu")

    def __init__(self, name: str, dtype: str, initial_cpu: list, initial_gpu: list,
                 events: list, arrays: tuple | None = None) -> None:
        self.name, self.events = name, events
        if arrays is None:
            self.np = np.array(initial_cpu, dtype=_NUMPY[dtype])
            self.mirror = np.array(initial_gpu, dtype=_NUMPY[dtype])
        else:       # the same contents made for another call: copied, its own memory
            self.np, self.mirror = arrays[0].copy(), arrays[1].copy()
        self._cpu = self._gpu = None

    def _views(self) -> None:
        torch = import_torch()
        cls = _hooked_class()
        host, mirror = torch.from_numpy(self.np), torch.from_numpy(self.mirror)
        _PAIRS.add(self, span_of(host), span_of(mirror))
        self._cpu, self._gpu = host.as_subclass(cls), mirror.as_subclass(cls)

    @property
    def cpu(self):
        if self._cpu is None:
            self._views()
        return self._cpu

    @property
    def gpu(self):
        if self._gpu is None:
            self._views()
        return self._gpu

    def on_copy(self, start: int, stop: int) -> None:
        """A copy of host slots ``[start, stop)`` into the mirror, in a form other than
        ``copy_to_gpu`` (the tensor op itself does the copying)."""
        _logged_copy(self, start, stop, self.np.shape[0])

    def copy_to_gpu(self, n: int | None = None):
        size = self.np.shape[0]
        stop = size if n is None else len(range(size)[:n])
        self.events.append(Copy(self.name, 0, stop, n))
        self.mirror[:stop] = self.np[:stop]
        return _LazyTensor(self, stop)

    def complete_copies(self) -> None:
        """Copies execute when issued: nothing is ever pending."""

    def release(self) -> None:
        if self._cpu is not None:
            _PAIRS.remove(self)

    def own_memory(self) -> tuple:
        # the arrays as the buffer holds them (a target may have put anything in .np:
        # then there is no memory of its own to compare, and the finding says the rest)
        return tuple((name, view, a.ctypes.data if a.size else 0, a.size)
                     for name, view, a in (("cpu", self._cpu, self.np),
                                           ("gpu", self._gpu, self.mirror))
                     if isinstance(a, np.ndarray))

    def final_cpu(self) -> list:
        return self.np.tolist()

    def final_gpu(self) -> list:
        gpu = self._gpu
        if gpu is not None and tuple(gpu.shape) != self.mirror.shape:
            return _as_left(gpu)        # the code resized its mirror: what it holds now
        return self.mirror.tolist()


def _as_left(t) -> list:
    """The values of a buffer's tensor view the code resized (``gpu.resize_(0)``), as a
    later reader of the attribute would see them; a view that claims more elements than
    its memory holds (a failed ``resize_`` whose error the code swallowed leaves the new
    size) reads as what its memory holds and one slot of None past it: never read past
    the memory."""
    torch = import_torch()
    with torch._C.DisableTorchFunctionSubclass():
        held = t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()
        if t.numel() > held:
            return t.reshape(-1)[:0].tolist() if held <= 0 else \
                t.as_strided((held,), (1,)).tolist() + [None]
        return t.reshape(-1).tolist()


class FastBackend:
    """The ``observe`` backend of ``FastBuffer`` (CPU only).

    ``kept``: what was made for one call, for the next call on the same scenario (the
    worker runs both sides of an example one after the other on one backend): a
    buffer's initial contents as arrays, copied for each call (``Builder`` keeps the
    request objects' attributes here too). Each entry holds the lists it was made from,
    so that an id in its key stays theirs."""

    device = "cpu"

    def __init__(self) -> None:
        self.kept: dict = {}

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list, events: list):
        key = ("buffer", dtype, id(cpu), id(gpu))
        found = self.kept.get(key)
        if found is not None and found[0] is cpu and found[1] is gpu:
            return FastBuffer(name, dtype, cpu, gpu, events, found[2])
        made = FastBuffer(name, dtype, cpu, gpu, events)
        keep(self.kept, key, (cpu, gpu, (made.np.copy(), made.mirror.copy())))
        return made

    def passes_through(self, exc: BaseException) -> bool:
        return False



class _Pinned:
    """One reused pair: a pinned host tensor and its device tensor (per name, dtype, size)."""

    __slots__ = ("cpu", "np", "gpu", "staging")

    def __init__(self, torch, dtype, size: int) -> None:
        self.cpu = torch.zeros(size, dtype=dtype, pin_memory=True)
        self.np = self.cpu.numpy()
        self.staging = torch.zeros(size, dtype=dtype, pin_memory=True)
        self.gpu = torch.zeros(size, dtype=dtype, device="cuda")


class FastCudaBuffer(ViewsKept):
    """A ``CpuGpuBuffer`` on CUDA with given contents: pinned host memory, non-blocking
    copies on the current stream, reused from call to call (a call ends with a device
    synchronization, so nothing of the previous call is in flight). Host writes are not
    logged, and no device work is queued ahead of the copies: the order of writes and
    the hazards of asynchronous copies are the instrumented backend's job, on flagged
    and sampled examples."""

    __slots__ = ("name", "events", "np", "_pair", "_cpu", "_gpu")

    def __init__(self, name: str, pair: _Pinned, initial_cpu: list, initial_gpu: list,
                 events: list) -> None:
        self.name, self.events, self._pair = name, events, pair
        self.np = pair.np
        self._cpu = self._gpu = None
        self.np[:] = initial_cpu
        pair.staging.numpy()[:] = initial_gpu
        pair.gpu.copy_(pair.staging, non_blocking=True)

    def _views(self) -> None:
        cls = _hooked_class()
        pair = self._pair
        _PAIRS.add(self, span_of(pair.cpu), span_of(pair.gpu))
        self._cpu, self._gpu = pair.cpu.as_subclass(cls), pair.gpu.as_subclass(cls)

    @property
    def cpu(self):
        if self._cpu is None:
            self._views()
        return self._cpu

    @property
    def gpu(self):
        if self._gpu is None:
            self._views()
        return self._gpu

    def on_copy(self, start: int, stop: int) -> None:
        """A copy of host slots ``[start, stop)`` into the mirror, in a form other than
        ``copy_to_gpu`` (the tensor op itself does the copying)."""
        _logged_copy(self, start, stop, self.np.shape[0])

    def copy_to_gpu(self, n: int | None = None):
        from stagecheck.impl.buffer import copy_prefix  # impl.buffer imports torch: CUDA only
        size = self.np.shape[0]
        stop = size if n is None else len(range(size)[:n])
        self.events.append(Copy(self.name, 0, stop, n))
        return copy_prefix(self._pair.cpu, self._pair.gpu, n)

    def complete_copies(self) -> None:
        import_torch().cuda.synchronize()

    def release(self) -> None:
        """The pair stays with the backend for the next call."""
        if self._cpu is not None:
            _PAIRS.remove(self)

    def own_memory(self) -> tuple:
        pair = self._pair
        return (("cpu", self._cpu, pair.cpu.untyped_storage().data_ptr(), pair.cpu.numel()),
                ("gpu", self._gpu, pair.gpu.untyped_storage().data_ptr(), pair.gpu.numel()))

    def final_cpu(self) -> list:
        return self.np.tolist()

    def final_gpu(self) -> list:
        return self._pair.gpu.cpu().tolist()


class FastCudaBackend:
    """The ``observe`` backend of ``FastCudaBuffer``: one pinned pair per buffer name,
    dtype and size, made once per worker."""

    device = "cuda"

    def __init__(self) -> None:
        torch = import_torch()
        self._torch = torch
        self._dtypes = {"int32": torch.int32, "int64": torch.int64, "bool": torch.bool}
        self._pairs: dict[tuple, _Pinned] = {}

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list, events: list):
        key = (name, dtype, len(cpu))
        pair = self._pairs.get(key)
        if pair is None:
            pair = self._pairs[key] = _Pinned(self._torch, self._dtypes[dtype], len(cpu))
        return FastCudaBuffer(name, pair, cpu, gpu, events)

    def passes_through(self, exc: BaseException) -> bool:
        return False
