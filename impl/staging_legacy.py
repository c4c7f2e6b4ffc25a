"""Legacy generation: two helper loops (domain.md section 2).

Helper A writes the state index per slot (asserting it exists) and copies that
buffer; helper B writes the token counts and copies those three buffers.
"""


def _stage_mamba_state_idx_to_gpu(ctx, req_ids, num_reqs, mamba_state_idx):
    state_idx_np = ctx.mamba_state_idx_buf.np
    for i, req_id in enumerate(req_ids[:num_reqs]):
        assert req_id in mamba_state_idx, (
            f"mamba state index for request {req_id!r} is missing: "
            "preprocess must run before stage_mamba_state_idx_to_gpu"
        )
        state_idx_np[i] = mamba_state_idx[req_id]
    ctx.mamba_state_idx_buf.copy_to_gpu(num_reqs)


def _stage_token_counts_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests):
    scheduled_np = ctx.num_scheduled_tokens_buf.np
    computed_np = ctx.num_computed_tokens_buf.np
    draft_np = ctx.num_draft_tokens_buf.np
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    for i, req_id in enumerate(req_ids[:num_reqs]):
        scheduled_np[i] = scheduler_output.num_scheduled_tokens[req_id]
        computed_np[i] = requests[req_id].num_computed_tokens
        draft_np[i] = len(spec_tokens.get(req_id, ()))
    ctx.num_scheduled_tokens_buf.copy_to_gpu(num_reqs)
    ctx.num_computed_tokens_buf.copy_to_gpu(num_reqs)
    ctx.num_draft_tokens_buf.copy_to_gpu(num_reqs)


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    assert ctx.mamba_state_idx_buf is not None
    assert ctx.num_scheduled_tokens_buf is not None
    assert ctx.num_computed_tokens_buf is not None
    assert ctx.num_draft_tokens_buf is not None
    _stage_mamba_state_idx_to_gpu(ctx, req_ids, num_reqs, mamba_state_idx)
    _stage_token_counts_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests)
