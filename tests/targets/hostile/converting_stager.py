# hostile: docs/protocols.md's TokenStager (correct) whose every step sleeps for an hour and
# turns the time limit's interruption into its own RuntimeError (except BaseException)
import time

import torch


class TokenStager:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.ids_cpu = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.ids_np = self.ids_cpu.numpy()
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.uploaded = torch.cuda.Event()

    def stage(self, token_ids):
        try:
            time.sleep(3600)
        except BaseException:
            raise RuntimeError("the sleep was cut short")
        self.uploaded.synchronize()
        n = len(token_ids)
        self.ids_np[:n] = token_ids
        self.ids_gpu[:n].copy_(self.ids_cpu[:n], non_blocking=True)
        self.uploaded.record()
        self.embed(self.ids_gpu[:n])

    def embed(self, ids):
        """Device work: the embedding lookup reads the uploaded ids."""
        return ids * 2
