"""Later generation: adds ``is_prefilling`` and the ``run_prefix_state_migration`` flag.

With the flag False the state-index buffer is neither required, written nor
copied, and a request without a state index is not an error.
"""


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx, *, run_prefix_state_migration: bool):
    state_idx_buf = ctx.mamba_state_idx_buf if run_prefix_state_migration else None
    scheduled_buf = ctx.num_scheduled_tokens_buf
    computed_buf = ctx.num_computed_tokens_buf
    draft_buf = ctx.num_draft_tokens_buf
    prefilling_buf = ctx.is_prefilling_buf
    if run_prefix_state_migration:
        assert state_idx_buf is not None
    assert scheduled_buf is not None
    assert computed_buf is not None
    assert draft_buf is not None
    assert prefilling_buf is not None

    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    for i, req_id in enumerate(req_ids[:num_reqs]):
        if state_idx_buf is not None:
            assert req_id in mamba_state_idx, (
                f"mamba state index for request {req_id!r} is missing: "
                "preprocess must run before stage_postprocess_inputs_to_gpu"
            )
            state_idx_buf.np[i] = mamba_state_idx[req_id]
        request = requests[req_id]
        scheduled_buf.np[i] = scheduler_output.num_scheduled_tokens[req_id]
        computed_buf.np[i] = request.num_computed_tokens
        draft_buf.np[i] = len(spec_tokens.get(req_id, ()))
        prefilling_buf.np[i] = request.num_computed_tokens < request.num_prompt_tokens

    if state_idx_buf is not None:
        state_idx_buf.copy_to_gpu(num_reqs)
    scheduled_buf.copy_to_gpu(num_reqs)
    computed_buf.copy_to_gpu(num_reqs)
    draft_buf.copy_to_gpu(num_reqs)
    prefilling_buf.copy_to_gpu(num_reqs)
