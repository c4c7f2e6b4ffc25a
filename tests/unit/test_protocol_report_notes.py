"""What a protocol report says beside its findings: runs whose gates the CUDA backend's
watchdog opened are counted and reported (``oracles/device/gate.py``: such a run's copies
completed earlier than the latest point, so a clean verdict there is weaker, and the report
says where the host waited unseen), and the JSON verdict agrees with the exit code."""

import json
from dataclasses import replace as _replace

from stagecheck.oracles import messages
from stagecheck.oracles.device.gate import STALL_S, STALLS_KEPT
from stagecheck.oracles.options import ProtocolConfig
from stagecheck.oracles.protocol.campaign import ProtocolResult, note_forced
from stagecheck.oracles.report.protocol_json import protocol_json_document
from stagecheck.oracles.report.protocol_text import render_protocol
from stagecheck.spec import ERROR, Finding
from stagecheck.spec.protocol import Trace
from stagecheck.spec.protocol_invariants import compare_runs
from stagecheck.spec.protocols import BUILTIN_PROTOCOLS
from stagecheck.spec.steps import Step, StepSequence


def _result() -> ProtocolResult:
    return ProtocolResult("scratch-reuse", None, "x.py::Scratch",
                          ProtocolConfig(sequences=3, device="cuda"))


def _sides(*forced: list[str]) -> list:
    """One target's (meant, seen) runs; the seen run's gates forced at ``forced``."""
    seen = Trace(forced=list(forced), forced_count=len(forced)).to_wire()
    return [(Trace().to_wire(), seen)]


def test_a_trace_keeps_its_forced_gates_across_the_wire():
    trace = Trace.from_wire(Trace(forced=["step (t.py:3)"], forced_count=4).to_wire())
    assert (trace.forced, trace.forced_count) == (["step (t.py:3)"], 4)


def test_runs_with_forced_gates_are_counted_and_their_places_kept_once_and_capped():
    result = _result()
    note_forced(result, _sides())                          # nothing forced: nothing noted
    assert (result.gates_forced, result.stalls) == (0, [])
    note_forced(result, _sides("a", "b"))
    note_forced(result, _sides("b"))
    assert result.gates_forced == 2 and result.stalls == ["a", "b"]
    note_forced(result, _sides(*(f"p{k}" for k in range(10))))
    assert result.gates_forced == 3 and len(result.stalls) == STALLS_KEPT
    assert result.stalls[:2] == ["a", "b"]


def test_a_race_free_sequence_whose_one_run_is_sent_twice_counts_once():
    # a race-free scheduled run is sent as both runs of its sequence: was counted twice
    result = _result()
    forced = Trace(forced=["a"], forced_count=1)
    note_forced(result, [(forced.to_wire(), forced.to_wire())])
    assert result.gates_forced == 1


def test_the_reports_say_how_many_runs_were_forced_and_where():
    result = _result()
    clean = render_protocol(result)
    assert "watchdog" not in clean
    assert protocol_json_document(result)["gates_forced"] == {"runs": 0, "where": []}
    note_forced(result, _sides("step (scratch.py:21)"))
    text = render_protocol(result)
    note = messages.PROTOCOL_GATES_FORCED.format(runs=1, where="step (scratch.py:21)",
                                                 seconds=STALL_S)
    assert note in text
    assert text.index(note) < text.index("verdict:")       # read before the verdict
    document = json.loads(json.dumps(protocol_json_document(result)))
    assert document["gates_forced"] == {"runs": 1, "where": ["step (scratch.py:21)"]}


def test_the_json_verdict_counts_info_findings_with_strict_as_the_exit_code_does():
    from stagecheck.spec.findings import Finding
    result = _result()
    result.findings = [Finding("no_copy_hazard", "info", "a race with no effect",
                               side="candidate")]
    assert protocol_json_document(result)["verdict"] == "equivalent"
    strict = protocol_json_document(result, strict=True)
    assert (strict["verdict"], strict["strict"], strict["infos"]) == ("different", True, 1)


