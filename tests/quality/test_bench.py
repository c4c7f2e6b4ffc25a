"""``stagecheck bench``: interleaved per-call timing of two staging targets."""

from __future__ import annotations

import json
import math
import textwrap

import pytest

from stagecheck.oracles.bench import BenchResult, build_bench_inputs, run_bench
from stagecheck.oracles.report import render_bench as format_bench
from stagecheck.oracles.errors import StagecheckError
from stagecheck.oracles.targets import load_target

# Many short rounds rather than a few long ones: on a shared machine a batch now and
# then stalls for tens of milliseconds (CPU quota, a neighbour); the median of 40
# per-round ratios shrugs that off, the median of 5 does not.
QUICK = dict(sizes=(1, 8), repeats=40, min_time=0.04)

SLOW_CANDIDATE = textwrap.dedent('''
    import time


    def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                        mamba_state_idx):
        time.sleep(0.001)
        bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens
        for i, req_id in enumerate(req_ids[:num_reqs]):
            assert req_id in mamba_state_idx, f"no state index for {req_id!r}"
            bufs[0].np[i] = mamba_state_idx[req_id]
            bufs[1].np[i] = scheduler_output.num_scheduled_tokens[req_id]
            bufs[2].np[i] = requests[req_id].num_computed_tokens
            bufs[3].np[i] = len(spec_tokens.get(req_id, ()))
        for buf in bufs:
            buf.copy_to_gpu(num_reqs)
''')


def test_rows_have_positive_finite_costs_and_ratios():
    result = run_bench(load_target("legacy"), load_target("single-loop"), **QUICK)
    assert [r.num_reqs for r in result.rows] == [1, 8]
    for r in result.rows:
        for value in (r.baseline_s, r.candidate_s, r.ratio, r.ratio_q1, r.ratio_q3):
            assert math.isfinite(value) and value > 0
        assert r.ratio_q1 <= r.ratio <= r.ratio_q3
        assert r.rounds >= 40 and r.calls_per_round >= 1
    data = json.loads(json.dumps(result.to_dict()))
    assert data["rows"][1]["num_reqs"] == 8 and data["rows"][1]["spread"] >= 0
    table = format_bench(result)
    assert "num_reqs | baseline µs/call | candidate µs/call | ratio (candidate/baseline)" in table
    assert len([line for line in table.splitlines() if line.strip().startswith(("1 |", "8 |"))]) == 2


def test_a_slow_candidate_shows_a_large_ratio(tmp_path):
    path = tmp_path / "slow_staging.py"
    path.write_text(SLOW_CANDIDATE)
    slow = load_target(f"{path}::stage_postprocess_inputs_to_gpu")
    result = run_bench(load_target("single-loop"), slow, **QUICK)
    for r in result.rows:
        assert r.ratio > 1.5, format_bench(result)
        assert r.candidate_s >= 0.001


def test_same_target_on_both_sides_is_near_one():
    result = run_bench(load_target("legacy"), load_target("legacy"), **QUICK)
    for r in result.rows:
        assert 0.5 < r.ratio < 2, format_bench(result)


def test_later_generation_gets_the_flag_and_its_fifth_buffer():
    target = load_target("prefix-migration")
    inputs = build_bench_inputs(target, 8)
    assert inputs.kwargs == {"run_prefix_state_migration": True}
    ctx = inputs.args[0]
    assert ctx.is_prefilling_buf.cpu.dtype.is_floating_point is False
    target.func(*inputs.args, **inputs.kwargs)
    assert ctx.mamba_state_idx_buf.gpu.tolist() == ctx.mamba_state_idx_buf.cpu.tolist()
    assert ctx.is_prefilling_buf.gpu.tolist() == [(i * 131) % 4096 < 2048 for i in range(8)]
    result = run_bench(load_target("single-loop"), target, sizes=(8,), repeats=3,
                       min_time=0.01)
    (row,) = result.rows
    assert isinstance(result, BenchResult) and row.num_reqs == 8 and row.rounds >= 3
    assert row.ratio_q1 <= row.ratio <= row.ratio_q3


def test_a_target_that_fails_on_valid_inputs_is_reported(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("def stage(ctx, scheduler_output, req_ids, num_reqs, requests, "
                    "mamba_state_idx):\n    raise KeyError(req_ids[0])\n")
    with pytest.raises(StagecheckError, match=r"candidate .* raised KeyError.*num_reqs=1"):
        run_bench(load_target("legacy"), load_target(f"{path}::stage"), **QUICK)


def test_cuda_requested_without_a_device_is_a_stagecheck_error():
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(StagecheckError, match="no CUDA device"):
        run_bench(load_target("legacy"), load_target("legacy"), device="cuda", **QUICK)


def test_each_call_runs_under_the_unit_its_side_is_blamed_for():
    """The worker marks each warm-up call and each batch (``next_position``), and a hang is
    blamed on the side ``_side_at`` names for the last unit marked: every call of each
    side, warm-up, calibration and the alternating rounds, runs in a unit of that side."""
    from types import SimpleNamespace

    from stagecheck.oracles.bench import _UNITS, _side_at, bench_here
    from stagecheck.oracles.worker.protocol import BUSY, hold_position
    position = SimpleNamespace(value=BUSY)
    seen: list[tuple[str | None, str]] = []
    targets = []
    for side in ("baseline", "candidate"):
        target = load_target("legacy")
        staged = target.func

        def recording(*args, _side=side, _staged=staged, **kwargs):
            seen.append((_side_at(position.value - BUSY), _side))
            return _staged(*args, **kwargs)
        target.func = recording
        targets.append(target)
    hold_position(position)
    try:
        bench_here(*targets, "cpu", (8,), 5, 0.01)
    finally:
        hold_position(None)
    assert len(seen) > 20 and {side for _, side in seen} == {"baseline", "candidate"}
    assert all(blamed == side for blamed, side in seen), seen[:12]
    assert position.value - BUSY <= _UNITS


DOES_NOTHING = textwrap.dedent('''
    def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                        mamba_state_idx):
        for i, r in enumerate(req_ids[:num_reqs]):
            ctx.mamba_state_idx_buf.np[i] = mamba_state_idx[r]
            yield
''')


def test_a_candidate_that_does_not_stage_what_the_baseline_stages_is_not_timed(tmp_path):
    """A candidate that returns a generator it never runs stages nothing, in a fraction of
    a microsecond: bench timed it as a 300-fold speedup (exit 0). The bench's own inputs
    run once on both sides first and are compared; a difference is exit 2, nothing timed."""
    from stagecheck.oracles import messages
    path = tmp_path / "lazy.py"
    path.write_text(DOES_NOTHING)
    lazy = f"{path}::stage_postprocess_inputs_to_gpu"
    with pytest.raises(StagecheckError) as info:
        run_bench(load_target("single-loop"), load_target(lazy), **QUICK)
    text = str(info.value)
    problem = messages.BENCH_NOT_EQUIVALENT[0]
    assert problem.split("{")[0] in text and "num_reqs=1" in text and "same_copies" in text
    assert f"run 'stagecheck diff single-loop {lazy}'" in text
