"""BUG: the next step's sampling overwrites sampled_gpu while the
previous D2H on the copy stream still reads it (no current_stream().wait_stream(copy_stream)).

Async output copy (shape of vLLM's AsyncGPUModelRunnerOutput, simplified).

Each step the sampler writes sampled token ids on the device; they are copied into a
pinned host buffer on a dedicated copy stream (which first waits for the sampling), an
event is recorded on the copy stream, and the output is collected a step later
(async scheduling) after synchronizing that event.
"""
import torch


class AsyncSampler:
    def __init__(self, max_reqs, device):
        self.max_reqs = max_reqs
        self.sampled_gpu = torch.zeros(max_reqs, dtype=torch.int64, device=device)
        self.sampled_cpu = [torch.zeros(max_reqs, dtype=torch.int64, pin_memory=True)
                            for _ in range(2)]
        self.copy_stream = torch.cuda.Stream()
        self.copy_events = [torch.cuda.Event(), torch.cuda.Event()]
        self.step_no = 0
        self.pending = []          # (slot, req_ids)

    def _sample(self, logits, out):
        """Device work: 'sampling' = an arithmetic of the logits, written into out."""
        out.copy_(logits * 3 + 1)

    def execute(self, req_ids, logits):
        n = len(req_ids)
        if n == 0:
            return
        slot = self.step_no % 2
        self.step_no += 1
        self._sample(logits, self.sampled_gpu[:n])
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            self.sampled_cpu[slot][:n].copy_(self.sampled_gpu[:n], non_blocking=True)
            self.copy_events[slot].record()
        self.pending.append((slot, list(req_ids)))

    def get_output(self):
        """Collect the oldest pending output (the previous step's, under async scheduling)."""
        out = {}
        while len(self.pending) > 1:
            slot, req_ids = self.pending.pop(0)
            self.copy_events[slot].synchronize()
            vals = self.sampled_cpu[slot][: len(req_ids)].tolist()
            out.update(zip(req_ids, vals))
        return out
