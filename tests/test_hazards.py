"""The write-after-copy hazard detector: CPU model of asynchronous copies, and real CUDA."""

import os

import pytest
import torch

from oracles.differential import CampaignConfig, run_campaign
from oracles.run import observe
from oracles.targets import load_target
from spec import check
from tests.helpers import scenario

REWRITE = "tests/targets/buggy_draft_written_after_copy.py::stage_postprocess_inputs_to_gpu"
GENERATIONS = ["legacy", "single-loop", "prefix-migration"]
MODES = [pytest.param("cpu", {"deferred": True}, id="cpu-deferred"),
         pytest.param("cuda", {"gpu_busy_cycles": 50_000_000}, id="cuda",
                      marks=pytest.mark.cuda)]


def hazard_kinds(s, o, target):
    return {f.extra.get("kind") for f in check(s, o, target.profile)
            if f.invariant == "no_copy_hazard"}


@pytest.mark.parametrize("device,mode", MODES)
def test_a_view_rewritten_after_its_copy_is_a_hazard(device, mode):
    target, s = load_target(REWRITE), scenario()
    o, _ = observe(target, s, device, **mode)
    assert "write-into-pending-copy" in hazard_kinds(s, o, target)


@pytest.mark.parametrize("device,mode", MODES)
@pytest.mark.parametrize("name", GENERATIONS)
def test_two_steps_without_a_sync_are_a_hazard_and_with_one_are_not(device, mode, name):
    target, s = load_target(name), scenario()
    o, _ = observe(target, s, device, steps=2, sync_between_steps=False, **mode)
    assert "write-into-pending-copy" in hazard_kinds(s, o, target)
    o, _ = observe(target, s, device, steps=2, sync_between_steps=True, **mode)
    assert check(s, o, target.profile) == []


@pytest.mark.parametrize("device,mode", MODES)
def test_an_equal_value_rewrite_is_still_a_hazard(device, mode, tmp_path):
    path = tmp_path / "rewrite_equal.py"
    source = open(os.path.join(os.path.dirname(__file__), "..", "impl",
                               "staging_single_loop.py")).read()
    path.write_text(source + (
        "\n\ndef stage(ctx, so, req_ids, num_reqs, requests, idx):\n"
        "    stage_postprocess_inputs_to_gpu(ctx, so, req_ids, num_reqs, requests, idx)\n"
        "    if num_reqs:\n"
        "        ctx.num_draft_tokens_buf.cpu[0] = int(ctx.num_draft_tokens_buf.np[0])\n"))
    target, s = load_target(f"{path}::stage"), scenario()
    o, _ = observe(target, s, device, **mode)
    assert hazard_kinds(s, o, target) == {"write-into-pending-copy"}   # value unchanged


@pytest.mark.parametrize("name", GENERATIONS)
def test_correct_generations_are_silent_under_the_cpu_model(name):
    config = CampaignConfig(examples=300, deferred_copies=True, out_of_contract=False)
    result = run_campaign(None, load_target(name), config)
    assert [f for f in result.findings if f.invariant == "no_copy_hazard"] == []
    assert result.errors == []


@pytest.mark.cuda
@pytest.mark.parametrize("name", GENERATIONS)
def test_correct_generations_are_silent_on_cuda(name):
    config = CampaignConfig(examples=1000, device="cuda", gpu_busy_cycles=1_000_000)
    result = run_campaign(None, load_target(name), config)
    assert result.errors == [], [f.message for f in result.errors]


@pytest.mark.cuda
def test_cuda_buffers_are_pinned_and_mirrors_on_the_device():
    o, inputs = observe(load_target("single-loop"), scenario(), "cuda")
    for buf in inputs.buffers.values():
        assert buf._plain_cpu.is_pinned() and buf.gpu.is_cuda
    assert torch.cuda.is_available()


def test_campaigns_of_two_synchronized_steps_are_silent():
    config = CampaignConfig(examples=100, deferred_copies=True, steps=2, out_of_contract=False)
    result = run_campaign(load_target("legacy"), load_target("single-loop"), config)
    assert result.errors == []
