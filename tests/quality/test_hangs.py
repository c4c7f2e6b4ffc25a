"""A candidate that hangs is reported as a hang, not waited on forever."""

import textwrap

from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.targets import load_target


def test_a_hanging_candidate_is_an_error_finding(tmp_path):
    path = tmp_path / "hang.py"
    path.write_text(textwrap.dedent('''
        def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs,
                                            requests, mamba_state_idx):
            bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                    ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
            for i, r in enumerate(req_ids[:num_reqs]):
                assert r in mamba_state_idx, f"no state index for {r}"
                bufs[0].np[i] = mamba_state_idx[r]
                bufs[1].np[i] = scheduler_output.num_scheduled_tokens[r]
                bufs[2].np[i] = requests[r].num_computed_tokens
                bufs[3].np[i] = len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))
            while num_reqs > 1:   # the bug: spins on any batch of two or more
                pass
            for b in bufs:
                b.copy_to_gpu(num_reqs)
    '''))
    result = run_campaign(load_target("single-loop"), load_target(f"{path}::stage_postprocess_"
                                                                  "inputs_to_gpu"),
                          CampaignConfig.from_options(examples=30, timeout=0.2, out_of_contract=False))
    kinds = {(f.invariant, f.extra.get("kind")) for f in result.errors}
    assert ("expected_outcome", "hang") in kinds
    assert any(f.invariant == "same_outcome" and "hung" in f.message for f in result.errors)
