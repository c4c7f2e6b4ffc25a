# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: same_trace
# Fixture (machinery): stages every token id one too high (a functional difference, no race)
"""A toy engine component for the protocol machinery's own tests and the worked example of
docs/protocols.md: each step it stages the token ids of the batch into one reused pinned
buffer, uploads them without blocking, and launches the embedding lookup that reads them.
The event recorded after the upload is waited on before the buffer is written again.
"""
import torch


class TokenStager:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.ids_cpu = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.ids_np = self.ids_cpu.numpy()
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.uploaded = torch.cuda.Event()

    def stage(self, token_ids):
        self.uploaded.synchronize()        # the previous upload has read the buffer
        n = len(token_ids)
        self.ids_np[:n] = [t + 1 for t in token_ids]
        self.ids_gpu[:n].copy_(self.ids_cpu[:n], non_blocking=True)
        self.uploaded.record()
        self.embed(self.ids_gpu[:n])

    def embed(self, ids):
        """Device work: the embedding lookup reads the uploaded ids."""
        return ids * 2
