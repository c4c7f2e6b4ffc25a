"""Input ids under async scheduling (shape of vLLM's _prepare_input_ids with
prev_sampled_token_ids, simplified and re-expressed).

Each step the sampled ids are downloaded into one pinned buffer on a copy stream (for the
output thread, which collects them every other step), and the next step feeds the same
pinned buffer back as the previous tokens: an upload on the current stream. The current
stream must wait for the download's event before that upload reuses the pinned buffer.
"""
import torch


class PrevTokenInputs:
    def __init__(self, max_reqs, device):
        self.prev_cpu = torch.zeros(max_reqs, dtype=torch.int64, pin_memory=True)
        self.prev_gpu = torch.zeros(max_reqs, dtype=torch.int64, device=device)
        self.sampled_gpu = torch.zeros(max_reqs, dtype=torch.int64, device=device)
        self.copy_stream = torch.cuda.Stream()
        self.downloaded = torch.cuda.Event()
        self.num_prev = 0

    def _forward(self, prev_ids, offsets, out):
        """Device work: the next tokens from the previous ones."""
        out.copy_(prev_ids * 2 + offsets)

    def execute(self, offsets):
        n = offsets.shape[0]
        main = torch.cuda.current_stream()
        if self.num_prev:
            main.wait_event(self.downloaded)       # the download has filled prev_cpu
            self.prev_gpu[: self.num_prev].copy_(self.prev_cpu[: self.num_prev], non_blocking=True)
        main.wait_stream(self.copy_stream)         # last download has read sampled_gpu
        self._forward(self.prev_gpu[:n], offsets, self.sampled_gpu[:n])
        self.copy_stream.wait_stream(main)
        with torch.cuda.stream(self.copy_stream):
            self.prev_cpu[:n].copy_(self.sampled_gpu[:n], non_blocking=True)
            self.downloaded.record()
        self.num_prev = n

    def collect(self):
        self.downloaded.synchronize()
        return self.prev_cpu[: self.num_prev].tolist()
