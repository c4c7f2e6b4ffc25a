"""What the worker reuses between the two sides of an example (issue 20's benchmark) leaves
each call its own inputs, and the instrumented buffer's short path for a write of one
slot logs what its general path logs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from stagecheck.oracles.observe import make_backend
from stagecheck.oracles.observe.build import build_inputs
from stagecheck.oracles.observe.instrumented import InstrumentedBuffer
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.sample import RandomDraw
from stagecheck.oracles.targets import load_target
from stagecheck.spec import HostWrite
from stagecheck.spec.space import draw_scenario

TARGET = load_target("single-loop")


def _large(seed: int = 0, capacity: int = 64):
    """A full batch (above the builder's small-table path), contents drawn at random."""
    return draw_scenario(TARGET.schema, RandomDraw(random.Random(seed)),
                         batch=(capacity, capacity))


@pytest.mark.parametrize("kind", ["fast", "instrumented"])
def test_second_call_on_a_scenario_gets_fresh_inputs_after_the_first_changed_its_own(kind):
    s = _large()
    backend = make_backend(kind, RunOptions())
    first, call = build_inputs(s, TARGET.profile, backend)
    requests = call.args[4]
    buffers = {name: b.np.copy() for name, b in first.buffers.items()}
    # the first call scribbles over everything it was given
    for b in first.buffers.values():
        b.np[:] = 7
        (b.mirror if kind == "fast" else b._mirror)[:] = 7
    some = next(iter(requests))
    requests[some].num_computed_tokens = -5
    del requests[next(iter(list(requests)[1:]))]
    second, again = build_inputs(s, TARGET.profile, backend)
    for name, b in second.buffers.items():
        assert b.np is not first.buffers[name].np
        assert b.np.tolist() == buffers[name].tolist() == s.initial_cpu[name]
        mirror = b.mirror if kind == "fast" else b._mirror
        assert mirror.tolist() == s.initial_gpu[name]
    fresh = again.args[4]
    assert fresh is not requests and list(fresh) == list(s.inputs["num_computed_tokens"])
    assert all(fresh[r] is not requests.get(r) for r in fresh)
    assert fresh[some].num_computed_tokens == s.inputs["num_computed_tokens"][some]
    # and the second call's read-back sees its own objects as made
    assert second.inputs_after()["num_computed_tokens"] == s.inputs["num_computed_tokens"]
    assert first.inputs_after()["num_computed_tokens"] != s.inputs["num_computed_tokens"]


def test_objects_a_call_changed_in_place_are_read_back_as_changed():
    s = _large(seed=3)
    backend = make_backend("fast", RunOptions())
    inputs, call = build_inputs(s, TARGET.profile, backend)
    r = next(iter(call.args[4]))
    call.args[4][r].num_prompt_tokens += 1
    after = inputs.inputs_after()["num_prompt_tokens"]
    assert after[r] == s.inputs["num_prompt_tokens"][r] + 1
    # the scenario itself is untouched, and a later call starts from it
    again, call2 = build_inputs(s, TARGET.profile, backend)
    assert call2.args[4][r].num_prompt_tokens == s.inputs["num_prompt_tokens"][r]
    assert again.inputs_after()["num_prompt_tokens"] == s.inputs["num_prompt_tokens"]


def _buffer():
    events: list = []
    return InstrumentedBuffer("b", [1, 2, 3, 4], [9, 9, 9, 9], "int32", "cpu", events), events


def test_one_slot_writes_log_as_the_general_path_does():
    buf, events = _buffer()
    buf.np[1] = 5
    buf.np[-1] = 6          # a negative index: the slot it names
    buf.np[np.int64(2)] = 8  # a numpy index goes the general way: the same event
    assert events == [HostWrite("b", (1,), "np"), HostWrite("b", (3,), "np"),
                          HostWrite("b", (2,), "np")]
    assert buf.final_cpu()[:4] == [1, 5, 8, 6]


def test_an_untracked_write_after_a_tracked_one_is_still_seen():
    buf, events = _buffer()
    buf.np[0] = 5
    np.copyto(buf._raw[0:1], 11)       # bypasses the recording view
    buf.copy_to_gpu()
    assert [e for e in events if isinstance(e, HostWrite)] == [
        HostWrite("b", (0,), "np"), HostWrite("b", (0,), "untracked")]
    assert buf.final_gpu()[0] == 11


def test_a_write_out_of_range_raises_and_logs_nothing():
    buf, events = _buffer()
    with pytest.raises(IndexError):
        buf.np[4] = 1
    with pytest.raises(IndexError):
        buf.np[-5] = 1
    assert events == []
