"""CORRECT: the host synchronizes last step's prep event (recorded after the forward, which is
after the uploads on the same stream) before rewriting the pinned numpy views; bitmask from a
fresh pinned tensor each step; collect via .to('cpu', non_blocking=True) then event.synchronize()
then .numpy()."""
import numpy as np
import torch


class CpuGpuBuffer:
    def __init__(self, n, dtype, device):
        self.cpu = torch.zeros(n, dtype=dtype, pin_memory=True)
        self.gpu = torch.zeros(n, dtype=dtype, device=device)
        self.np = self.cpu.numpy()

    def copy_to_gpu(self, n):
        return self.gpu[:n].copy_(self.cpu[:n], non_blocking=True)


class InputPreparer:
    def __init__(self, max_tokens, max_reqs, device):
        self.positions = CpuGpuBuffer(max_tokens, torch.int64, device)
        self.query_start_loc = CpuGpuBuffer(max_reqs + 1, torch.int32, device)
        self.bitmask_gpu = torch.zeros(max_reqs, dtype=torch.int64, device=device)
        self.logits_gpu = torch.zeros(max_reqs, dtype=torch.int64, device=device)
        self.prep_event = torch.cuda.Event()

    def _forward(self, positions, query_start_loc, out):
        """Device work: last position of each request."""
        out.copy_(positions[(query_start_loc[1:] - 1).long()])

    def _apply_bitmask(self, logits, bitmask):
        """Device work: in place."""
        logits.mul_(bitmask)

    def prepare_and_run(self, computed, scheduled, bitmask):
        n = len(scheduled)
        self.prep_event.synchronize()              # last step's uploads have read the pinned views
        cu = np.cumsum(scheduled)
        self.query_start_loc.np[0] = 0
        self.query_start_loc.np[1: n + 1] = cu
        total = int(cu[-1])
        start = 0
        for c, s in zip(computed, scheduled):
            self.positions.np[start: start + s] = np.arange(c, c + s)
            start += s
        self.query_start_loc.copy_to_gpu(n + 1)
        self.positions.copy_to_gpu(total)
        bm = torch.tensor(bitmask, dtype=torch.int64).pin_memory()
        self.bitmask_gpu[:n].copy_(bm, non_blocking=True)
        self._forward(self.positions.gpu[:total], self.query_start_loc.gpu[: n + 1], self.logits_gpu[:n])
        self.prep_event.record()
        self._apply_bitmask(self.logits_gpu[:n], self.bitmask_gpu[:n])

    def collect(self, n):
        out = self.logits_gpu[:n].to("cpu", non_blocking=True)
        ev = torch.cuda.Event()
        ev.record()
        ev.synchronize()
        return out.numpy().tolist()
