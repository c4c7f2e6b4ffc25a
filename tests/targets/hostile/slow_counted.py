# hostile: a correct target that sleeps 0.05 s per call and counts its calls (a line each)
import os
import time


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    mark = os.environ.get("HOSTILE_MARK")
    if mark:
        with open(mark, "a") as counted:
            counted.write("call\n")
    time.sleep(0.05)
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
