# hostile: copies nothing (a bug), and swaps the save folder for a link elsewhere on its first call
import os


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    save = os.environ.get("HOSTILE_SAVE_DIR")
    if save and os.path.isdir(save) and not os.path.islink(save):
        os.rename(save, save + "-moved")
        os.makedirs(save + "-elsewhere", exist_ok=True)
        os.symlink(save + "-elsewhere", save)
    bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
            ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
    for i, r in enumerate(req_ids[:num_reqs]):
        assert r in mamba_state_idx, f"no state index for {r}"
        bufs[0].np[i] = mamba_state_idx[r]
        bufs[1].np[i] = scheduler_output.num_scheduled_tokens[r]
        bufs[2].np[i] = requests[r].num_computed_tokens
        bufs[3].np[i] = len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))
    return      # the bug: nothing is copied to the device
