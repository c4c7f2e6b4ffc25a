"""The cheaper paths of a protocol run give what the plain ones gave (issue 22's speed).

Step generation keeps the scheduler model between steps (``spec.steps.Unfolding``) instead
of replaying the sequence at each step; device work stops noting its reads once every 1-D
argument was read whole; a worker's time limit is a reused object. Each is checked here
against what it replaced.
"""

import dataclasses
import json
import subprocess
import sys

import pytest
import torch

from stagecheck.oracles.device import device_model
from stagecheck.oracles.protocol import load_protocol
from stagecheck.oracles.protocol.generate import sample_sequence
from stagecheck.spec.protocols import BUILTIN_PROTOCOLS
from stagecheck.spec.steps import Step, StepSequence, Unfolding, unfold


def _prefilling_by_replay(views) -> set:
    """Requests of the last batch not done with their prompt, counted from the views."""
    done, prompt, last = {}, {}, []
    for view in views:
        if view.kind != "step":
            continue
        last = view.batch
        for item in view.joins + view.resumed:
            prompt[item["id"]], done[item["id"]] = item["prompt"], item["computed"]
        for r, tokens in view.scheduled.items():
            done[r] = done.get(r, 0) + tokens
        for r in view.preempted:
            done[r] = 0
    return {r for r in last if done.get(r, 0) < prompt.get(r, 0)}


def _preempted_by_replay(views) -> list:
    out: list = []
    for view in views:
        if view.kind == "step":
            back = {item["id"] for item in view.resumed}
            out = [r for r in out if r not in back] + list(view.preempted)
    return out


@pytest.mark.parametrize("name", sorted(BUILTIN_PROTOCOLS))
def test_unfolding_step_by_step_is_the_replay_of_the_whole_sequence(name):
    protocol = load_protocol(name)
    for index in range(40):
        seq = sample_sequence(protocol, 3, index)
        unfolding = Unfolding(seq.capacity)
        for k, step in enumerate(seq.steps):
            view = unfolding.add(step)
            replayed = unfold(StepSequence(seq.protocol, seq.capacity, seq.steps[:k + 1]))
            assert view == replayed[-1] and unfolding.views == replayed
            assert unfolding.prefilling() == _prefilling_by_replay(replayed)
            assert unfolding.preempted == _preempted_by_replay(replayed)


def test_unfolding_holds_preempted_requests_until_they_resume():
    steps = [Step(joins=[{"id": "a", "prompt": 3}, {"id": "b", "prompt": 1}], chunk={"a": 1}),
             Step(preempted=["a"]), Step(kind="dummy", dummy_tokens=2),
             Step(resumed=["a"], chunk={"a": 2})]
    unfolding = Unfolding(2)
    unfolding.add(steps[0])
    assert unfolding.prefilling() == {"a"}          # "b" prefilled its one token
    unfolding.add(steps[1])
    assert unfolding.preempted == ["a"] and unfolding.running == ["b"]
    unfolding.add(steps[2])                          # a dummy step changes nothing
    assert unfolding.preempted == ["a"] and unfolding.running == ["b"]
    view = unfolding.add(steps[3])
    assert unfolding.preempted == [] and view.resumed[0]["computed"] == 0
    assert unfolding.prefilling() == {"a"}          # 2 of its 3 prompt tokens again


@pytest.mark.parametrize("name", sorted(BUILTIN_PROTOCOLS))
def test_a_sequence_as_data_is_what_dataclasses_make_of_it(name):
    protocol = load_protocol(name)
    for index in range(20):
        seq = sample_sequence(protocol, 0, index)
        data = seq.to_dict()
        whole = json.loads(json.dumps(dataclasses.asdict(seq)))
        if whole["order"] == "issue":     # the default is left out (older files read the same)
            del whole["order"]
        assert data == whole
        data["steps"][0]["completion"].append("changed")     # a copy, not the sequence's
        assert seq.steps[0].completion != data["steps"][0]["completion"]
        assert StepSequence.from_dict(seq.to_dict()) == seq


def _work_read(work, values=(1, 2, 3, 4)):
    model = device_model("cpu")
    with model.activate():
        host = torch.tensor(list(values), dtype=torch.int32).pin_memory()
        dev = torch.zeros(len(values), dtype=torch.int32, device="cuda")
        dev.copy_(host, non_blocking=True)
        model.launch("kernel", lambda: work(dev), {"dev": dev})
        torch.cuda.synchronize()
        model.finish()
    return model.reads_log[0][2]["dev"]


def test_device_work_reads_are_noted_until_every_element_was_read():
    assert _work_read(lambda d: (d[:2] * 2, d[3:] + 1)) == [1, 2, None, 4]
    assert _work_read(lambda d: (d * 2, d[:1] + 1)) == [1, 2, 3, 4]
    assert _work_read(lambda d: (d[:2].sum(), d[2:].sum(), d[:1] + 1)) == [1, 2, 3, 4]
    assert _work_read(lambda d: d[::2] + 0) == [1, None, 3, None]
    assert _work_read(lambda d: d[:0] + 0) == [None, None, None, None]


def test_a_workers_time_limit_interrupts_the_block_and_clears_its_timers():
    code = (
        "import signal, time\n"
        "from stagecheck.oracles.observe.call import CallTimedOut, keep_alarm_handler, "
        "time_limit\n"
        "keep_alarm_handler()\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        with time_limit(0.2):\n"
        "            while True:\n"
        "                pass\n"
        "    except CallTimedOut:\n"
        "        print('interrupted')\n"
        "    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)\n"
        "    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)\n"
        "with time_limit(5):\n"
        "    time.sleep(0.01)\n"
        "assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)\n"
        "print('done')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["interrupted", "interrupted", "done"]


def test_the_stream_order_is_drawn_apart_saved_only_where_newest_and_shrunk_first():
    from stagecheck.oracles.protocol.shrink import _completions
    protocol = load_protocol("input-prep-event")
    drawn = [sample_sequence(protocol, 0, index) for index in range(40)]
    orders = {seq.order for seq in drawn}
    assert orders == {"issue", "newest"}           # both, about half each
    newest = next(seq for seq in drawn if seq.order == "newest")
    assert newest.to_dict()["order"] == "newest"
    assert "order" not in next(s for s in drawn if s.order == "issue").to_dict()
    assert StepSequence.from_dict(newest.to_dict()) == newest
    first = next(_completions(newest))             # the shrinker's first try: issue order
    assert first.order == "issue" and first.steps == newest.steps
    with pytest.raises(ValueError, match="order 'sideways' is not one of issue, newest"):
        StepSequence.from_dict({**newest.to_dict(), "order": "sideways"})
