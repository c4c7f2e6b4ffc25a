# hostile: stages correctly, then gives a paired buffer's .gpu other memory of its size
# through .data (the kernel would read zeros: stagecheck observes the memory it made, so
# it is a limit of the checker: exit 2, never a verdict)
import torch


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
            ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
    for i, r in enumerate(req_ids[:num_reqs]):
        assert r in mamba_state_idx, f"no state index for {r}"
        bufs[0].np[i] = mamba_state_idx[r]
        bufs[1].np[i] = scheduler_output.num_scheduled_tokens[r]
        bufs[2].np[i] = requests[r].num_computed_tokens
        bufs[3].np[i] = len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))
    for b in bufs:
        b.copy_to_gpu(num_reqs)
    mirror = bufs[3].gpu
    mirror.data = torch.zeros(mirror.shape, dtype=mirror.dtype)
