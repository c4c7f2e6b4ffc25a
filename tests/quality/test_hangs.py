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


# ---------------------------------------------------------------------------------------
# What a hang costs (docs/reliability.md, "What a stopped call costs"): a candidate that
# hangs on any batch of 3 or more live requests, run end to end. Before, its in-contract
# stream ran on about 33 examples past the first hang (each a deadline), the
# out-of-contract stream spent a deadline on each example that hung, the example was run
# again about 8 times, and the shrinker stopped at 97 slots (no pytest test printed):
# `diff legacy hostile/sleeps_from_3_reqs.py::FUNC --timeout 0.3` took 296 s.

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUNCTION = "stage_postprocess_inputs_to_gpu"


@pytest.mark.parametrize("fixture", ["sleeps_from_3_reqs", "spins_from_3_reqs"])
def test_a_candidate_that_hangs_ends_its_run_in_seconds(tmp_path, fixture):
    target = f"{ROOT}/tests/targets/hostile/{fixture}.py::{FUNCTION}"
    report = tmp_path / "report.json"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "stagecheck", "diff", "legacy", target,
                           "--timeout", "0.3", "--no-save", "--quiet", "--json", str(report)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_COLOR": "1"})
    seconds = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    assert seconds < 60, f"{seconds:.1f} s:\n{done.stdout}"
    body = json.loads(report.read_text())
    errors = [f for f in body["findings"] if f["severity"] == "error"]
    assert {(f["invariant"], f["extra"].get("kind")) for f in errors} >= {
        ("expected_outcome", "hang")}, errors
    # the in-contract stream stopped at its first hang; the out-of-contract one at its
    # first hang too (the in-contract stream had found that kind), and says so
    assert body["examples"]["in_contract"] <= 16
    assert "out" in body["stream_notes"] and "hung" in body["stream_notes"]["out"]
    assert "note: the out-of-contract stream stopped" in done.stdout
    # a hung side's buffers are never compared: no in-contract info finding at all
    assert not [f for f in body["findings"] if f["severity"] == "info" and f["in_contract"]]
    # shrunk to the threshold (3 live requests), small enough to print as a test
    hang = next(f for f in errors if f["invariant"] == "expected_outcome")
    assert hang["scenario"]["num_reqs"] == 3 and hang["scenario"]["capacity"] <= 4, hang
    assert "def test_" in done.stdout and "shrinking took" in done.stdout
    assert 0 < body["shrink_seconds"] < 30


def test_a_batch_answer_ends_at_a_call_the_worker_stopped_and_observe_runs_the_rest(tmp_path):
    """The worker's own timer stops a call that spins: that batch's answer ends there
    (the rest would cost a deadline each), and ``WorkerPool.observe`` asks for the rest
    in a request of its own, so every example of the batch is answered."""
    from stagecheck.oracles.options import RunOptions
    from stagecheck.oracles.runner import runner_for, side_of
    from stagecheck.oracles.sample import sample_scenario
    from stagecheck.spec.schemas import BUILTIN_SCHEMAS

    schema = BUILTIN_SCHEMAS["mamba-postprocess"]
    target = load_target(f"{ROOT}/tests/targets/hostile/spins_from_3_reqs.py::{FUNCTION}")
    scenarios, index = [], 0
    while len(scenarios) < 4:                     # small, large, small, large
        s = sample_scenario(schema, 0, index, 16, 4)
        index += 1
        if (s.num_reqs >= 3) == (len(scenarios) % 2 == 1) and s.num_reqs == len(s.req_ids):
            scenarios.append(s)
    runner = runner_for([target])
    try:
        side = side_of(runner, target)
        options = RunOptions(timeout=0.2, kernel="off")
        answer = runner.observe([side], list(enumerate(scenarios)), options, "fast")
        assert [i for i, _ in answer] == [0, 1, 2, 3]
        assert [o.timed_out for _, (o,) in answer] == [False, True, False, True]
        # the stream's answer (stop at the first stopped call) is one batch cut short,
        # and the rest of the batch is asked again (an audit: a stream of one batch lost
        # the examples after its first stopped call, and a target that broke its worker
        # on its first out-of-contract call passed on 1 example of that stream)
        answers = runner.stream([side], [list(enumerate(scenarios))], options, "fast")
        assert [i for i, _ in next(answers)] == [0, 1]
        assert [i for i, _ in next(answers)] == [2, 3]
        assert next(answers, None) is None
    finally:
        runner.close()


def test_a_candidate_that_hangs_only_out_of_contract_is_an_error_shrunk_to_the_breach(tmp_path):
    """The baseline raises on a batch above capacity; a candidate that spins there instead
    is an error though the input should not happen (was: info, exit 0, the stream cut
    short after three hangs)."""
    path = tmp_path / "spins_above_capacity.py"
    path.write_text(textwrap.dedent('''
        def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs,
                                            requests, mamba_state_idx):
            bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                    ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
            while num_reqs > len(bufs[0].np):    # the bug: spins where IndexError was
                pass
            for i, r in enumerate(req_ids[:num_reqs]):
                assert r in mamba_state_idx, f"no state index for {r}"
                bufs[0].np[i] = mamba_state_idx[r]
                bufs[1].np[i] = scheduler_output.num_scheduled_tokens[r]
                bufs[2].np[i] = requests[r].num_computed_tokens
                bufs[3].np[i] = len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))
            for b in bufs:
                b.copy_to_gpu(num_reqs)
    '''))
    result = run_campaign(load_target("single-loop"),
                          load_target(f"{path}::stage_postprocess_inputs_to_gpu"),
                          CampaignConfig.from_options(examples=60, timeout=0.3))
    (hang,) = [f for f in result.errors if f.invariant == "same_outcome"]
    assert not hang.in_contract and "candidate hung" in hang.message, hang
    assert hang.extra["kind"] == "hang" and "out of contract" in hang.extra["context"]
    assert hang.scenario["num_reqs"] > hang.scenario["capacity"], hang.scenario
    assert hang.scenario["capacity"] <= 64, hang.scenario         # shrunk by size
    assert not [f for f in result.errors if f.in_contract]
