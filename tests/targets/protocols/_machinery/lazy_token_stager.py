# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: no_copy_hazard, device_read_as_meant
# Fixture (buggy): the pinned buffer is allocated on the first step, after a scratch buffer
"""The buggy ``TokenStager`` with its pinned buffer allocated on the first step (after an
unrelated pinned scratch buffer that every step allocates), not when it is built: the
device model names such memory by its allocation counter (``pinned tensor 2``) until the
step after, when the state holds it as ``ids_cpu``. A finding about it must read and be
identified as the one about the buffer built at once (``buggy_token_stager.py``).
"""
import torch


class TokenStager:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.max_tokens = max_tokens
        self.ids_cpu = None
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.uploaded = torch.cuda.Event()

    def stage(self, token_ids):
        scratch = torch.zeros(2, dtype=torch.int64, pin_memory=True)    # unrelated
        scratch[0] = len(token_ids)
        if self.ids_cpu is None:
            self.ids_cpu = torch.zeros(self.max_tokens, dtype=torch.int64, pin_memory=True)
        n = len(token_ids)
        self.ids_cpu.numpy()[:n] = token_ids
        self.ids_gpu[:n].copy_(self.ids_cpu[:n], non_blocking=True)
        self.uploaded.record()
        self.embed(self.ids_gpu[:n])

    def embed(self, ids):
        """Device work: the embedding lookup reads the uploaded ids."""
        return ids * 2
