"""Indices staged in pinned memory that the gather kernel reads in place (as vLLM's UVA
buffers are read: no copy), each step's results in a row of their own. BUGGY: one
buffer, written again while the previous step's gather may still read it."""
import torch


class Indices:
    def __init__(self, capacity, device):
        self.idx_cpu = torch.zeros(capacity, dtype=torch.int64, pin_memory=True)
        self.idx_np = self.idx_cpu.numpy()
        self.table = torch.arange(100, 100 + capacity, dtype=torch.int64, device=device)
        self.out = torch.zeros((2, capacity), dtype=torch.int64, device=device)
        self.steps = 0

    def _gather(self, idx, table, out):
        """Device work: reads ``idx`` where it lies (pinned host memory)."""
        out.copy_(table[idx])

    def step(self, indices):
        n = len(indices)
        self.idx_np[:n] = indices
        self._gather(self.idx_cpu[:n], self.table, self.out[self.steps % 2, :n])
        self.steps += 1
