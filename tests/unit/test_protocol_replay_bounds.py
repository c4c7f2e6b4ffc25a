"""Protocol replay files are untrusted input: every value an edit may change is checked
against what a protocol run saves (the step generator's bounds, the options' ranges), and
refused naming the file, the key and the value (exit 2), never run."""

import copy
import json

import pytest

from stagecheck.oracles.errors import ScenarioError
from stagecheck.oracles.report.protocol_replay import load_protocol_replay

JOIN = {"id": "req-1", "prefix": 0, "prompt": 2, "temperature": 0.0}
STEP = {"accepted": {}, "chunk": {}, "completion": [], "drafts": {}, "dummy_tokens": 0,
        "finished": [], "joins": [JOIN], "kind": "step", "preempted": [], "resumed": []}
SAVED = {"stagecheck_protocol_replay": 1, "replay_id": "x-1", "protocol": "token-stager",
         "baseline": None, "candidate": "stager.py::TokenStager", "device": "cpu",
         "shims": [], "run": {"timeout": 0.3, "busy_cycles": 0},
         "finding": {"id": "x", "severity": "error", "message": "m",
                     "scenario": {"capacity": 2, "data": {}, "params": {},
                                  "protocol": "token-stager",
                                  "steps": [STEP, {**STEP, "joins": [{**JOIN, "id": "req-3"}]}]}}}


def _write(tmp_path, edit=None):
    saved = copy.deepcopy(SAVED)
    if edit:
        edit(saved)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(saved))
    return str(path)


def _scenario(**change):
    return lambda saved: saved["finding"]["scenario"].update(change)


def _step(k, **change):
    return lambda saved: saved["finding"]["scenario"]["steps"][k].update(change)


def test_a_saved_protocol_replay_loads_with_its_run_options(tmp_path):
    saved, seq = load_protocol_replay(_write(tmp_path))
    assert seq.capacity == 2 and saved["run"] == {"timeout": 0.3, "busy_cycles": 0}


@pytest.mark.parametrize("edit, said", [
    (_scenario(capacity=0), "capacity = 0 is not a whole number in [1, 1024]"),
    (_scenario(capacity=-1), "capacity = -1"),
    (_scenario(capacity=10**9), "capacity = 1000000000"),
    (_scenario(capacity="2"), "capacity = '2'"),
    (_scenario(capacity=None), "capacity = None"),
    (_scenario(steps=[]), "the number of steps = 0"),
    (_step(0, joins=[{**JOIN, "prompt": -5}]), "steps[0].joins[0].prompt = -5"),
    (_step(0, joins=[{**JOIN, "id": 5}]), "steps[0].joins[0].id = 5 is not a request id"),
    (_step(1, joins=[JOIN]), "steps[1].joins[0].id = 'req-1' joined before"),
    (_step(1, drafts={"req-1": 10**6}), "steps[1].drafts['req-1'] = 1000000"),
    (_step(0, chunk={"req-1": -4}), "steps[0].chunk['req-1'] = -4"),
    (_step(0, kind="weird"), "steps[0].kind = 'weird'"),
    (_step(0, completion=["bogus"]), "steps[0].completion[0] = 'bogus'"),
    (_step(0, joins=[{**JOIN, "temperature": "hot"}]), "temperature = 'hot'"),
    (lambda s: s.pop("protocol"), "its field 'protocol' is missing"),
    (lambda s: s.pop("candidate"), "its field 'candidate' is missing"),
    (lambda s: s.update(shims=5), "its field 'shims' is a int"),
    (lambda s: s.update(device="tpu"), "its field 'device' is 'tpu'"),
    (lambda s: s.update(run={"timeout": -1}), "its field 'run.timeout' is -1"),
    (lambda s: s.update(run={"timeout": 10**400}), "its field 'run.timeout'"),
    (lambda s: s.update(run={"timeout": "1"}), "run' holds timeout = '1'"),
])
def test_an_edited_protocol_replay_file_is_refused_naming_the_key(tmp_path, edit, said):
    path = _write(tmp_path, edit)
    with pytest.raises(ScenarioError) as info:
        load_protocol_replay(path)
    text = str(info.value)
    assert said in text and repr(path) in text
    assert "fix that key" in text


def test_the_shrinker_keeps_one_step_at_least():
    from stagecheck.oracles.protocol.shrink import _steps
    from stagecheck.spec.steps import StepSequence
    seq = StepSequence.from_dict(SAVED["finding"]["scenario"])
    assert all(len(s.steps) >= 1 for s in _steps(seq))
    one = StepSequence.from_dict({**SAVED["finding"]["scenario"], "steps": [STEP]})
    assert list(_steps(one)) == []


def test_a_shrunk_prompt_below_its_prefix_still_loads():
    # the shrinker shortens a prompt and leaves its prefix: unfold reads it as prompt - 1
    from stagecheck.spec.steps import StepSequence, unfold
    data = copy.deepcopy(SAVED["finding"]["scenario"])
    data["steps"][0]["joins"] = [{**JOIN, "prompt": 1, "prefix": 2}]
    (view, _) = unfold(StepSequence.from_dict(data))
    assert view.joins[0]["computed"] == 0


@pytest.mark.parametrize("version, said", [
    (2, 'its "stagecheck_protocol_replay" is 2, and this one reads formats 1 to 1'),
    ("1", 'holds "stagecheck_protocol_replay": "1", which is not a format number'),
    (True, 'holds "stagecheck_protocol_replay": true, which is not a format number'),
])
def test_a_protocol_replay_file_of_a_format_this_stagecheck_does_not_read_is_refused(
        tmp_path, version, said):
    path = _write(tmp_path, lambda saved: saved.update(stagecheck_protocol_replay=version))
    with pytest.raises(ScenarioError) as info:
        load_protocol_replay(path)
    assert said in str(info.value) and repr(path) in str(info.value)
