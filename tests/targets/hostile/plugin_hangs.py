"""hostile pytest module for ``pytest -n 2``: a target that zeroes its worker's position
counter and spins (it must not hang the session), and one that leaves processes running
in sessions of their own (none may outlive the session)."""

import os


def _target(name):
    return f"{os.environ['HOSTILE_DIR']}/{name}.py::stage_postprocess_inputs_to_gpu"


def test_a_target_that_hangs_is_a_finding(stagecheck):
    result = stagecheck.run("single-loop", _target("zeroes_counter"), examples=3, timeout=0.3,
                            kernel="off", out_of_contract=False)
    assert any(f.extra.get("kind") == "hang" for f in result.errors)


def test_a_target_that_daemonizes_passes_and_leaves_nothing(stagecheck):
    stagecheck.assert_equivalent("single-loop", _target("daemonizes"), examples=5,
                                 kernel="off", out_of_contract=False)
