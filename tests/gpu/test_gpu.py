"""The GPU tier: what only a CUDA device can show (skipped where torch sees none).

Real pinned buffers and non-blocking copies for the hazard detector, and the compiled
kernel on large states. ``benchmarks/gpu_results.sh`` runs this tier on the H200.
"""

import pathlib

import pytest

from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.observe import observe
from stagecheck.oracles.observe.instrumented import InstrumentedBackend
from stagecheck.oracles.options import CampaignConfig, RunOptions
from stagecheck.oracles.targets import load_target
from stagecheck.spec import check
from tests.helpers import scenario

pytestmark = pytest.mark.cuda

ROOT = pathlib.Path(__file__).resolve().parents[2]
REWRITE = "tests/targets/buggy_draft_written_after_copy.py::stage_postprocess_inputs_to_gpu"
GENERATIONS = ["legacy", "single-loop", "prefix-migration"]
#: device work queued ahead of each call, so its copies are still queued when it writes
CUDA = RunOptions(device="cuda", gpu_busy_cycles=50_000_000)


def hazard_kinds(s, o, target):
    return {f.extra.get("kind") for f in check(s, o, target.profile)
            if f.invariant == "no_copy_hazard"}


def test_a_view_rewritten_after_its_copy_is_a_hazard():
    target, s = load_target(REWRITE), scenario()
    assert "write-into-pending-copy" in hazard_kinds(s, observe(target, s, CUDA), target)


@pytest.mark.parametrize("name", GENERATIONS)
def test_two_steps_without_a_sync_are_a_hazard_and_with_one_are_not(name):
    target, s = load_target(name), scenario()
    two = RunOptions(device="cuda", gpu_busy_cycles=50_000_000, steps=2)
    o = observe(target, s, two, sync_between_steps=False)
    assert "write-into-pending-copy" in hazard_kinds(s, o, target)
    o = observe(target, s, two, sync_between_steps=True)
    assert check(s, o, target.profile) == []


def test_an_equal_value_rewrite_is_still_a_hazard(tmp_path):
    path = tmp_path / "rewrite_equal.py"
    source = (ROOT / "impl" / "staging_single_loop.py").read_text()
    path.write_text(source + (
        "\n\ndef stage(ctx, so, req_ids, num_reqs, requests, idx):\n"
        "    stage_postprocess_inputs_to_gpu(ctx, so, req_ids, num_reqs, requests, idx)\n"
        "    if num_reqs:\n"
        "        ctx.num_draft_tokens_buf.cpu[0] = int(ctx.num_draft_tokens_buf.np[0])\n"))
    target, s = load_target(f"{path}::stage"), scenario()
    assert hazard_kinds(s, observe(target, s, CUDA), target) == {"write-into-pending-copy"}


@pytest.mark.parametrize("name", GENERATIONS)
def test_correct_generations_are_silent_on_cuda(name):
    config = CampaignConfig.from_options(examples=1000, device="cuda", gpu_busy_cycles=1_000_000)
    result = run_campaign(None, load_target(name), config)
    assert result.errors == [], [f.message for f in result.errors]


def test_cuda_buffers_are_pinned_and_mirrors_on_the_device():
    buf = InstrumentedBackend("cuda").make_buffer("num_draft_tokens_buf", "int32", [1, 2],
                                                   [3, 4], [])
    try:
        assert buf._plain_cpu.is_pinned() and buf.gpu.is_cuda
        assert buf.final_cpu() == [1, 2] and buf.final_gpu() == [3, 4]
    finally:
        buf.release()


def test_cuda_large_states_and_wide_conv_rows() -> None:
    """Multi-warp overlapping shifts (rows of 2 KiB, chunks of 8 KiB) and 1 MiB temporal
    states, compiled kernel against the reference, three times."""
    from tests.unit.test_kernel import (BS, NO_COPY, SAVE_COPY, SAVE_SHIFT, SHIFT_2, layer,
                                        make_kernel_scenario, run_both)
    layers = [layer(0, (4, 512, "float32"), ([256, 1024], "float32")),
              layer(1, (4, 1000, "bfloat16"), ([64, 8, 128], "bfloat16"), pad_bytes=16)]
    requests = [SAVE_SHIFT, SAVE_COPY, NO_COPY, SHIFT_2, (6, 4, 3, 4, 1)] * 8
    scenario_ = make_kernel_scenario(requests, BS, layers)
    for _ in range(3):
        run_both(scenario_)


def test_fast_cuda_buffers_end_as_the_instrumented_ones():
    """The engine's fast CUDA buffers (reused pinned pairs, no logging) leave the same
    host views, device mirrors and copies as the instrumented ones, call after call."""
    from stagecheck.oracles.observe.fast import FastCudaBackend
    from stagecheck.oracles.sample import sample_scenario
    fast = FastCudaBackend()
    for name in GENERATIONS + ["tests/targets/buggy_copy_one_slot_short.py::"
                               "stage_postprocess_inputs_to_gpu"]:
        target = load_target(name)
        for index in range(60):
            s = sample_scenario(target.schema, 7, index)
            a = observe(target, s, RunOptions(device="cuda", gpu_busy_cycles=0), fast)
            b = observe(target, s, RunOptions(device="cuda"))
            assert (a.cpu, a.gpu, a.exception_type) == (b.cpu, b.gpu, b.exception_type)
            assert [c for c in a.events if type(c).__name__ == "Copy"] == \
                [c for c in b.events if type(c).__name__ == "Copy"]


def test_each_worker_makes_its_first_use_of_the_device_before_its_first_call(tmp_path,
                                                                            monkeypatch):
    """The driver's initialisation is not part of any call's deadline: a first use made
    inside the first call's window was a false hang (docs/cuda.md)."""
    from stagecheck.oracles.worker.deadlines import TRACE_HANGS_ENV
    trace = tmp_path / "hangs.jsonl"
    monkeypatch.setenv(TRACE_HANGS_ENV, str(trace))
    config = CampaignConfig.from_options(examples=300, device="cuda", jobs=2)
    result = run_campaign(load_target("legacy"), load_target("single-loop"), config)
    assert result.errors == [] and result.examples_in_contract == 300
    assert not trace.exists(), trace.read_text()


def test_the_batched_engine_on_cuda_finds_a_buggy_fixture_and_passes_the_generations():
    buggy = load_target("tests/targets/buggy_swapped_views.py::stage_postprocess_inputs_to_gpu")
    config = CampaignConfig.from_options(examples=2000, device="cuda")
    assert run_campaign(load_target("single-loop"), buggy, config).verdict() == "different"
    result = run_campaign(load_target("legacy"), load_target("single-loop"), config)
    assert result.errors == [] and result.examples_in_contract == 2000
