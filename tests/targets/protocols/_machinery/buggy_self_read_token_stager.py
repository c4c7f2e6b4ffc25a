# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: no_copy_hazard, device_read_as_meant
# Fixture (buggy): the lookup reads the uploaded ids through self, and the buffer is rewritten while the previous upload may still read it
"""The token stager whose embedding lookup is given only a count: it reads the device
mirror through ``self`` (as vLLM's ``BlockTable.compute_slot_mapping`` hands its kernel
``self.block_table.gpu``), not as an argument. The reused pinned buffer is written again
without waiting on the event of the previous upload.
"""
import torch


class TokenStager:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.ids_cpu = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.ids_np = self.ids_cpu.numpy()
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.out_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.uploaded = torch.cuda.Event()

    def stage(self, token_ids):
        n = len(token_ids)
        self.ids_np[:n] = token_ids
        self.ids_gpu[:n].copy_(self.ids_cpu[:n], non_blocking=True)
        self.uploaded.record()
        self.embed(n)

    def embed(self, n):
        """Device work: the embedding lookup reads the first ``n`` uploaded ids."""
        torch.mul(self.ids_gpu[:n], 2, out=self.out_gpu[:n])
