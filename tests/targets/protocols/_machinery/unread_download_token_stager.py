# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: none
# Fixture (no race): uploads from pageable memory (a synchronous copy, which waits for the queued lookup) and downloads into memory nobody reads
"""The toy component of docs/protocols.md with a pageable upload and an unread download.

The upload's source is a fresh pageable tensor: the copy completes before it returns,
so the previous step's lookup, still queued, runs while the copy waits for it. The
download into ``last_ids`` is never read on the host. Nothing here races.
"""
import torch


class TokenStager:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.last_ids = None

    def stage(self, token_ids):
        n = len(token_ids)
        src = torch.tensor(token_ids, dtype=torch.int64)        # pageable
        self.ids_gpu[:n].copy_(src, non_blocking=True)
        self.embed(self.ids_gpu[:n])
        self.last_ids = self.ids_gpu[:n].to("cpu", non_blocking=True)   # never read

    def embed(self, ids):
        """Device work: the embedding lookup reads the uploaded ids."""
        return ids * 2
