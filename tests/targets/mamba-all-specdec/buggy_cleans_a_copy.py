# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: inputs_unchanged, same_inputs_after
# Fixture: the cleanup runs on a copy of the dict, so the runner's mamba_state_idx keeps departed ids
"""Mamba "all" prefix-caching mode: per-step bookkeeping of the block that holds the
state of each request's last scheduled token.

With speculative decoding, accepted drafts can leave a sequence at a position that is
not block aligned; the next step needs the block index the previous step ended in to
anchor its in-place state writes. This module keeps those indices and stages them for
the device.
"""

from __future__ import annotations

import itertools

import torch

from vllm.logger import init_logger
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.kv_cache_interface import KVCacheConfig, MambaSpec
from vllm.v1.utils import CpuGpuBuffer
from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

logger = init_logger(__name__)


def get_mamba_block_size(kv_cache_config: KVCacheConfig) -> int:
    """The block size shared by every Mamba group (they must agree)."""
    sizes = {
        group.kv_cache_spec.block_size
        for group in kv_cache_config.kv_cache_groups
        if isinstance(group.kv_cache_spec, MambaSpec)
    }
    assert len(sizes) == 1, "all mamba groups must share block_size"
    return next(iter(sizes))


def postprocess_mamba_all(
    scheduler_output: SchedulerOutput,
    kv_cache_config: KVCacheConfig,
    input_batch: InputBatch,
    requests: dict[str, CachedRequestState],
    mamba_state_idx: dict[str, int],
    num_spec_tokens: int,
    num_reqs: int,
) -> None:
    """Record, for requests that ran a full decode step, the block of their last token."""
    if num_spec_tokens <= 0:
        return
    block_size = get_mamba_block_size(kv_cache_config)
    full_decode_len = 1 + num_spec_tokens
    for req_id in input_batch.req_ids[:num_reqs]:
        num_query = scheduler_output.num_scheduled_tokens.get(req_id, 0)
        if num_query == full_decode_len:
            seq_len = requests[req_id].num_computed_tokens + num_query
            mamba_state_idx[req_id] = max(0, (seq_len - 1) // block_size)
        else:
            mamba_state_idx.pop(req_id, None)


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


def preprocess_mamba_all_specdec(
    scheduler_output: SchedulerOutput,
    input_batch: InputBatch,
    mamba_state_idx: dict[str, int],
    num_reqs: int,
    prev_last_scheduled_idx_buf: CpuGpuBuffer,
) -> None:
    state_idx = dict(mamba_state_idx)
    cleanup_mamba_state_idx(scheduler_output, state_idx)
    np_view = prev_last_scheduled_idx_buf.np
    for i, req_id in enumerate(input_batch.req_ids[:num_reqs]):
        np_view[i] = state_idx.get(req_id, -1)
    np_view[num_reqs:].fill(-1)
    prev_last_scheduled_idx_buf.copy_to_gpu()
