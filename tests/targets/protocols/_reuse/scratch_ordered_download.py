"""One pinned scratch buffer: ids uploaded from it on a copy stream, and results downloaded
into it on the current stream. FIXED: the download is ordered after the upload."""
import torch


class Scratch:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.buf = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.res_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.stream = torch.cuda.Stream()
        self.results = []

    def _forward(self, x, out):
        """Device work."""
        out[: x.numel()].copy_(x * 2)

    def step(self, ids, prev):
        n = len(ids)
        torch.cuda.synchronize()
        self.buf[:n] = torch.tensor(ids, dtype=torch.int64)
        with torch.cuda.stream(self.stream):
            self.ids_gpu[:n].copy_(self.buf[:n], non_blocking=True)
        # results of a forward over prev (device values already there) into the same buffer
        self._forward(prev, self.res_gpu)
        torch.cuda.current_stream().wait_stream(self.stream)   # the upload has read buf
        self.buf[:n].copy_(self.res_gpu[:n], non_blocking=True)
        torch.cuda.synchronize()
        self.results.append(self.buf[:n].tolist())
        self._forward(self.ids_gpu[:n], self.res_gpu)   # consume the uploaded ids
        self.results.append(self.res_gpu[:n].tolist())
