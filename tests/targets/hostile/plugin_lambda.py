"""hostile pytest module: a lambda as the target (a worker cannot load it: refused)."""

from stagecheck.impl.staging_single_loop import stage_postprocess_inputs_to_gpu as single


def test_a_lambda_target(stagecheck):
    stagecheck.assert_equivalent("single-loop", lambda *args: single(*args), examples=5,
                                 kernel="off")
