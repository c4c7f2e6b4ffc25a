"""A staging function stagecheck has no built-in schema for, and three planted bugs.

The attention metadata of a step needs, per live request, the sequence length after
the step (tokens already computed plus tokens scheduled now) and the query length
(tokens scheduled now). Sequence lengths of padded slots must read 0 (CUDA graphs
replay over the padded batch), so that buffer's tail is zeroed and the whole buffer is
uploaded; query lengths are uploaded over the live range.
"""


def stage_attention_lengths(attn, input_batch, scheduler_output, num_reqs):
    seq_lens, query_lens = attn.seq_lens, attn.query_lens
    for i, req_id in enumerate(input_batch.req_ids[:num_reqs]):
        scheduled = scheduler_output.num_scheduled_tokens[req_id]
        query_lens.np[i] = scheduled
        seq_lens.np[i] = input_batch.num_computed_tokens_cpu[i] + scheduled
    seq_lens.np[num_reqs:] = 0
    seq_lens.copy_to_gpu()
    query_lens.copy_to_gpu(num_reqs)


def planted_tail_not_zeroed(attn, input_batch, scheduler_output, num_reqs):
    """Bug 1: the padded slots keep last step's sequence lengths."""
    seq_lens, query_lens = attn.seq_lens, attn.query_lens
    for i, req_id in enumerate(input_batch.req_ids[:num_reqs]):
        scheduled = scheduler_output.num_scheduled_tokens[req_id]
        query_lens.np[i] = scheduled
        seq_lens.np[i] = input_batch.num_computed_tokens_cpu[i] + scheduled
    seq_lens.copy_to_gpu()
    query_lens.copy_to_gpu(num_reqs)


def planted_last_position(attn, input_batch, scheduler_output, num_reqs):
    """Bug 2: stages the position of the last token (length - 1) as the length."""
    seq_lens, query_lens = attn.seq_lens, attn.query_lens
    for i, req_id in enumerate(input_batch.req_ids[:num_reqs]):
        scheduled = scheduler_output.num_scheduled_tokens[req_id]
        query_lens.np[i] = scheduled
        seq_lens.np[i] = input_batch.num_computed_tokens_cpu[i] + scheduled - 1
    seq_lens.np[num_reqs:] = 0
    seq_lens.copy_to_gpu()
    query_lens.copy_to_gpu(num_reqs)


def planted_query_upload_first(attn, input_batch, scheduler_output, num_reqs):
    """Bug 3: the query lengths are uploaded before they are written."""
    seq_lens, query_lens = attn.seq_lens, attn.query_lens
    query_lens.copy_to_gpu(num_reqs)
    for i, req_id in enumerate(input_batch.req_ids[:num_reqs]):
        scheduled = scheduler_output.num_scheduled_tokens[req_id]
        query_lens.np[i] = scheduled
        seq_lens.np[i] = input_batch.num_computed_tokens_cpu[i] + scheduled
    seq_lens.np[num_reqs:] = 0
    seq_lens.copy_to_gpu()
