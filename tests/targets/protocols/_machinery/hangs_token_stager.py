# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: step_outcome
# Fixture (machinery): waits for ever once a step stages more than two tokens
"""The fixed TokenStager, except that a step of more than two tokens never returns."""
import torch


class TokenStager:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.ids_cpu = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.ids_np = self.ids_cpu.numpy()
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.uploaded = torch.cuda.Event()

    def stage(self, token_ids):
        self.uploaded.synchronize()
        while len(token_ids) > 2:
            pass
        n = len(token_ids)
        self.ids_np[:n] = token_ids
        self.ids_gpu[:n].copy_(self.ids_cpu[:n], non_blocking=True)
        self.uploaded.record()
        self.embed(self.ids_gpu[:n])

    def embed(self, ids):
        return ids * 2
