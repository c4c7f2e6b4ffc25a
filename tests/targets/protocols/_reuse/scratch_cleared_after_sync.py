"""Ids staged in a reused pinned buffer, uploaded, the upload waited on (event
synchronize), then the host clears the buffer before launching the consumer.
Correct: the upload had read the buffer before the host cleared it."""
import torch


class Scratch:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.buf = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.res_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.ev = torch.cuda.Event()
        self.results = []

    def _forward(self, x, out):
        """Device work."""
        out[: x.numel()].copy_(x * 2)

    def step(self, ids, prev):
        n = len(ids)
        self.buf[:n] = torch.tensor(ids, dtype=torch.int64)
        self.ids_gpu[:n].copy_(self.buf[:n], non_blocking=True)
        self.ev.record()
        self.ev.synchronize()              # the upload has read buf
        self.buf[:n] = -1                  # scrub the staging buffer (legal now)
        self._forward(self.ids_gpu[:n], self.res_gpu)
        self.results.append(self.res_gpu[:n].tolist())
