# buggy: caches each request's computed-token count in a module-level dict on its first
# call and never refreshes it; right on the first call of a process, stale on later ones
# that reuse a request id with another count (a difference that needs earlier calls)
_COMPUTED: dict = {}


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
            ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    for i, req_id in enumerate(req_ids[:num_reqs]):
        assert req_id in mamba_state_idx, (
            f"mamba state index for request {req_id!r} is missing: "
            "preprocess must run before stage_postprocess_inputs_to_gpu"
        )
        bufs[0].np[i] = mamba_state_idx[req_id]
        bufs[1].np[i] = scheduler_output.num_scheduled_tokens[req_id]
        bufs[2].np[i] = _COMPUTED.setdefault(req_id, requests[req_id].num_computed_tokens)
        bufs[3].np[i] = len(spec_tokens.get(req_id, ()))
    for b in bufs:
        b.copy_to_gpu(num_reqs)
