# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: expected_outcome, missing_input, slot_alignment, same_outcome, same_buffers
# Fixture: reads the prompt ids directly (an inlined get_token_id without the output branch)
"""Shared machinery of the draft-model proposers (EAGLE and friends).

After the target model verified the drafts of the previous step, each request needs
the token the next drafting round starts from: the last sampled one, or, for a request
whose sample is discarded (still in chunked prefill, or padded), a "backup" token read
from the request state. The backup tokens are staged on the host and uploaded once per
step; a kernel then picks, per request, between the two.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from vllm.config import VllmConfig
from vllm.logger import init_logger
from vllm.utils.platform_utils import is_pin_memory_available
from vllm.v1.spec_decode.metadata import SpecDecodeMetadata
from vllm.v1.utils import CpuGpuBuffer
from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

logger = init_logger(__name__)


class SpecDecodeBaseProposer:
    def __init__(self, vllm_config: VllmConfig, device: torch.device, runner=None) -> None:
        self.vllm_config = vllm_config
        self.device = device
        self.runner = runner
        self.max_num_reqs = vllm_config.scheduler_config.max_num_seqs
        self.num_speculative_tokens = vllm_config.speculative_config.num_speculative_tokens
        self.backup_next_token_ids = CpuGpuBuffer(
            self.max_num_reqs,
            dtype=torch.int32,
            pin_memory=is_pin_memory_available(),
            device=device,
            with_numpy=True,
        )
        self.model: nn.Module | None = None

    def load_model(self, target_model: nn.Module) -> None:
        raise NotImplementedError

    def prepare_next_token_ids_cpu(
        self,
        sampled_token_ids: list[list[int]],
        requests: dict[str, CachedRequestState],
        gpu_input_batch: InputBatch,
        num_scheduled_tokens: dict[str, int],
    ) -> torch.Tensor:
        """Next token per request, on the host (the synchronous scheduling path)."""
        next_token_ids: list[int] = []
        for i, token_ids in enumerate(sampled_token_ids):
            if token_ids:
                next_token_ids.append(token_ids[-1])
            else:
                req_id = gpu_input_batch.req_ids[i]
                req_state = requests[req_id]
                seq_len = req_state.num_computed_tokens + num_scheduled_tokens[req_id]
                next_token_ids.append(req_state.get_token_id(seq_len))
        return torch.tensor(next_token_ids, dtype=torch.int32, device=self.device)

    def prepare_next_token_ids_padded(
        self,
        sampled_token_ids: torch.Tensor,
        requests: dict[str, CachedRequestState],
        gpu_input_batch: InputBatch,
        discard_request_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Stage the backup next token of every request (used where the sampled one is
        discarded) and return its device view for the selection kernel."""
        num_reqs = gpu_input_batch.num_reqs
        positions = (gpu_input_batch.num_tokens_no_spec[:num_reqs] - 1).tolist()
        for i, pos in enumerate(positions):
            req_state = requests[gpu_input_batch.req_ids[i]]
            self.backup_next_token_ids.np[i] = req_state.prompt_token_ids[pos]
        self.backup_next_token_ids.copy_to_gpu(num_reqs)
        return self.backup_next_token_ids.gpu[:num_reqs]

    def prepare_inputs_padded(self, spec_decode_metadata: SpecDecodeMetadata) -> None:
        raise NotImplementedError
