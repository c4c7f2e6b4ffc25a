# SPDX-License-Identifier: Apache-2.0
"""The EAGLE proposer in the shape of an earlier ``eagle.py``: the discarded requests
come as a tensor of their indices and a count (``discard_request_indices``,
``num_discarded_requests``) instead of a mask. No adapter of the built-in schema maps
these two parameters; ``bridge_schema.py`` adds one."""

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
        discard_request_indices: torch.Tensor,
        num_discarded_requests: int,
    ):
        num_reqs = gpu_input_batch.num_reqs
        tokens = np.empty(num_reqs, dtype=np.int32)
        for i in range(num_reqs):
            state = requests[gpu_input_batch.req_ids[i]]
            tokens[i] = state.get_token_id(int(gpu_input_batch.num_tokens_no_spec[i]) - 1)
        self.backup_next_token_ids.np[:num_reqs] = tokens
        self.backup_next_token_ids.copy_to_gpu(num_reqs)
        return self.backup_next_token_ids.gpu[:num_reqs]
