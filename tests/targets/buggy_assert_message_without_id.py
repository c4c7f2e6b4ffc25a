# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: missing_input
# Fixture (legacy): the assertion message no longer names the request id
"""Mamba helpers of the GPU model runner: staging of postprocess-kernel inputs.

The state index (the block column holding a request's running state) and the
token counts of the step are written on the host, one helper each, and uploaded
to the device before the fused postprocess launch.
"""

import itertools

import numpy as np
import torch

from vllm.config import VllmConfig
from vllm.distributed import get_tensor_model_parallel_rank
from vllm.model_executor.layers.mamba.mamba_utils import MambaStateShapeCalculator
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.kv_cache_interface import KVCacheConfig, MambaSpec
from vllm.v1.utils import CpuGpuBuffer
from vllm.v1.worker.gpu_input_batch import CachedRequestState


def mamba_state_groups(kv_cache_config: KVCacheConfig) -> list[int]:
    """Indices of the KV-cache groups whose spec is a Mamba spec."""
    return [i for i, group in enumerate(kv_cache_config.kv_cache_groups)
            if isinstance(group.kv_cache_spec, MambaSpec)]


def conv_state_width(vllm_config: VllmConfig) -> int:
    hf_config = vllm_config.model_config.hf_config
    shapes = MambaStateShapeCalculator.mamba2_state_shape(
        tp_world_size=vllm_config.parallel_config.tensor_parallel_size,
        intermediate_size=hf_config.intermediate_size,
        n_groups=hf_config.n_groups,
        num_heads=hf_config.mamba_n_heads,
        head_dim=hf_config.mamba_d_head,
        state_size=hf_config.mamba_d_state,
        conv_kernel=hf_config.mamba_d_conv,
    )
    return shapes[0][0]


class StateIndexTable:
    """Remembers, per request, which block column holds its running state."""

    def __init__(self) -> None:
        self.rank = get_tensor_model_parallel_rank()
        self.columns: dict[str, int] = {}

    def assign(self, req: CachedRequestState, column: int) -> None:
        self.columns[req.req_id] = column

    def forget(self, req_ids: list[str]) -> None:
        for req_id in itertools.chain(req_ids):
            self.columns.pop(req_id, None)


def _stage_mamba_state_idx_to_gpu(ctx, req_ids, num_reqs, mamba_state_idx) -> None:
    """Write the running-state block column of every live request; upload it."""
    state_idx = ctx.mamba_state_idx_buf.np
    for i, req_id in enumerate(req_ids[:num_reqs]):
        assert req_id in mamba_state_idx, (
            "mamba state index is missing: preprocess must run before "
            "stage_mamba_state_idx_to_gpu"
        )
        state_idx[i] = mamba_state_idx[req_id]
    ctx.mamba_state_idx_buf.copy_to_gpu(num_reqs)


def _stage_token_counts_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests) -> None:
    """Write scheduled, computed and draft token counts of every live request; upload them."""
    scheduled = ctx.num_scheduled_tokens_buf.np
    computed = ctx.num_computed_tokens_buf.np
    drafts = ctx.num_draft_tokens_buf.np
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    for i, req_id in enumerate(req_ids[:num_reqs]):
        scheduled[i] = scheduler_output.num_scheduled_tokens[req_id]
        computed[i] = requests[req_id].num_computed_tokens
        drafts[i] = len(spec_tokens.get(req_id, ()))
    ctx.num_scheduled_tokens_buf.copy_to_gpu(num_reqs)
    ctx.num_computed_tokens_buf.copy_to_gpu(num_reqs)
    ctx.num_draft_tokens_buf.copy_to_gpu(num_reqs)


def stage_postprocess_inputs_to_gpu(
    ctx: "MambaRunnerContext",
    scheduler_output: SchedulerOutput,
    req_ids: list[str],
    num_reqs: int,
    requests: dict[str, CachedRequestState],
    mamba_state_idx: dict[str, int],
) -> None:
    """Stage the postprocess kernel's per-request inputs (state index, token counts)."""
    assert ctx.mamba_state_idx_buf is not None
    assert ctx.num_scheduled_tokens_buf is not None
    assert ctx.num_computed_tokens_buf is not None
    assert ctx.num_draft_tokens_buf is not None
    _stage_mamba_state_idx_to_gpu(ctx, req_ids, num_reqs, mamba_state_idx)
    _stage_token_counts_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests)
