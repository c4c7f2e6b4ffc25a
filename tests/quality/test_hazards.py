"""The write-after-copy hazard detector, on its CPU model of asynchronous copies.

The same tests run on a real GPU in tests/gpu/test_gpu.py (``MODES`` there adds CUDA).
"""

import pathlib

import pytest

from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.observe import observe
from stagecheck.oracles.options import CampaignConfig, RunOptions
from stagecheck.oracles.targets import load_target
from stagecheck.spec import check
from tests.helpers import scenario

ROOT = pathlib.Path(__file__).resolve().parents[2]
REWRITE = "tests/targets/buggy_draft_written_after_copy.py::stage_postprocess_inputs_to_gpu"
GENERATIONS = ["legacy", "single-loop", "prefix-migration"]
MODES = [pytest.param(RunOptions(deferred_copies=True), id="cpu-deferred")]


def hazard_kinds(s, o, target):
    return {f.extra.get("kind") for f in check(s, o, target.profile)
            if f.invariant == "no_copy_hazard"}


@pytest.mark.parametrize("options", MODES)
def test_a_view_rewritten_after_its_copy_is_a_hazard(options):
    target, s = load_target(REWRITE), scenario()
    o = observe(target, s, options)
    assert "write-into-pending-copy" in hazard_kinds(s, o, target)


@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("name", GENERATIONS)
def test_two_steps_without_a_sync_are_a_hazard_and_with_one_are_not(options, name):
    target, s = load_target(name), scenario()
    two = RunOptions(**{**options.__dict__, "steps": 2})
    o = observe(target, s, two, sync_between_steps=False)
    assert "write-into-pending-copy" in hazard_kinds(s, o, target)
    o = observe(target, s, two, sync_between_steps=True)
    assert check(s, o, target.profile) == []


@pytest.mark.parametrize("options", MODES)
def test_an_equal_value_rewrite_is_still_a_hazard(options, tmp_path):
    path = tmp_path / "rewrite_equal.py"
    source = (ROOT / "impl" / "staging_single_loop.py").read_text()
    path.write_text(source + (
        "\n\ndef stage(ctx, so, req_ids, num_reqs, requests, idx):\n"
        "    stage_postprocess_inputs_to_gpu(ctx, so, req_ids, num_reqs, requests, idx)\n"
        "    if num_reqs:\n"
        "        ctx.num_draft_tokens_buf.cpu[0] = int(ctx.num_draft_tokens_buf.np[0])\n"))
    target, s = load_target(f"{path}::stage"), scenario()
    o = observe(target, s, options)
    assert hazard_kinds(s, o, target) == {"write-into-pending-copy"}   # value unchanged


@pytest.mark.parametrize("name", GENERATIONS)
def test_correct_generations_are_silent_under_the_cpu_model(name):
    config = CampaignConfig.from_options(examples=300, deferred_copies=True, out_of_contract=False)
    result = run_campaign(None, load_target(name), config)
    assert [f for f in result.findings if f.invariant == "no_copy_hazard"] == []
    assert result.errors == []


def test_campaigns_of_two_synchronized_steps_are_silent():
    config = CampaignConfig.from_options(examples=100, deferred_copies=True, steps=2, out_of_contract=False)
    result = run_campaign(load_target("legacy"), load_target("single-loop"), config)
    assert result.errors == []
