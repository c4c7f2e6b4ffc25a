# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: none
# Fixture (fixed): the fixed TokenStager whose writes run on a process-wide thread pool
"""The fixed ``TokenStager`` whose host writes run on a ``ThreadPoolExecutor`` kept for the
life of the process (as engines keep one for their async work): each step submits the
write and waits for it. The pool's worker threads stay, idle, after every step: nothing
is left running that could end the process (before, each step sequence was reported as
having left a thread running, and the worker was replaced after each).
"""
from concurrent.futures import ThreadPoolExecutor

import torch

_POOL = ThreadPoolExecutor(2, thread_name_prefix="stager")


class TokenStager:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.ids_cpu = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.ids_np = self.ids_cpu.numpy()
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.uploaded = torch.cuda.Event()

    def _write(self, token_ids):
        self.ids_np[:len(token_ids)] = token_ids

    def stage(self, token_ids):
        self.uploaded.synchronize()        # the previous upload has read the buffer
        n = len(token_ids)
        _POOL.submit(self._write, token_ids).result()
        self.ids_gpu[:n].copy_(self.ids_cpu[:n], non_blocking=True)
        self.uploaded.record()
        self.embed(self.ids_gpu[:n])

    def embed(self, ids):
        """Device work: the embedding lookup reads the uploaded ids."""
        return ids * 2
