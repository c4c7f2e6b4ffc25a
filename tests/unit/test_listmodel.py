"""The list-model backend of observe behaves like the instrumented torch buffer."""

from __future__ import annotations

import pytest

from stagecheck.oracles.observe import observe
from stagecheck.oracles.observe.instrumented import InstrumentedBuffer
from stagecheck.oracles.observe.listmodel import ListBackend, ListBuffer, ModelUnsupported
from stagecheck.oracles.targets import load_target
from tests.helpers import scenario


def _both(dtype: str, cpu: list, gpu: list):
    ev_model, ev_real = [], []
    model = ListBuffer("b", dtype, cpu, gpu, ev_model)
    real = InstrumentedBuffer("b", cpu, gpu, dtype,
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
    s = scenario(capacity=3, num_reqs=2, req_ids=["a", "b", "c"],
                 num_scheduled_tokens={"a": 4, "b": 1, "c": 9}, spec_decode_tokens={"b": [5, 6]},
                 num_computed_tokens={"a": 10, "b": 20, "c": 30},
                 num_prompt_tokens={"a": 12, "b": 1, "c": 30},
                 mamba_state_idx={"a": 3, "b": 4}, initial_cpu={}, initial_gpu={})
    for name in ("legacy", "single-loop", "prefix-migration"):
        target = load_target(name)
        model = observe(target, s, backend=ListBackend(), time_limited=False)
        real = observe(target, s)
        assert (model.exception_type, model.cpu, model.gpu, model.events, model.inputs_after,
                model.req_ids_reads) == (real.exception_type, real.cpu, real.gpu, real.events,
                                         real.inputs_after, real.req_ids_reads), name
