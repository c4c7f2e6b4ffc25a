"""The fast backend of ``observe``: paired buffers over numpy, torch only when touched.

``.np`` is a plain numpy array (numpy 2 int32/bool semantics, as the real buffer's
``.np``); ``.cpu`` and ``.gpu`` are torch tensors sharing the memory of the host view
and of the mirror, made on first use; ``copy_to_gpu(n)`` copies ``[0, n)`` into the
mirror at once (a CPU run's copies are synchronous) and logs a ``Copy``. Host writes
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

from stagecheck.spec.observation import Copy

__all__ = ["FastBackend", "FastBuffer", "FastCudaBackend", "FastCudaBuffer"]

_NUMPY = {"int32": np.int32, "int64": np.int64, "bool": np.bool_}


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


class FastBuffer:
    """A ``CpuGpuBuffer`` of given contents for a CPU run, cheap to make and to read."""

    __slots__ = ("name", "np", "mirror", "events", "_cpu", "_gpu")

    def __init__(self, name: str, dtype: str, initial_cpu: list, initial_gpu: list,
                 events: list) -> None:
        self.name, self.events = name, events
        self.np = np.array(initial_cpu, dtype=_NUMPY[dtype])
        self.mirror = np.array(initial_gpu, dtype=_NUMPY[dtype])
        self._cpu = self._gpu = None

    @property
    def cpu(self):
        if self._cpu is None:
            import torch  # heavy: only once the code touches a torch view (module doc)
            self._cpu = torch.from_numpy(self.np)
        return self._cpu

    @property
    def gpu(self):
        if self._gpu is None:
            import torch  # heavy: only once the code touches a torch view (module doc)
            self._gpu = torch.from_numpy(self.mirror)
        return self._gpu

    def copy_to_gpu(self, n: int | None = None):
        size = self.np.shape[0]
        stop = size if n is None else len(range(size)[:n])
        self.events.append(Copy(self.name, 0, stop, n))
        self.mirror[:stop] = self.np[:stop]
        return _LazyTensor(self, stop)

    def complete_copies(self) -> None:
        """Copies execute when issued: nothing is ever pending."""

    def release(self) -> None:
        """Nothing to release."""

    def final_cpu(self) -> list:
        return self.np.tolist()

    def final_gpu(self) -> list:
        return self.mirror.tolist()


class FastBackend:
    """The ``observe`` backend of ``FastBuffer`` (CPU only)."""

    device = "cpu"

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list, events: list):
        return FastBuffer(name, dtype, cpu, gpu, events)

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


class FastCudaBuffer:
    """A ``CpuGpuBuffer`` on CUDA with given contents: pinned host memory, non-blocking
    copies on the current stream, reused from call to call (a call ends with a device
    synchronization, so nothing of the previous call is in flight). Host writes are not
    logged, and no device work is queued ahead of the copies: the order of writes and
    the hazards of asynchronous copies are the instrumented backend's job, on flagged
    and sampled examples."""

    __slots__ = ("name", "events", "cpu", "np", "gpu")

    def __init__(self, name: str, pair: _Pinned, initial_cpu: list, initial_gpu: list,
                 events: list) -> None:
        self.name, self.events = name, events
        self.cpu, self.np, self.gpu = pair.cpu, pair.np, pair.gpu
        self.np[:] = initial_cpu
        pair.staging.numpy()[:] = initial_gpu
        self.gpu.copy_(pair.staging, non_blocking=True)

    def copy_to_gpu(self, n: int | None = None):
        from stagecheck.impl.buffer import copy_prefix  # imports torch (see above)
        size = self.np.shape[0]
        stop = size if n is None else len(range(size)[:n])
        self.events.append(Copy(self.name, 0, stop, n))
        return copy_prefix(self.cpu, self.gpu, n)

    def complete_copies(self) -> None:
        import torch  # heavy: only once the code touches a torch view (module doc)
        torch.cuda.synchronize()

    def release(self) -> None:
        """The pair stays with the backend for the next call."""

    def final_cpu(self) -> list:
        return self.np.tolist()

    def final_gpu(self) -> list:
        return self.gpu.cpu().tolist()


class FastCudaBackend:
    """The ``observe`` backend of ``FastCudaBuffer``: one pinned pair per buffer name,
    dtype and size, made once per worker."""

    device = "cuda"

    def __init__(self) -> None:
        import torch  # heavy: only once the code touches a torch view (module doc)
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
