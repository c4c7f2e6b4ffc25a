"""hostile pytest module: a plain-function target that ends its process (os._exit(0)) on
batches of three or more; copied into a folder as test_plugin.py and run by pytest."""

import os

from stagecheck.impl.staging_single_loop import stage_postprocess_inputs_to_gpu as single


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    if num_reqs > 2:
        os._exit(0)
    return single(ctx, scheduler_output, req_ids, num_reqs, requests, mamba_state_idx)


def test_one_plain_target_that_exits(stagecheck):
    stagecheck.assert_equivalent("single-loop", stage_postprocess_inputs_to_gpu, examples=50,
                                 seed=0, kernel="off", out_of_contract=False)


def test_two_passes():
    pass


def test_three_passes():
    pass
