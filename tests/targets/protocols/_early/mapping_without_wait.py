"""A per-request mapping staged in one pinned buffer and uploaded; its distinct values are
counted on the device with a comparison and a sum, which do not make the host wait.
BUGGY: the next step writes the buffer while the upload may still read it."""
import torch


class Mapping:
    def __init__(self, capacity, device):
        self.map_cpu = torch.zeros(capacity, dtype=torch.int64, pin_memory=True)
        self.map_gpu = torch.zeros(capacity, dtype=torch.int64, device=device)

    def step(self, mapping):
        n = len(mapping)
        self.map_cpu[:n] = torch.tensor(mapping, dtype=torch.int64)
        self.map_gpu[:n].copy_(self.map_cpu[:n], non_blocking=True)
        self.ones = (self.map_gpu[:n] == 1).sum()
        return n
