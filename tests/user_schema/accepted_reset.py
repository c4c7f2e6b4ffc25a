"""Stage each request's accepted-token count of the previous step, then reset the host
counts of the live slots to 1 (every entry of ``req_ids`` is live: no ``num_reqs``).
The host counts are one numpy array that the context and the input batch share."""


def stage_accepted(ctx, input_batch, req_ids):
    n = len(req_ids)
    for i in range(n):
        ctx.accepted_buf.np[i] = input_batch.num_accepted_tokens_cpu[i]
        ctx.num_accepted_tokens_cpu[i] = 1
    ctx.accepted_buf.copy_to_gpu(n)


def planted_resets_every_slot(ctx, input_batch, req_ids):
    """Planted bug: resets the counts of the padded slots too."""
    n = len(req_ids)
    for i in range(n):
        ctx.accepted_buf.np[i] = input_batch.num_accepted_tokens_cpu[i]
    ctx.num_accepted_tokens_cpu[:] = 1
    ctx.accepted_buf.copy_to_gpu(n)


def planted_reset_first(ctx, input_batch, req_ids):
    """Planted bug: resets before staging, so every slot stages 1."""
    n = len(req_ids)
    ctx.num_accepted_tokens_cpu[:n] = 1
    for i in range(n):
        ctx.accepted_buf.np[i] = input_batch.num_accepted_tokens_cpu[i]
    ctx.accepted_buf.copy_to_gpu(n)
