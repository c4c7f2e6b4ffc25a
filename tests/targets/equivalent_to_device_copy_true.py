# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: none
# Fixture (single loop): uploads each buffer from a tensor made by cpu[:n].to(gpu.device, copy=True) instead of copy_to_gpu(n)
"""Host-side staging of the per-request inputs of the Mamba postprocess kernel.

After verification, one fused launch decides for every request whether its
running SSM/conv state must be saved into a block-aligned slot. The launch reads
four small per-request arrays; this module fills their host views and uploads
them to the device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from vllm.config import VllmConfig
from vllm.logger import init_logger
from vllm.utils.math_utils import cdiv
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.utils import CpuGpuBuffer
from vllm.v1.worker.gpu_input_batch import CachedRequestState

if TYPE_CHECKING:
    from vllm.v1.kv_cache_interface import KVCacheConfig

logger = init_logger(__name__)


class MambaPostprocessBuffers:
    """Per-request arrays read by the postprocess kernel, allocated once per runner."""

    def __init__(self, vllm_config: VllmConfig, device: torch.device) -> None:
        max_reqs = vllm_config.scheduler_config.max_num_seqs
        pin = vllm_config.device_config.device.type == "cuda"

        def make() -> CpuGpuBuffer:
            return CpuGpuBuffer(max_reqs, dtype=torch.int32, device=device, pin_memory=pin)

        self.mamba_state_idx_buf = make()
        self.num_scheduled_tokens_buf = make()
        self.num_computed_tokens_buf = make()
        self.num_draft_tokens_buf = make()


def mamba_block_columns(kv_cache_config: KVCacheConfig, num_tokens: int) -> int:
    """How many block-table columns a request of ``num_tokens`` tokens spans."""
    block_size = kv_cache_config.kv_cache_groups[0].kv_cache_spec.block_size
    return cdiv(num_tokens, block_size)


def log_staged_batch(req_ids: list[str], num_reqs: int) -> None:
    logger.debug("staged %d requests for the Mamba postprocess: %s", num_reqs,
                 req_ids[:num_reqs])


def stage_postprocess_inputs_to_gpu(
    ctx: MambaPostprocessBuffers,
    scheduler_output: SchedulerOutput,
    req_ids: list[str],
    num_reqs: int,
    requests: dict[str, CachedRequestState],
    mamba_state_idx: dict[str, int],
) -> None:
    """Fill this step's per-request kernel inputs and start their uploads."""
    state_idx_buf = ctx.mamba_state_idx_buf
    scheduled_buf = ctx.num_scheduled_tokens_buf
    computed_buf = ctx.num_computed_tokens_buf
    draft_buf = ctx.num_draft_tokens_buf
    assert state_idx_buf is not None
    assert scheduled_buf is not None
    assert computed_buf is not None
    assert draft_buf is not None

    num_scheduled = scheduler_output.num_scheduled_tokens
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    for i, req_id in enumerate(req_ids[:num_reqs]):
        assert req_id in mamba_state_idx, (
            f"mamba state index for request {req_id!r} is missing: "
            "preprocess must run before stage_postprocess_inputs_to_gpu"
        )
        state_idx_buf.np[i] = mamba_state_idx[req_id]
        scheduled_buf.np[i] = num_scheduled[req_id]
        computed_buf.np[i] = requests[req_id].num_computed_tokens
        draft_buf.np[i] = len(spec_tokens.get(req_id, ()))

    for buf in (state_idx_buf, scheduled_buf, computed_buf, draft_buf):
        staged = buf.cpu[:num_reqs].to(buf.gpu.device, copy=True)
        buf.gpu[:num_reqs].copy_(staged, non_blocking=True)
