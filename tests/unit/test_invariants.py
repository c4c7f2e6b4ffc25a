"""Each invariant check holds on a correct run and fires on the violation it states."""

import dataclasses

import pytest

from stagecheck.oracles.observe import observe
from stagecheck.oracles.targets import load_target
from stagecheck.spec import DEFAULT_SCHEMA, ERROR, INFO, INVARIANTS, Copy, HostWrite, check
from stagecheck.spec.invariants import names_request
from stagecheck.spec.observation import Observation
from tests.helpers import scenario

PROFILE = DEFAULT_SCHEMA.profile()


@pytest.fixture
def good():
    s = scenario()
    o = observe(load_target("single-loop"), s)
    assert check(s, o, PROFILE) == []
    return s, o


def ids(findings):
    return {f.invariant for f in findings}


def test_every_invariant_is_stated_once_and_in_the_generated_spec_page():
    assert [i.id for i in INVARIANTS] == [
        "slot_alignment", "tail_policy", "mirror_consistency", "copy_discipline",
        "missing_input", "expected_outcome", "inputs_unchanged", "no_copy_hazard",
        "padded_read", "no_process_left", "process_unchanged"]
    from stagecheck.spec.__main__ import render
    page = render()
    statements = [inv.statement for inv in INVARIANTS]
    assert len(set(statements)) == len(statements)          # no statement said twice
    for inv in INVARIANTS:
        assert f"**`{inv.id}`**" in page and inv.statement in page


def test_slot_alignment(good):
    s, o = good
    o.cpu["num_computed_tokens_buf"][1] = 8
    o.gpu["num_computed_tokens_buf"][1] = 8
    (f,) = check(s, o, PROFILE)
    assert (f.invariant, f.field, f.slot, f.severity) == ("slot_alignment", "computed", 1, ERROR)
    assert f.expected == 7 and f.candidate == 8


def test_tail_policy_on_cpu_and_gpu(good):
    s, o = good
    o.cpu["num_draft_tokens_buf"][4] = 0
    o.gpu["mamba_state_idx_buf"][5] = 0
    found = {(f.invariant, f.view, f.slot) for f in check(s, o, PROFILE)}
    assert found == {("tail_policy", "cpu", 4), ("tail_policy", "gpu", 5)}


def test_mirror_consistency(good):
    s, o = good
    o.gpu["num_scheduled_tokens_buf"][2] = 0
    assert ids(check(s, o, PROFILE)) == {"mirror_consistency"}


def test_copy_discipline_range_count_and_order(good):
    s, o = good
    events = [e for e in o.events if not (isinstance(e, Copy) and e.buffer ==
                                         "num_draft_tokens_buf")]
    o2 = dataclasses.replace(o, events=events + [Copy("num_draft_tokens_buf", 0, 6, None)])
    assert ids(check(s, o2, PROFILE)) == {"copy_discipline"}
    o3 = dataclasses.replace(o, events=o.events + [HostWrite("num_draft_tokens_buf", (0,), "np")])
    (f,) = check(s, o3, PROFILE)
    assert f.invariant == "copy_discipline" and f.extra["kind"] == "write-after-copy"
    assert "written through .np at slots [0]" in f.message
    o5 = dataclasses.replace(o, events=o.events + [HostWrite("num_draft_tokens_buf", (1,),
                                                              "untracked")])
    (f,) = check(s, o5, PROFILE)      # a write no recording view saw, in plain words
    assert "written through a view of its host memory that is not .np or .cpu at slots [1]" \
        in f.message
    o4 = dataclasses.replace(o, events=o.events + [Copy("num_draft_tokens_buf", 0, 3, 3)])
    assert ids(check(s, o4, PROFILE)) == {"copy_discipline"}


def test_missing_input_type_message_and_copy():
    s = scenario(mamba_state_idx={"req-a": 3, "req-c": 9})
    o = observe(load_target("legacy"), s)
    assert check(s, o, PROFILE) == []
    wrong_type = dataclasses.replace(o, exception_type="KeyError", exception_mro=("KeyError",))
    assert ids(check(s, wrong_type, PROFILE)) == {"missing_input"}
    no_id = dataclasses.replace(o, exception_message="state index missing for req-bb")
    assert ids(check(s, no_id, PROFILE)) == {"missing_input"}
    copied = dataclasses.replace(o, events=o.events + [Copy("mamba_state_idx_buf", 0, 3, 3)])
    assert ids(check(s, copied, PROFILE)) == {"missing_input"}
    returned = dataclasses.replace(o, exception_type=None, exception_message=None)
    assert "missing_input" in ids(check(s, returned, PROFILE))


