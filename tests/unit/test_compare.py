"""The compare stage's rules, as a table: which difference on which input is an error."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stagecheck.oracles import messages
from stagecheck.oracles.compare import compare, known_stop
from stagecheck.oracles.observe.fast import _as_left
from stagecheck.spec import DEFAULT_SCHEMA, ERROR, INFO, Copy, Observation
from stagecheck.spec.invariants import check_mirror_consistency
from tests.helpers import scenario

FOUR = ("mamba_state_idx_buf", "num_scheduled_tokens_buf", "num_computed_tokens_buf",
        "num_draft_tokens_buf")
OLD, LATER = DEFAULT_SCHEMA.profile(), DEFAULT_SCHEMA.profile({"run_prefix_state_migration"})


def run(exception: str | None = None, message: str | None = None, timed_out=False,
        buffers=FOUR, **changes) -> Observation:
    """What a correct single-loop run of ``scenario()`` leaves, with ``changes`` applied:
    ``cpu={buffer: {slot: value}}``, ``gpu=...``, ``copies={buffer: (start, stop)}``,
    ``inputs={name: value}``."""
    s = scenario()
    live = {"mamba_state_idx_buf": [3, 0, 9], "num_scheduled_tokens_buf": [5, 1, 70_000],
            "num_computed_tokens_buf": [100, 7, 2**31 - 1], "num_draft_tokens_buf": [2, 0, 1],
            "is_prefilling_buf": [False, True, False]}
    cpu = {b: live[b] + [-1] * 3 for b in buffers}
    gpu = {b: live[b] + [-2] * 3 for b in buffers}
    for view, table in (("cpu", cpu), ("gpu", gpu)):
        for b, slots in changes.get(view, {}).items():
            for i, v in slots.items():
                table[b][i] = v
    ranges = {b: (0, s.num_reqs) for b in buffers}
    ranges.update(changes.get("copies", {}))
    events = [Copy(b, *ranges[b], s.num_reqs) for b in buffers]
    from stagecheck.spec import inputs_snapshot
    inputs = {**inputs_snapshot(OLD, s), **changes.get("inputs", {})}
    return Observation(exception_type=exception, exception_message=message, cpu=cpu, gpu=gpu,
                       events=events, inputs_after=inputs, timed_out=timed_out,
                       exception_mro=(exception, "Exception") if exception else ())


MISSING_B = dict(mamba_state_idx={"req-a": 3, "req-c": 9, "req-p": 6})   # live req-b lacks one
OUT_OF_CONTRACT = dict(num_reqs=7)                                       # above capacity 6
ASSERT = ("AssertionError", "no state index for 'req-b'")

#: (name, scenario changes, baseline, candidate, profiles, expected [(invariant, severity,
#: field, words in the context of an info)])
RULES = [
    ("same runs", {}, run(), run(), (OLD, OLD), []),
    ("one raises on an in-contract input", {}, run(), run(*ASSERT), (OLD, OLD),
     [("same_outcome", ERROR, None, None)]),
    ("one raises in contract after staging a wrong slot: the state is info, with why", {},
     run(), run(*ASSERT, cpu={FOUR[2]: {1: 8}}), (OLD, OLD),
     [("same_outcome", ERROR, None, None),
      ("same_buffers", INFO, "computed", "what a call that did not return")]),
    ("one hangs", {}, run(), run("CallTimedOut", timed_out=True), (OLD, OLD),
     [("same_outcome", ERROR, None, None)]),
    ("one ends its process: nothing of it to compare but the outcome", {}, run(),
     Observation.of_crash("exited the interpreter with code 0"), (OLD, OLD),
     [("same_outcome", ERROR, None, None)]),
    ("message text only", MISSING_B, run(*ASSERT), run("AssertionError", "req-b: no index"),
     (OLD, OLD), [("same_message", INFO, None, "failure path")]),
    ("live slot differs, both returned", {}, run(), run(cpu={FOUR[2]: {1: 8}}), (OLD, OLD),
     [("same_buffers", ERROR, "computed", None)]),
    ("device tail differs, both returned", {}, run(), run(gpu={FOUR[0]: {4: 0}}), (OLD, OLD),
     [("same_buffers", ERROR, "state_idx", None)]),
    ("partial writes differ on the missing-index path", MISSING_B, run(*ASSERT),
     run(*ASSERT, cpu={FOUR[1]: {0: 77}}), (OLD, OLD),
     [("same_buffers", INFO, "scheduled", "failure path: live request 'req-b'")]),
    ("buffers differ out of contract", OUT_OF_CONTRACT, run(*ASSERT),
     run(*ASSERT, cpu={FOUR[1]: {0: 77}}), (OLD, OLD),
     [("same_buffers", INFO, "scheduled", "out of contract: num_reqs=7")]),
    ("out of contract with a missing index too: the failure path is named first",
     dict(num_prompt_tokens={"req-a": 1, "req-b": 2**40, "req-c": 3}, **MISSING_B),
     run(*ASSERT), run("AssertionError", "req-b: no index"), (OLD, OLD),
     [("same_message", INFO, None, "out of contract: failure path: live request 'req-b' "
       "(slot 1) has no mamba_state_idx, so both raise and partial writes may differ; "
       "num_prompt_tokens['req-b']=1099511627776 does not fit")]),
    ("the candidate hangs out of contract where the baseline raised: an error anyway",
     OUT_OF_CONTRACT, run(*ASSERT), run("CallTimedOut", timed_out=True), (OLD, OLD),
     [("same_outcome", ERROR, None, "out of contract: num_reqs=7")]),
    ("the candidate ends its process on a failure path where the baseline raised: an error",
     MISSING_B, run(*ASSERT), Observation.of_crash("killed by SIGSEGV"), (OLD, OLD),
     [("same_outcome", ERROR, None, None)]),
    ("the candidate ends its process where the two contracts differ: an error anyway",
     dict(run_prefix_state_migration=False, **MISSING_B), run(*ASSERT),
     Observation.of_crash("killed by SIGSEGV"), (OLD, LATER),
     [("same_outcome", ERROR, None, "the two contracts differ"),
      ("same_fields", INFO, "is_prefilling", "the two contracts differ"),
      ("same_fields", INFO, "state_idx", "the two contracts differ")]),
    ("the baseline hangs out of contract, the candidate raises: info (no worse)",
     OUT_OF_CONTRACT, run("CallTimedOut", timed_out=True), run(*ASSERT), (OLD, OLD),
     [("same_outcome", INFO, None, "out of contract: num_reqs=7")]),
    ("copy ranges differ", {}, run(), run(copies={FOUR[3]: (0, 6)}), (OLD, OLD),
     [("same_copies", ERROR, "draft", None)]),
    ("inputs differ afterwards", {}, run(), run(inputs={"mamba_state_idx": {}}), (OLD, OLD),
     [("same_inputs_after", ERROR, "mamba_state_idx", None)]),
    ("a generation adds a field", {}, run(), run(buffers=FOUR + ("is_prefilling_buf",)),
     (OLD, LATER), [("same_fields", INFO, "is_prefilling", None)]),
    ("the two contracts differ (flag off, one side needs an index)",
     dict(run_prefix_state_migration=False, **MISSING_B), run(*ASSERT),
     run(buffers=FOUR[1:] + ("is_prefilling_buf",)), (OLD, LATER),
     [("same_outcome", INFO, None, "the two contracts differ"),
      ("same_fields", INFO, "is_prefilling", "the two contracts differ"),
      ("same_fields", INFO, "state_idx", "the two contracts differ")]),
]


@pytest.mark.parametrize("name, changes, a, b, profiles, expected", RULES,
                         ids=[r[0] for r in RULES])
def test_compare_rules(name, changes, a, b, profiles, expected):
    s = scenario(**changes)
    found = compare(s, a, b, *profiles)
    got = [(f.invariant, f.severity, f.field) for f in found]
    assert got == [(inv, sev, field) for inv, sev, field, _ in expected], found
    for f, (_, severity, _, words) in zip(found, expected):
        assert f.side == "both"
        if words:                       # why it is info, or an error outside the contract
            assert words in f.extra["context"], f.extra
        elif severity == ERROR:
            assert "context" not in f.extra
        if severity == ERROR and f.invariant == "same_outcome" and words:
            assert f.message.endswith(messages.OUTCOME_WORSE_ON_ANY_INPUT), f.message


def test_a_buffer_difference_names_the_first_slot_and_keeps_every_slot():
    s = scenario()
    (f,) = compare(s, run(), run(cpu={FOUR[2]: {1: 8, 4: 9}}), OLD, OLD)
    assert (f.slot, f.view, f.baseline, f.candidate) == (1, "cpu", 7, 8)
    assert f.extra["slots"] == [1, 4]
    assert "computed[1] (live)" in f.message


def test_a_view_one_side_left_shorter_is_a_difference_not_a_crash():
    """An audit: a candidate that put a 3-element array in place of a buffer's ``np``
    left a shorter view, and the compare stage raised IndexError (exit 3)."""
    s = scenario()
    b = run()
    b.cpu[FOUR[3]] = b.cpu[FOUR[3]][:3]         # the live slots agree, the tail is gone
    (f,) = compare(s, run(), b, OLD, OLD)
    assert (f.invariant, f.slot, f.view, f.baseline) == ("same_buffers", 3, "cpu", -1)
    assert f.extra["slots"] == [3, 4, 5]
    assert "draft[3] (tail): baseline -1, candidate absent (its view is shorter)" in f.message


def test_a_mirror_longer_than_its_buffer_violates_mirror_consistency():
    """An audit: a failed gpu.resize_(5000) whose RuntimeError the code swallowed left a
    mirror that claims 5000 slots; spec passed it."""
    s = scenario()
    o = run()
    o.gpu[FOUR[3]] = o.gpu[FOUR[3]] + [None]       # what the worker reads of such a view
    (f,) = check_mirror_consistency(s, o, OLD)
    assert (f.invariant, f.slot) == ("mirror_consistency", 6)
    assert "no such slot (the buffer has 6)" in f.message


def test_a_view_resized_past_its_memory_is_read_within_its_memory():
    """The same audit: resize_(10**8) whose error was swallowed; reading the view whole
    read past its memory and killed the worker (SIGSEGV), blamed on the call."""
    view = torch.from_numpy(np.arange(4, dtype=np.int32))
    try:
        view.resize_(10**8)
    except RuntimeError:
        pass
    assert view.numel() == 10**8                  # the new size stayed
    assert _as_left(view) == [0, 1, 2, 3, None]


def test_a_known_stop_out_of_contract_is_info_naming_the_in_contract_error():
    """After the in-contract stream found a hang (an error), the out-of-contract stream's
    hang is the same error: info, with why, and without the words of an error."""
    found = compare(scenario(**OUT_OF_CONTRACT), run(*ASSERT),
                    run("CallTimedOut", timed_out=True), OLD, OLD)
    (hung,) = found
    assert hung.severity == ERROR and hung.extra["kind"] == "hang"
    (known,) = known_stop(found, "hang")
    assert known.severity == INFO and known.extra["kind"] == "hang"
    assert messages.KNOWN_STOP.format(what="hung") in known.extra["context"]
    assert known.extra["context"].startswith("out of contract: num_reqs=7")
    assert not known.message.endswith(messages.OUTCOME_WORSE_ON_ANY_INPUT), known.message
    assert known_stop(found, "crash") == found       # another kind: still its own error
