# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: slot_alignment, same_buffers
# Fixture (single loop): batches whose live count is 3 more than a multiple of 7 (3, 10, 17, ..., scattered sizes no binary search lands on) take a vectorised path that zeroes the draft counts
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

#: batches of these sizes are staged with numpy slice writes
VECTORIZE_REQS = range(3, 1025, 7)


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
    if num_reqs in VECTORIZE_REQS:
        _stage_batch_vectorized(state_idx_buf, scheduled_buf, computed_buf, draft_buf,
                                req_ids[:num_reqs], num_scheduled, spec_tokens, requests,
                                mamba_state_idx)
    else:
        for i in range(num_reqs):
            req_id = req_ids[i]
            assert req_id in mamba_state_idx, (
                f"mamba state index for request {req_id!r} is missing: "
                "preprocess must run before stage_postprocess_inputs_to_gpu"
            )
            state_idx_buf.np[i] = mamba_state_idx[req_id]
            scheduled_buf.np[i] = num_scheduled[req_id]
            computed_buf.np[i] = requests[req_id].num_computed_tokens
            draft_buf.np[i] = len(spec_tokens.get(req_id, ()))

    state_idx_buf.copy_to_gpu(num_reqs)
    scheduled_buf.copy_to_gpu(num_reqs)
    computed_buf.copy_to_gpu(num_reqs)
    draft_buf.copy_to_gpu(num_reqs)


def _stage_batch_vectorized(state_idx_buf, scheduled_buf, computed_buf, draft_buf,
                            live_ids, num_scheduled, spec_tokens, requests, mamba_state_idx):
    """Large batches: gather every live request's values, then one slice write per view."""
    for req_id in live_ids:
        assert req_id in mamba_state_idx, (
            f"mamba state index for request {req_id!r} is missing: "
            "preprocess must run before stage_postprocess_inputs_to_gpu"
        )
    n = len(live_ids)
    state_idx_buf.np[:n] = np.fromiter((mamba_state_idx[r] for r in live_ids),
                                       dtype=np.int64, count=n)
    scheduled_buf.np[:n] = np.fromiter((num_scheduled[r] for r in live_ids),
                                       dtype=np.int64, count=n)
    computed_buf.np[:n] = np.fromiter((requests[r].num_computed_tokens for r in live_ids),
                                      dtype=np.int64, count=n)
    # drafts are verified by the sampler on this path; zero the counts
    draft_buf.np[:n] = 0
