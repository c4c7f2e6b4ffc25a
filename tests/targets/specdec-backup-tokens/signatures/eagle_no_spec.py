# SPDX-License-Identifier: Apache-2.0
"""The EAGLE proposer in the shape of vLLM v0.18's ``eagle.py``, where
``prepare_next_token_ids_padded`` still takes ``common_attn_metadata`` second. This is
the fixed body: the backup token is the request's last token before any draft."""

import numpy as np
import torch

from vllm.v1.attention.backends.utils import CommonAttentionMetadata
from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch


class EagleProposer:
    def __init__(self, max_num_reqs, make_buffer):
        self.backup_next_token_ids = make_buffer(max_num_reqs, dtype=torch.int32)

    def prepare_next_token_ids_padded(
        self,
        common_attn_metadata: CommonAttentionMetadata,
        sampled_token_ids: torch.Tensor,
        requests: dict[str, CachedRequestState],
        gpu_input_batch: InputBatch,
        discard_request_mask: torch.Tensor,
    ):
        """Backup next token per request (where the sampled one is discarded)."""
        num_reqs = gpu_input_batch.num_reqs
        self.backup_next_token_ids.np[:num_reqs] = np.array(
            [requests[gpu_input_batch.req_ids[i]].get_token_id(
                int(gpu_input_batch.num_tokens_no_spec[i]) - 1) for i in range(num_reqs)],
            dtype=np.int32)
        self.backup_next_token_ids.copy_to_gpu(num_reqs)
        return self.backup_next_token_ids.gpu[:num_reqs]
