"""Single-loop generation: the refactor that merged the two helpers (domain.md section 2)."""


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    state_idx_buf = ctx.mamba_state_idx_buf
    scheduled_buf = ctx.num_scheduled_tokens_buf
    computed_buf = ctx.num_computed_tokens_buf
    draft_buf = ctx.num_draft_tokens_buf
    assert state_idx_buf is not None
    assert scheduled_buf is not None
    assert computed_buf is not None
    assert draft_buf is not None

    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    for i, req_id in enumerate(req_ids[:num_reqs]):
        assert req_id in mamba_state_idx, (
            f"mamba state index for request {req_id!r} is missing: "
            "preprocess must run before stage_postprocess_inputs_to_gpu"
        )
        state_idx_buf.np[i] = mamba_state_idx[req_id]
        scheduled_buf.np[i] = scheduler_output.num_scheduled_tokens[req_id]
        computed_buf.np[i] = requests[req_id].num_computed_tokens
        draft_buf.np[i] = len(spec_tokens.get(req_id, ()))

    state_idx_buf.copy_to_gpu(num_reqs)
    scheduled_buf.copy_to_gpu(num_reqs)
    computed_buf.copy_to_gpu(num_reqs)
    draft_buf.copy_to_gpu(num_reqs)
