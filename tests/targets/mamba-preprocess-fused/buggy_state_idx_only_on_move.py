# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: slot_alignment, same_buffers
# Fixture: the state column is staged inside the move branch only, so a request that stays keeps last step's slot value
"""Mamba prefix caching: move each request's running state to the column it will use.

Before a step runs, a request whose running state must change column (its tokens
crossed a block boundary on the previous step) gets its state copied there. On the
fused path the per-request decisions are staged into three small host buffers and a
single pre-copy kernel performs every move; on the scalar path the copies are listed
as raw pointer triples for a batched memcpy.
"""

from __future__ import annotations

import ctypes
import itertools
from typing import Any, NamedTuple

import torch

from vllm.config import CacheConfig
from vllm.logger import init_logger
from vllm.model_executor.layers.mamba.mamba_utils import MambaStateCopyFuncsByType
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec, MambaSpec
from vllm.v1.utils import CpuGpuBuffer
from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch
from vllm.v1.worker.mamba_context import MambaCopyBuffers, MambaSpecDecodeGPUContext

logger = init_logger(__name__)


def cdiv(a: int, b: int) -> int:
    """Ceiling division (kept local until the shared math helpers can be loaded)."""
    return -(a // -b)


def _get_mamba_spec_for_layer(kv_cache_group: KVCacheGroupSpec, layer_name: str) -> MambaSpec:
    spec = kv_cache_group.kv_cache_spec
    return getattr(spec, "kv_cache_specs", {}).get(layer_name, spec)


def batch_memcpy(src_ptrs: torch.Tensor, dst_ptrs: torch.Tensor, sizes: torch.Tensor) -> None:
    """Host fallback of the batched memcpy kernel: one memmove per triple."""
    for src, dst, size in zip(src_ptrs.tolist(), dst_ptrs.tolist(), sizes.tolist()):
        ctypes.memmove(dst, src, size)


def collect_mamba_copy_meta(
    copy_bufs: MambaCopyBuffers,
    kv_cache_config: KVCacheConfig,
    mamba_state_copy_funcs: MambaStateCopyFuncsByType,
    mamba_group_ids: list[int],
    src_block_idx: int,
    dest_block_idx: int,
    accept_token_bias: int,
    req_state: CachedRequestState,
    forward_context: dict[str, Any],
) -> None:
    """Append one (src, dst, size) triple per state tensor of the request's layers."""
    if src_block_idx == dest_block_idx and accept_token_bias == 0:
        return
    offset = copy_bufs.offset
    for group_id in mamba_group_ids:
        block_ids = req_state.block_ids[group_id]
        group = kv_cache_config.kv_cache_groups[group_id]
        for layer_name in group.layer_names:
            spec = _get_mamba_spec_for_layer(group, layer_name)
            copy_funcs = mamba_state_copy_funcs[spec.mamba_type]
            for state, copy_func in zip(forward_context[layer_name].kv_cache, copy_funcs):
                copy_spec = copy_func(state, block_ids, src_block_idx, accept_token_bias + 1)
                copy_bufs.src_ptrs.np[offset] = copy_spec.start_addr
                copy_bufs.dst_ptrs.np[offset] = state[block_ids[dest_block_idx]].data_ptr()
                copy_bufs.sizes.np[offset] = copy_spec.num_elements * state.element_size()
                offset += 1
    copy_bufs.offset = offset


def do_mamba_copy_block(copy_bufs: MambaCopyBuffers) -> None:
    n = copy_bufs.offset
    if n == 0:
        return
    batch_memcpy(
        copy_bufs.src_ptrs.copy_to_gpu(n),
        copy_bufs.dst_ptrs.copy_to_gpu(n),
        copy_bufs.sizes.copy_to_gpu(n),
    )


def cleanup_mamba_state_idx(
    scheduler_output: SchedulerOutput,
    mamba_state_idx: dict[str, int],
) -> None:
    """Drop the entries of requests that finished, were preempted or were resumed."""
    finished_req_ids = scheduler_output.finished_req_ids
    preempted_req_ids = scheduler_output.preempted_req_ids or set()
    resumed_req_ids = scheduler_output.scheduled_cached_reqs.resumed_req_ids
    for req_id in itertools.chain(finished_req_ids, preempted_req_ids, resumed_req_ids):
        mamba_state_idx.pop(req_id, None)


class _FusedPrecopy(NamedTuple):
    """The fused-path resources, all present once resolved."""

    ctx: MambaSpecDecodeGPUContext
    state_idx: CpuGpuBuffer
    src_col: CpuGpuBuffer
    token_bias: CpuGpuBuffer


def _resolve_fused_precopy(
    align_ctx: MambaSpecDecodeGPUContext | None,
) -> _FusedPrecopy | None:
    if align_ctx is None:
        return None
    assert align_ctx.mamba_state_idx_buf is not None
    assert align_ctx.precopy_src_col_buf is not None
    assert align_ctx.precopy_token_bias_buf is not None
    return _FusedPrecopy(
        align_ctx,
        align_ctx.mamba_state_idx_buf,
        align_ctx.precopy_src_col_buf,
        align_ctx.precopy_token_bias_buf,
    )


def preprocess_mamba(
    scheduler_output: SchedulerOutput,
    kv_cache_config: KVCacheConfig,
    cache_config: CacheConfig,
    mamba_state_idx: dict[str, int],
    input_batch: InputBatch,
    requests: dict[str, CachedRequestState],
    forward_context: dict[str, Any],
    mamba_state_copy_funcs: MambaStateCopyFuncsByType,
    copy_bufs: MambaCopyBuffers,
    align_ctx: MambaSpecDecodeGPUContext | None = None,
) -> None:
    """Move the running state of each request to the column it will use this step."""
    fused = _resolve_fused_precopy(align_ctx)
    mamba_group_ids = copy_bufs.mamba_group_ids
    mamba_spec = copy_bufs.mamba_spec
    num_speculative_blocks = mamba_spec.num_speculative_blocks
    assert cache_config.enable_prefix_caching
    block_size = mamba_spec.block_size
    cleanup_mamba_state_idx(scheduler_output, mamba_state_idx)

    copy_bufs.offset = 0
    num_reqs = len(input_batch.req_ids)

    if fused is not None:
        if num_reqs == 0:
            return
        if not fused.ctx.is_initialized:
            fused.ctx.initialize_from_forward_context(
                kv_cache_config,
                forward_context,
                mamba_state_copy_funcs,
                [
                    input_batch.block_table[gid].get_device_tensor(num_reqs)
                    for gid in fused.ctx.mamba_group_ids
                ],
            )

        fused.src_col.np[:num_reqs] = -1
        fused.token_bias.np[:num_reqs] = 0

    for i, req_id in enumerate(input_batch.req_ids):
        req_state = requests[req_id]
        prev_state_idx = mamba_state_idx.get(req_id)
        if prev_state_idx is None:
            # New or resumed request: nothing computed gives -1.
            prev_state_idx = (req_state.num_computed_tokens - 1) // block_size

        num_scheduled_tokens = scheduler_output.num_scheduled_tokens[req_id]
        num_blocks = (
            cdiv(req_state.num_computed_tokens + num_scheduled_tokens, block_size)
            + num_speculative_blocks
        )
        # The running state lives in the block before the speculative ones.
        curr_state_idx = num_blocks - 1 - num_speculative_blocks
        mamba_state_idx[req_id] = curr_state_idx

        if prev_state_idx != -1 and prev_state_idx != curr_state_idx:
            accept_token_bias = int(input_batch.num_accepted_tokens_cpu[i]) - 1
            if fused is not None:
                assert accept_token_bias >= 0
                fused.state_idx.np[i] = curr_state_idx
                fused.src_col.np[i] = prev_state_idx
                fused.token_bias.np[i] = accept_token_bias
            else:
                collect_mamba_copy_meta(
                    copy_bufs,
                    kv_cache_config,
                    mamba_state_copy_funcs,
                    mamba_group_ids,
                    prev_state_idx,
                    curr_state_idx,
                    accept_token_bias,
                    req_state,
                    forward_context,
                )
            input_batch.num_accepted_tokens_cpu[i] = 1

    if fused is not None:
        fused.state_idx.copy_to_gpu(num_reqs)
        fused.src_col.copy_to_gpu(num_reqs)
        fused.token_bias.copy_to_gpu(num_reqs)
        fused.ctx.run_fused_precopy(
            num_reqs=num_reqs,
            state_idx_gpu=fused.state_idx.gpu,
            src_col_gpu=fused.src_col.gpu,
            token_bias_gpu=fused.token_bias.gpu,
            idx_mapping=None,
        )
    else:
        do_mamba_copy_block(copy_bufs)
