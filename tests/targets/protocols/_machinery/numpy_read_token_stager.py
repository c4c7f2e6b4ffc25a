# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: readback_as_written, device_read_as_meant
# Fixture (buggy): reads the previous step's download through a numpy view before it landed
"""The toy component of docs/protocols.md that reads back what the device computed.

Each step downloads ``ids + 1`` into a reused pinned buffer without blocking, and the
next step reads its first entry through a numpy view (which the model does not see)
after waiting only for the upload's event, recorded before the download was issued: the
read sees the buffer as it was before the download landed, and stages a different id.
"""
import torch


class TokenStager:
    def __init__(self, max_tokens, device, pin_memory=True):
        self.ids_cpu = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.ids_np = self.ids_cpu.numpy()
        self.ids_gpu = torch.zeros(max_tokens, dtype=torch.int64, device=device)
        self.back_cpu = torch.zeros(max_tokens, dtype=torch.int64, pin_memory=pin_memory)
        self.back_np = self.back_cpu.numpy()
        self.uploaded = torch.cuda.Event()
        self.last = 0

    def stage(self, token_ids):
        self.uploaded.synchronize()
        carry = int(self.back_np[0]) if self.last else 0     # numpy read, download not waited for
        n = len(token_ids)
        self.ids_np[:n] = token_ids
        self.ids_np[0] += carry
        self.ids_gpu[:n].copy_(self.ids_cpu[:n], non_blocking=True)
        self.uploaded.record()
        self.embed(self.ids_gpu[:n])
        out = self.ids_gpu[:n] + 1
        self.back_cpu[:n].copy_(out, non_blocking=True)
        self.last = n

    def embed(self, ids):
        """Device work: the embedding lookup reads the uploaded ids."""
        return ids * 2
