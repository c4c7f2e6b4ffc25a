# SPDX-License-Identifier: Apache-2.0
"""Mamba prefix-caching helpers in the shape of vLLM v0.17's ``mamba_utils.py``, where
``preprocess_mamba`` takes nine parameters (no ``align_ctx``): every state move is
gathered as pointer metadata into the pre-copy buffers, then one batched copy runs."""

import itertools
from typing import Any

import torch

from vllm.config import CacheConfig
from vllm.triton_utils import tl, triton
from vllm.utils.math_utils import cdiv
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.kv_cache_interface import KVCacheConfig


@triton.jit
def _copy_bytes_kernel(src_ptrs, dst_ptrs, sizes, BLOCK: tl.constexpr):
    entry = tl.program_id(0)
    src = tl.load(src_ptrs + entry)
    dst = tl.load(dst_ptrs + entry)
    size = tl.load(sizes + entry)
    lanes = tl.arange(0, BLOCK)
    for start in range(0, size, BLOCK):
        inside = (start + lanes) < size
        byte = tl.load((src + start + lanes).to(tl.pointer_type(tl.uint8)), mask=inside)
        tl.store((dst + start + lanes).to(tl.pointer_type(tl.uint8)), byte, mask=inside)


def batch_memcpy(src_ptrs, dst_ptrs, sizes):
    _copy_bytes_kernel[(src_ptrs.shape[0],)](src_ptrs, dst_ptrs, sizes, BLOCK=1024)


def gather_copy_meta(copy_bufs, kv_cache_config, copy_funcs, group_ids, src_col, dst_col,
                     token_bias, req_state, forward_context):
    """Append one (source, destination, size) entry per state tensor of each group."""
    if src_col == dst_col and token_bias == 0:
        return
    src_ptrs_np, dst_ptrs_np, sizes_np = (copy_bufs.src_ptrs.np, copy_bufs.dst_ptrs.np,
                                          copy_bufs.sizes.np)   # read first, as upstream
    at = copy_bufs.offset
    for gid in group_ids:
        block_ids = req_state.block_ids[gid]
        for layer in kv_cache_config.kv_cache_groups[gid].layer_names:
            for state, copy_func in zip(forward_context[layer].kv_cache, copy_funcs):
                spec = copy_func(state, block_ids, src_col, token_bias + 1)
                src_ptrs_np[at] = spec.start_addr
                dst_ptrs_np[at] = state[block_ids[dst_col]].data_ptr()
                sizes_np[at] = spec.num_elements * state.element_size()
                at += 1
    copy_bufs.offset = at


def run_batched_copy(copy_bufs):
    n = copy_bufs.offset
    if n:
        batch_memcpy(copy_bufs.src_ptrs.copy_to_gpu(n), copy_bufs.dst_ptrs.copy_to_gpu(n),
                     copy_bufs.sizes.copy_to_gpu(n))


def forget_departed(scheduler_output: SchedulerOutput, mamba_state_idx: dict[str, int]):
    gone = itertools.chain(scheduler_output.finished_req_ids,
                           scheduler_output.preempted_req_ids or (),
                           scheduler_output.scheduled_cached_reqs.resumed_req_ids)
    for req_id in gone:
        mamba_state_idx.pop(req_id, None)


def preprocess_mamba(
    scheduler_output: SchedulerOutput,
    kv_cache_config: KVCacheConfig,
    cache_config: CacheConfig,
    mamba_state_idx: dict[str, int],
    input_batch: Any,
    requests: dict[str, Any],
    forward_context: dict[str, Any],
    mamba_state_copy_funcs: tuple,
    copy_bufs: Any,
):
    """Move each request's running state to the column its new tokens end in."""
    assert cache_config.enable_prefix_caching
    spec = copy_bufs.mamba_spec
    forget_departed(scheduler_output, mamba_state_idx)
    copy_bufs.offset = 0
    for i, req_id in enumerate(input_batch.req_ids):
        state = requests[req_id]
        before = mamba_state_idx.get(req_id)
        if before is None:            # new or resumed: -1 when nothing is computed yet
            before = (state.num_computed_tokens - 1) // spec.block_size
        scheduled = scheduler_output.num_scheduled_tokens[req_id]
        blocks = cdiv(state.num_computed_tokens + scheduled, spec.block_size)
        now = blocks - 1
        mamba_state_idx[req_id] = now
        if before != -1 and before != now:
            gather_copy_meta(copy_bufs, kv_cache_config, mamba_state_copy_funcs,
                             copy_bufs.mamba_group_ids, before, now,
                             input_batch.num_accepted_tokens_cpu[i] - 1, state,
                             forward_context)
            input_batch.num_accepted_tokens_cpu[i] = 1
    run_batched_copy(copy_bufs)
