"""The paired host/device buffer that staging code writes into (domain.md section 1)."""

from __future__ import annotations

import torch


class CpuGpuBuffer:
    """One staged array with three views of the same logical data.

    ``.cpu`` is a host tensor (pinned when the device is CUDA), ``.np`` a numpy
    array sharing its memory, ``.gpu`` a tensor of the same shape and dtype on
    the device (another host tensor on a CPU-only run).
    """

    def __init__(self, size: int, dtype: torch.dtype, device: str | torch.device = "cpu",
                 pin_memory: bool | None = None) -> None:
        device = torch.device(device)
        if pin_memory is None:
            pin_memory = device.type == "cuda"
        self.cpu = torch.zeros(size, dtype=dtype, device="cpu", pin_memory=pin_memory)
        self.np = self.cpu.numpy()
        self.gpu = torch.zeros(size, dtype=dtype, device=device)

    def copy_to_gpu(self, n: int | None = None) -> torch.Tensor:
        """Copy ``cpu[:n]`` into ``gpu[:n]`` without blocking; ``n=None`` copies all."""
        return copy_prefix(self.cpu, self.gpu, n)


def copy_prefix(cpu: torch.Tensor, gpu: torch.Tensor, n: int | None) -> torch.Tensor:
    """The copy ``copy_to_gpu`` issues: ``gpu[:n] <- cpu[:n]``, non-blocking."""
    if n is None:
        return gpu.copy_(cpu, non_blocking=True)
    return gpu[:n].copy_(cpu[:n], non_blocking=True)
