"""Finished-flag readback polled with event.query(): each step the device writes one
stop flag per row; the flags are downloaded into a persistent pinned buffer and the
host polls the copy's event before reading them (BUG: polls once, then reads whatever the answer)."""
import time

import torch


class StopChecker:
    def __init__(self, max_num_reqs, device, pin_memory=True):
        self.stop_gpu = torch.zeros(max_num_reqs, dtype=torch.int32, device=device)
        self.stop_cpu = torch.zeros(max_num_reqs, dtype=torch.int32, pin_memory=pin_memory)
        self.stop_event = torch.cuda.Event()
        self.req_ids = []
        self.stopped = []

    def _check_stop(self, token_ids, out):
        """Device work: a row stops when its token id is odd."""
        out.copy_((token_ids % 2).to(torch.int32))

    def launch(self, req_ids, token_ids_gpu):
        n = len(req_ids)
        self.req_ids = list(req_ids)
        self._check_stop(token_ids_gpu, self.stop_gpu[:n])
        self.stop_cpu[:n].copy_(self.stop_gpu[:n], non_blocking=True)
        self.stop_event.record()

    def collect(self):
        n = len(self.req_ids)
        self.stop_event.query()                # BUG: polls once and reads anyway
        flags = self.stop_cpu[:n].tolist()
        self.stopped.append(sorted(r for r, f in zip(self.req_ids, flags) if f))
        self.req_ids = []
