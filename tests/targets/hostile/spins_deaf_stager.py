# hostile: docs/protocols.md's TokenStager whose second step ignores the timer signals
# and spins: no timer of the worker can end the operation, only the checker's deadline
import os
import signal

import torch


class TokenStager:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.ids_cpu = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.ids_np = self.ids_cpu.numpy()
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.uploaded = torch.cuda.Event()
        self.steps = 0

    def stage(self, token_ids):
        self.steps += 1
        if self.steps == 2:
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            signal.signal(signal.SIGPROF, signal.SIG_IGN)
            while True:
                pass
        self.uploaded.synchronize()
        n = len(token_ids)
        self.ids_np[:n] = token_ids
        self.ids_gpu[:n].copy_(self.ids_cpu[:n], non_blocking=True)
        self.uploaded.record()
        self.embed(self.ids_gpu[:n])

    def embed(self, ids):
        """Device work: the embedding lookup reads the uploaded ids."""
        return ids * 2
