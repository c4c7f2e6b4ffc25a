"""Offsets staged in pinned memory that a kernel reads in place (as vLLM's UVA buffers are
read: no copy) and adds to a table, into device scratch memory nothing reads back. FIXED:
the host waits for the event recorded after the previous step's kernel before it writes
them."""
import torch


class Offsets:
    def __init__(self, capacity, device):
        self.off_cpu = torch.zeros(capacity, dtype=torch.int64, pin_memory=True)
        self.table = torch.arange(100, 100 + capacity, dtype=torch.int64, device=device)
        self.scratch = torch.zeros(capacity, dtype=torch.int64, device=device)
        self.steps = 0
        self.read = torch.cuda.Event()

    def _offset(self, off, table, out):
        """Device work: reads ``off`` where it lies (pinned host memory)."""
        out.copy_(table[:off.shape[0]] + off)

    def step(self, offsets):
        n = len(offsets)
        self.read.synchronize()
        self.off_cpu[:n] = torch.tensor(offsets, dtype=torch.int64)
        self._offset(self.off_cpu[:n], self.table, self.scratch[:n])
        self.read.record()
        self.steps += 1
