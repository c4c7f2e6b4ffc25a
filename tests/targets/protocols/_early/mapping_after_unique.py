"""A per-request mapping staged in one pinned buffer and uploaded; its distinct values are
taken on the device with ``torch.unique``, whose result's size depends on the data, so the
host waits for the stream to reach it (the upload included). FIXED by that wait: the next
step's write cannot race the upload."""
import torch


class Mapping:
    def __init__(self, capacity, device):
        self.map_cpu = torch.zeros(capacity, dtype=torch.int64, pin_memory=True)
        self.map_gpu = torch.zeros(capacity, dtype=torch.int64, device=device)

    def step(self, mapping):
        n = len(mapping)
        self.map_cpu[:n] = torch.tensor(mapping, dtype=torch.int64)
        self.map_gpu[:n].copy_(self.map_cpu[:n], non_blocking=True)
        return len(torch.unique(self.map_gpu[:n]))
