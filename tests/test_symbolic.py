"""Symbolic differential check (oracles/symbolic.py): CrossHair over list-model buffers.

Budgets are small (CrossHair time in this module: well under two minutes on two
cores); ``STAGECHECK_SYMBOLIC_TIMEOUT`` scales them.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from oracles.differential import evaluate
from oracles.instrumented import InstrumentedBuffer
from oracles.run import observe
from oracles.symbolic import (ListBuffer, ModelUnsupported, SymbolicInconclusive, observe_model,
                              run_symbolic)
from oracles.targets import load_target
from spec import ERROR, INFO, StagingScenario, check

ROOT = Path(__file__).resolve().parents[1]
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
# The list model behaves like the instrumented torch buffer
# --------------------------------------------------------------------------------------

def _both(dtype: str, cpu: list, gpu: list):
    import torch
    ev_model, ev_real = [], []
    model = ListBuffer("b", dtype, cpu, gpu, ev_model)
    real = InstrumentedBuffer("b", cpu, gpu, {"int32": torch.int32, "bool": torch.bool}[dtype],
                              "cpu", ev_real)
    return model, real, ev_model, ev_real


def _outcome(fn):
    try:
        fn()
        return None
    except Exception as exc:  # noqa: BLE001 - the exception type is the observation
        return type(exc).__name__


OPERATIONS = [
    ("np int write", lambda b: b.np.__setitem__(1, 7)),
    ("np negative index", lambda b: b.np.__setitem__(-1, 5)),
    ("np slice of list", lambda b: b.np.__setitem__(slice(0, 2), [3, 4])),
    ("np slice broadcast", lambda b: b.np.__setitem__(slice(1, 3), 9)),
    ("np view write-through", lambda b: b.np[1:3].__setitem__(0, 11)),
    ("np bool value", lambda b: b.np.__setitem__(0, True)),
    ("np float truncates", lambda b: b.np.__setitem__(0, 3.7)),
    ("np beyond int32", lambda b: b.np.__setitem__(0, 2**31)),
    ("np index out of range", lambda b: b.np.__setitem__(5, 1)),
    ("np slice length mismatch", lambda b: b.np.__setitem__(slice(0, 2), [1, 2, 3])),
    ("cpu int write", lambda b: b.cpu.__setitem__(2, -4)),
    ("cpu beyond int32", lambda b: b.cpu.__setitem__(0, -(2**31) - 1)),
    ("cpu slice broadcast", lambda b: b.cpu.__setitem__(slice(0, 2), 6)),
    ("cpu slice of list", lambda b: b.cpu.__setitem__(slice(0, 2), [1, 2])),
    ("copy n", lambda b: b.copy_to_gpu(2)),
    ("copy all", lambda b: b.copy_to_gpu()),
    ("copy n beyond size", lambda b: b.copy_to_gpu(9)),
    ("copy 0", lambda b: b.copy_to_gpu(0)),
]


@pytest.mark.parametrize("name,op", OPERATIONS, ids=[n for n, _ in OPERATIONS])
def test_list_model_matches_the_instrumented_buffer(name, op):
    model, real, ev_model, ev_real = _both("int32", [1, 2, 3], [-1, -2, -3])
    assert _outcome(lambda: op(model)) == _outcome(lambda: op(real))
    real.sweep_untracked()
    assert model.final_cpu() == real.final_cpu()
    assert model.final_gpu() == real.final_gpu()
    assert ev_model == ev_real


def test_list_model_bool_buffer_stores_truth_values():
    model, real, ev_model, ev_real = _both("bool", [False, False], [True, True])
    for b in (model, real):
        b.np[0] = 5
        b.np[1] = 0
        b.copy_to_gpu(1)
    assert model.final_cpu() == real.final_cpu() == [True, False]
    assert model.final_gpu() == real.final_gpu() == [True, True]
    assert ev_model == ev_real


def test_list_model_refuses_surface_it_does_not_offer():
    model, _, _, _ = _both("int32", [0, 0], [0, 0])
    with pytest.raises(ModelUnsupported):
        model.cpu.copy_([1, 2])
    with pytest.raises(ModelUnsupported):
        model.gpu[0] = 1


def test_model_observation_equals_the_torch_observation_on_the_builtins():
    s = StagingScenario(
        capacity=3, num_reqs=2, req_ids=["a", "b", "c"],
        num_scheduled_tokens={"a": 4, "b": 1, "c": 9}, spec_decode_tokens={"b": [5, 6]},
        num_computed_tokens={"a": 10, "b": 20, "c": 30},
        num_prompt_tokens={"a": 12, "b": 1, "c": 30},
        mamba_state_idx={"a": 3, "b": 4},
        initial_cpu={}, initial_gpu={})
    for name in ("legacy", "single-loop", "prefix-migration"):
        target = load_target(name)
        model = observe_model(target, s)
        real, _ = observe(target, s)
        assert (model.exception_type, model.cpu, model.gpu, model.events, model.inputs_after,
                model.req_ids_reads) == (real.exception_type, real.cpu, real.gpu, real.events,
                                         real.inputs_after, real.req_ids_reads), name


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
        again, _, _ = evaluate(load_target("legacy"), load_target("single-loop"), s,
                               kernel="off")
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
            obs, _ = observe(_target(path), s)
            assert f.key in {g.key for g in check(s, obs, _target(path).profile)}
        again, _, _ = evaluate(load_target("single-loop"), _target(path), s, kernel="off")
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
        "slot_alignment", "same_buffers", "missing_index_assertion", "same_outcome"}


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
                           timeout=3 * SCALE, max_capacity=3, strict=False)
    assert relaxed.paths_unsupported > 0


def test_no_time_at_all_is_inconclusive():
    with pytest.raises(SymbolicInconclusive, match="explored no path"):
        run_symbolic(load_target("legacy"), load_target("single-loop"), timeout=1e-9)