def test_a_state_difference_names_where_in_what_observe_returns():
    """An audit: 'after step 1 the host holds [0][0][1] = -7777' did not say that the path
    is one into what the protocol's observe returned."""
    protocol = BUILTIN_PROTOCOLS["input-prep-event"]
    seq = StepSequence(protocol.name, 2, [])
    a, b = Trace(), Trace()
    a.states, b.states = [{"computed": {"req-1": 3}}], [{"computed": {"req-1": 4}}]
    (finding,) = compare_runs(protocol, seq, a, b)
    assert "after step 0 the host holds observe()['computed']['req-1'] = 4 (candidate), " \
           "3 (baseline)" in finding.message, finding.message
    a.states, b.states = [[[0, 1]]], [[[0, -7777]]]
    (finding,) = compare_runs(protocol, seq, a, b)
    assert "the host holds observe()[0][1] = -7777" in finding.message, finding.message


def test_a_protocol_pair_whose_findings_both_sides_show_alike_says_so():
    """An audit: 'diff X X --protocol P' of a buggy X said DIFFERENT with nothing to tell
    that the two behave alike; a protocol's findings must match in their words too (the
    step, the operation, the race), not only in the invariant."""
    race = Finding("no_copy_hazard", ERROR, "step 2 (execute_model): host write of x",
                   side="baseline")
    pair = ProtocolResult("scratch-reuse", "a.py::Scratch", "b.py::Scratch",
                          ProtocolConfig(sequences=3))
    pair.findings = [race, _replace(race, side="candidate")]
    assert messages.BOTH_VIOLATE_PROTOCOL_ALIKE in render_protocol(pair)
    assert protocol_json_document(pair)["violate_alike"] is True
    pair.findings = [race, _replace(race, side="candidate", message="step 1 (prepare): x")]
    assert messages.BOTH_VIOLATE_PROTOCOL_ALIKE not in render_protocol(pair)
    pair.findings = [race]                                  # the baseline's only
    assert messages.BOTH_VIOLATE_PROTOCOL_ALIKE not in render_protocol(pair)
    assert protocol_json_document(pair)["violate_alike"] is False
    alone = _result()
    alone.findings = [race]
    assert messages.BOTH_VIOLATE_PROTOCOL_ALIKE not in render_protocol(alone)


def test_a_grouped_findings_likely_cause_is_shown_under_it_not_only_in_json():
    """An audit: a read of pinned memory before its download landed was a member of the
    group a later race headed; its 'why an error' (the read, the actual bug) was only in
    --json, and fixing the head left it in the code."""
    seq = StepSequence("scratch-reuse", 2, [Step(kind="dummy", dummy_tokens=1)]).to_dict()
    race = Finding("no_copy_hazard", ERROR, "step 1 (execute): device work overwrites x",
                   side="candidate", scenario=seq, examples_to_find=1)
    read = Finding("readback_as_written", ERROR, "after step 0 the host holds observe()[0] = 0",
                   side="candidate", scenario=seq, examples_to_find=1,
                   extra={"context": "possibly a read before a download landed: wait first"})
    result = _result()
    result.findings = [race, read]
    text = render_protocol(result, show_tests=False)
    assert "1 more finding(s) of this error" in text          # the read is the race's member
    assert text.index("observe()[0] = 0") < text.index(
        "why an error: possibly a read before a download landed: wait first")


def test_a_group_no_race_heads_does_not_say_the_race_first():
    seq = StepSequence("scratch-reuse", 2, [Step(kind="dummy", dummy_tokens=1)]).to_dict()
    own = Finding("taken_are_previous", ERROR, "step 1 (take): took the wrong ids",
                  side="candidate", scenario=seq, examples_to_find=1)
    trace = Finding("same_trace", ERROR, "step 1 (take): the traces differ",
                    side="candidate", scenario=seq, examples_to_find=1)
    result = _result()
    result.findings = [own, trace]
    text = render_protocol(result, show_tests=False)
    assert "1 more finding(s) of this error (what the same step sequence shows)" in text
    race = Finding("no_copy_hazard", ERROR, "step 1 (take): host write of x",
                   side="candidate", scenario=seq, examples_to_find=1)
    result.findings = [race, own]
    assert "the race first" in render_protocol(result, show_tests=False)
