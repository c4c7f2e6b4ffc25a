"""Mamba prefix-caching preprocess, fused path: stage where each request's state moves.

Written from the description in the research notes (vLLM v0.27-v0.33,
``preprocess_mamba`` in ``vllm/v1/worker/mamba_utils.py``), for the path that hands
the per-request decisions to a device pre-copy kernel (``align_ctx`` given). The
scalar path without ``align_ctx`` gathers pointer metadata for a batched memcpy and
stages nothing per slot; it is not written here.
"""

from itertools import chain


def ceil_div(a, b):
    return -(-a // b)


def drop_departed(scheduler_output, mamba_state_idx):
    """Forget the state columns of finished, preempted and resumed requests."""
    for req_id in chain(scheduler_output.finished_req_ids,
                        scheduler_output.preempted_req_ids or (),
                        scheduler_output.scheduled_cached_reqs.resumed_req_ids):
        mamba_state_idx.pop(req_id, None)


def preprocess_mamba(scheduler_output, kv_cache_config, cache_config, mamba_state_idx,
                     input_batch, requests, forward_context, mamba_state_copy_funcs,
                     copy_bufs, align_ctx=None):
    if align_ctx is None:
        raise NotImplementedError("the reference covers the fused path (align_ctx) only")
    state_idx = align_ctx.mamba_state_idx_buf
    src_col = align_ctx.precopy_src_col_buf
    token_bias = align_ctx.precopy_token_bias_buf
    assert state_idx is not None and src_col is not None and token_bias is not None
    assert cache_config.enable_prefix_caching
    block_size = copy_bufs.mamba_spec.block_size

    drop_departed(scheduler_output, mamba_state_idx)
    copy_bufs.offset = 0
    req_ids = input_batch.req_ids
    n = len(req_ids)
    if n == 0:
        return
    if not align_ctx.is_initialized:
        align_ctx.initialize_from_forward_context(
            kv_cache_config, forward_context, mamba_state_copy_funcs,
            [input_batch.block_table[g].get_device_tensor(n)
             for g in align_ctx.mamba_group_ids])

    accepted = input_batch.num_accepted_tokens_cpu
    for i, req_id in enumerate(req_ids):
        computed = requests[req_id].num_computed_tokens
        scheduled = scheduler_output.num_scheduled_tokens[req_id]
        before = mamba_state_idx.get(req_id)
        if before is None:
            before = (computed - 1) // block_size
        after = ceil_div(computed + scheduled, block_size) - 1
        mamba_state_idx[req_id] = after
        state_idx.np[i] = after
        if before != -1 and before != after:
            bias = int(accepted[i]) - 1
            assert bias >= 0
            src_col.np[i] = before
            token_bias.np[i] = bias
            accepted[i] = 1
        else:
            src_col.np[i] = -1
            token_bias.np[i] = 0

    state_idx.copy_to_gpu(n)
    src_col.copy_to_gpu(n)
    token_bias.copy_to_gpu(n)
    align_ctx.run_fused_precopy(num_reqs=n, state_idx_gpu=state_idx.gpu,
                                src_col_gpu=src_col.gpu, token_bias_gpu=token_bias.gpu,
                                idx_mapping=None)
