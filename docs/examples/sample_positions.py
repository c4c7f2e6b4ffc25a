"""The staging function of the worked example in docs/schemas.md."""


def stage_sample_positions(ctx, scheduler_output, req_ids, num_reqs, requests):
    """Per live request: the position of its last scheduled token (-1 past the batch,
    the whole buffer uploaded), and how many draft tokens it has (live range uploaded)."""
    for i, req_id in enumerate(req_ids[:num_reqs]):
        state = requests.get(req_id)
        assert state is not None, f"no cached state for request {req_id!r}"
        scheduled = scheduler_output.num_scheduled_tokens[req_id]
        ctx.sample_pos_buf.np[i] = state.num_computed_tokens + scheduled - 1
        drafts = scheduler_output.scheduled_spec_decode_tokens.get(req_id, ())
        ctx.num_drafts_buf.np[i] = len(drafts)
    ctx.sample_pos_buf.np[num_reqs:] = -1
    ctx.sample_pos_buf.copy_to_gpu()
    ctx.num_drafts_buf.copy_to_gpu(num_reqs)
