"""The bare backend of ``observe``: ``impl.buffer.CpuGpuBuffer`` with given contents and
no instrumentation (what ``bench`` times, and the fast engine's buffers)."""

from __future__ import annotations

__all__ = ["BareBackend"]


class BareBackend:
    """Builds uninstrumented paired buffers on one device (pinned host memory on CUDA)."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list, events: list):
        # torch: every run preloads this module (oracles/_preload.py), only bench builds these
        import torch

        from stagecheck.impl.buffer import CpuGpuBuffer  # torch too
        dtypes = {"int32": torch.int32, "int64": torch.int64, "bool": torch.bool}
        buf = CpuGpuBuffer(len(cpu), dtypes[dtype], self.device)
        buf.cpu.copy_(torch.tensor(cpu, dtype=dtypes[dtype]))
        buf.gpu.copy_(torch.tensor(gpu, dtype=dtypes[dtype]))
        return buf

    def passes_through(self, exc: BaseException) -> bool:
        return False
