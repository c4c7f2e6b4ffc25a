"""Symbolic differential check (oracles/symbolic/): CrossHair over list-model buffers.

Budgets are small (CrossHair time in this module: well under two minutes on two
cores); ``STAGECHECK_SYMBOLIC_TIMEOUT`` scales them.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from stagecheck.oracles.evaluate import evaluate
from stagecheck.oracles.observe import observe
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.symbolic import SymbolicInconclusive, run_symbolic
from stagecheck.oracles.targets import load_target
from stagecheck.spec import ERROR, INFO, StagingScenario, check

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ROOT / "tests" / "targets"
SCALE = float(os.environ.get("STAGECHECK_SYMBOLIC_TIMEOUT", "1"))


def _expected(path: Path) -> set[str]:
    for line in path.read_text().splitlines()[:5]:
        if line.startswith("# stagecheck-expect:"):
            value = line.split(":", 1)[1].strip()
            return set() if value == "none" else {v.strip() for v in value.split(",")}
    raise AssertionError(f"{path} has no '# stagecheck-expect:' line")


def _target(path: Path):
    return load_target(f"{path}::stage_postprocess_inputs_to_gpu")


# --------------------------------------------------------------------------------------
# run_symbolic
# --------------------------------------------------------------------------------------

def test_legacy_vs_single_loop_no_in_contract_difference():
    result = run_symbolic(load_target("legacy"), load_target("single-loop"),
                          timeout=12 * SCALE, max_capacity=3)
    assert result.paths_explored > 0
    assert result.paths_unsupported == 0
    assert [f for f in result.findings if f.severity == ERROR] == []
    infos = [f for f in result.findings if f.severity == INFO]
    assert infos, "the failure-path differences should be reported as info"
    assert result.first_counterexample_seconds is None
    # every finding carries a concrete scenario that the torch runner reproduces
    for f in result.findings:
        s = StagingScenario.from_dict(f.scenario)
        again = evaluate(load_target("legacy"), load_target("single-loop"), s,
                         RunOptions(kernel="off")).findings
        assert f.key in {g.key for g in again}, f


FAST_BUGS = ["buggy_loop_one_slot_short.py", "buggy_copy_whole_buffer.py",
             "buggy_state_idx_keyerror.py", "buggy_pops_draft_tokens.py",
             "buggy_swapped_views.py", "buggy_tail_overrun_padded.py"]


@pytest.mark.parametrize("fixture", FAST_BUGS)
def test_symbolic_diff_finds_the_buggy_refactor(fixture):
    path = TARGETS / fixture
    if not path.exists():
        pytest.skip(f"{fixture} not present")
    expected = _expected(path)
    result = run_symbolic(load_target("single-loop"), _target(path), timeout=30 * SCALE,
                          max_capacity=3, stop_at_first_error=True)
    errors = [f for f in result.findings if f.severity == ERROR]
    assert errors, result.summary()
    assert {f.invariant for f in errors} & expected, (fixture, [f.invariant for f in errors])
    assert result.first_counterexample_seconds is not None
    # the counterexample reproduces on the concrete (torch) runner: observe + spec.check
    for f in errors:
        s = StagingScenario.from_dict(f.scenario)
        if f.side == "candidate":
            obs = observe(_target(path), s)
            assert f.key in {g.key for g in check(s, obs, _target(path).profile)}
        again = evaluate(load_target("single-loop"), _target(path), s,
                         RunOptions(kernel="off")).findings
        assert f.key in {g.key for g in again}


def test_inline_bug_is_found(tmp_path):
    """An inline buggy refactor (no fixture file needed): the last live slot is skipped."""
    source = textwrap.dedent('''
        def stage(ctx, scheduler_output, req_ids, num_reqs, requests, mamba_state_idx):
            spec_tokens = scheduler_output.scheduled_spec_decode_tokens
            for i, req_id in enumerate(req_ids[:max(num_reqs - 1, 0)]):
                assert req_id in mamba_state_idx, f"missing state index of {req_id!r}"
                ctx.mamba_state_idx_buf.np[i] = mamba_state_idx[req_id]
                ctx.num_scheduled_tokens_buf.np[i] = scheduler_output.num_scheduled_tokens[req_id]
                ctx.num_computed_tokens_buf.np[i] = requests[req_id].num_computed_tokens
                ctx.num_draft_tokens_buf.np[i] = len(spec_tokens.get(req_id, ()))
            for buf in (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                        ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf):
                buf.copy_to_gpu(num_reqs)
    ''')
    (tmp_path / "short.py").write_text(source)
    result = run_symbolic(load_target("single-loop"), load_target(f"{tmp_path}/short.py::stage"),
                          timeout=30 * SCALE, max_capacity=2, stop_at_first_error=True)
    assert {f.invariant for f in result.findings if f.severity == ERROR} & {
        "slot_alignment", "same_buffers", "missing_input", "same_outcome"}


UNSUPPORTED = textwrap.dedent('''
    import numpy as np

    def every_path(ctx, scheduler_output, req_ids, num_reqs, requests, mamba_state_idx):
        # np.copyto needs a real ndarray: the list model cannot take it, on any path
        np.copyto(ctx.num_draft_tokens_buf.np, 0)
        for buf in (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                    ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf):
            buf.copy_to_gpu(num_reqs)

    def some_paths(ctx, scheduler_output, req_ids, num_reqs, requests, mamba_state_idx):
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens
        for i, req_id in enumerate(req_ids[:num_reqs]):
            assert req_id in mamba_state_idx, f"missing state index of {req_id!r}"
            ctx.mamba_state_idx_buf.np[i] = mamba_state_idx[req_id]
            ctx.num_scheduled_tokens_buf.np[i] = scheduler_output.num_scheduled_tokens[req_id]
            ctx.num_computed_tokens_buf.np[i] = requests[req_id].num_computed_tokens
            ctx.num_draft_tokens_buf.np[i] = len(spec_tokens.get(req_id, ()))
        if num_reqs >= 2:   # a torch in-place op: outside the list model
            ctx.num_draft_tokens_buf.cpu[:num_reqs].clamp_(min=0)
        for buf in (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                    ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf):
            buf.copy_to_gpu(num_reqs)
''')


def test_zero_explored_paths_is_inconclusive(tmp_path):
    (tmp_path / "unsupported.py").write_text(UNSUPPORTED)
    with pytest.raises(SymbolicInconclusive) as info:
        run_symbolic(load_target("single-loop"),
                     load_target(f"{tmp_path}/unsupported.py::every_path"),
                     timeout=4 * SCALE, max_capacity=2)
    result = info.value.result
    assert result.paths_explored == 0
    assert result.paths_unsupported > 0
    assert "explored no path" in str(info.value)
    assert "stagecheck diff" in str(info.value)


def test_paths_lost_to_unsupported_operations_are_inconclusive(tmp_path):
    (tmp_path / "unsupported.py").write_text(UNSUPPORTED)
    with pytest.raises(SymbolicInconclusive) as info:
        run_symbolic(load_target("single-loop"),
                     load_target(f"{tmp_path}/unsupported.py::some_paths"),
                     timeout=6 * SCALE, max_capacity=3)
    result = info.value.result
    assert result.paths_explored > 0 and result.paths_unsupported > 0
    assert "clamp_" in str(info.value)
    # without strict, the same run returns its counts instead of raising
    relaxed = run_symbolic(load_target("single-loop"),
                           load_target(f"{tmp_path}/unsupported.py::some_paths"),
                           timeout=6 * SCALE, max_capacity=3, strict=False)
    assert relaxed.paths_unsupported > 0


def test_no_time_at_all_is_inconclusive():
    with pytest.raises(SymbolicInconclusive, match="explored no path"):
        run_symbolic(load_target("legacy"), load_target("single-loop"), timeout=1e-9)


def test_a_counterexample_is_shrunk_to_the_threshold_with_its_kernel_impact():
    """The solver picks any input that takes the fast path (up to 16 requests, values up
    to its bounds): each error is shrunk as the fuzzer's are, to the threshold, and
    the difference is seen to reach the kernel (as ``diff`` says of it)."""
    path = TARGETS / "buggy_fast_path_12_forgets_drafts.py"
    result = run_symbolic(load_target("single-loop"), _target(path), timeout=30 * SCALE,
                          max_capacity=16, stop_at_first_error=True)
    errors = [f for f in result.findings if f.severity == ERROR]
    assert errors, result.summary()
    for f in errors:
        assert (f.scenario["num_reqs"], f.scenario["capacity"]) == (12, 12), f.scenario
        assert f.kernel_impact is True, f
        again = evaluate(load_target("single-loop"), _target(path),
                         StagingScenario.from_dict(f.scenario), RunOptions(kernel="off"))
        assert f.key in {g.key for g in again.findings}
