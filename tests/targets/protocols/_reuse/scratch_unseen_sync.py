"""As ``scratch_cleared_after_sync.py``, but the host waits for the upload through
``torch._C._cuda_synchronize``, a wait stagecheck does not see (CUDA only): the gates'
watchdog opens the gate after its stall, the write that follows is a race to stagecheck,
and the report's note says where the host waited unseen."""
import torch


class Scratch:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.buf = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.res_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.results = []

    def _forward(self, x, out):
        """Device work."""
        out[: x.numel()].copy_(x * 2)

    def step(self, ids, prev):
        n = len(ids)
        self.buf[:n] = torch.tensor(ids, dtype=torch.int64)
        self.ids_gpu[:n].copy_(self.buf[:n], non_blocking=True)
        torch._C._cuda_synchronize()       # the upload has read buf (unseen by the model)
        self.buf[:n] = -1
        self._forward(self.ids_gpu[:n], self.res_gpu)
        self.results.append(self.res_gpu[:n].tolist())
