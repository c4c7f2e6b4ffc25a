# hostile: records a CUDA event after its uploads (fine on CUDA; a CPU-only torch has no
# CUDA events, so on a CPU run it is a limit of the run: exit 2, never a finding)
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
    uploaded = torch.cuda.Event()
    for b in bufs:
        b.copy_to_gpu(num_reqs)
    uploaded.record()