def test_missing_input_message_may_name_any_live_request_that_lacks_the_input():
    # an audit: with req-a and req-c both lacking a state index, a refactor that checks
    # the batch in another order named req-c and was an error ('does not name req-a')
    s = scenario(mamba_state_idx={"req-b": 0, "req-p": 6})
    o = observe(load_target("single-loop"), s)
    assert "'req-a'" in o.exception_message and check(s, o, PROFILE) == []
    for named, ok in (("req-c", True), ("req-b", False), ("req-p", False)):
        other = dataclasses.replace(o, exception_message=o.exception_message.replace(
            "'req-a'", repr(named)))
        assert (ids(check(s, other, PROFILE)) == set()) is ok, named


def test_expected_outcome_and_hang(good):
    s, o = good
    raised = dataclasses.replace(o, exception_type="KeyError", exception_message="'req-b'")
    assert ids(check(s, raised, PROFILE)) == {"expected_outcome"}
    hung = dataclasses.replace(o, timed_out=True, exception_type="CallTimedOut")
    (f,) = check(s, hung, PROFILE)
    assert f.extra["kind"] == "hang"


def test_inputs_unchanged(good):
    s, o = good
    after = dict(o.inputs_after, req_ids=o.inputs_after["req_ids"][:3])
    (f,) = check(s, dataclasses.replace(o, inputs_after=after), PROFILE)
    assert (f.invariant, f.field) == ("inputs_unchanged", "req_ids")


def test_padded_read_is_info(good):
    s, o = good
    (f,) = check(s, dataclasses.replace(o, req_ids_reads=o.req_ids_reads + [3]), PROFILE)
    assert (f.invariant, f.severity, f.slot) == ("padded_read", INFO, 3)


def test_out_of_contract_violations_are_info(good):
    s, o = good
    s.num_computed_tokens["req-a"] = 2**40          # a value beyond int32: out of contract
    o.cpu["num_draft_tokens_buf"][4] = 0
    found = check(s, o, PROFILE)
    assert "tail_policy" in {f.invariant for f in found}
    assert all(f.severity == INFO and not f.in_contract for f in found)


def test_request_ids_are_matched_as_whole_tokens():
    assert names_request("mamba state index for request 'req-1' is missing", "req-1")
    assert not names_request("mamba state index for request 'req-12' is missing", "req-1")
    assert not names_request("must run before the stage", "b")


def test_a_per_slot_input_past_its_list_is_no_value_not_a_crash():
    """A batch larger than its buffers (out of contract, ``num_reqs_is_len``) reaches
    slots a per-slot input has no value for: the expected value there is MISSING."""
    from stagecheck.spec.invariants import expected_value
    from stagecheck.spec.scenario import MISSING, StagingScenario
    from stagecheck.spec.schemas import BUILTIN_SCHEMAS
    schema = BUILTIN_SCHEMAS["specdec-backup-tokens"]
    field = schema.fields[0]
    s = StagingScenario(1, 2, ["req-a", "req-b"],
                        {"num_tokens_no_spec": [2], "num_prompt_tokens": {"req-a": 1, "req-b": 1},
                         "output_token_ids": {"req-a": [7], "req-b": [8]},
                         "prompt_token_ids": {"req-a": [5], "req-b": [6]}},
                        {field.buffer: [0]}, {field.buffer: [0]}, schema=schema.name)
    assert expected_value(s, field, 0, "req-a") == 7
    assert expected_value(s, field, 1, "req-b") is MISSING


def test_process_unchanged_reports_the_builtins_a_call_left_rebound(good):
    """An audit: a correct target that rebinds ``builtins.len`` passed without a word (the
    worker puts builtins back after each call); now an info finding naming them."""
    s, o = good
    assert [f.invariant for f in check(s, o, PROFILE)] == []
    (f,) = check(s, dataclasses.replace(o, changed=("builtins.len",)), PROFILE)
    assert (f.invariant, f.severity) == ("process_unchanged", INFO)
    assert f.message == "left builtins.len rebound when it returned; stagecheck put it back"


def test_what_a_call_changed_travels_the_wire_with_its_observation(good):
    _, o = good
    moved = dataclasses.replace(o, changed=("builtins.len", "builtins.sum"))
    assert Observation.from_wire(moved.to_wire()).changed == moved.changed
    assert Observation.from_wire(o.to_wire()).changed == ()
