# hostile: every call leaves a cycle whose finaliser closes every descriptor from 3 up
# (stagecheck's pipe among them) when the cyclic collector runs, after the call returned
import os


class _Cycle:
    def __init__(self):
        self.me = self

    def __del__(self):
        os.closerange(3, 4096)


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    _Cycle()
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
