"""The parts of the protocol machinery, without worker processes: step sequences and the
scheduler model, the generator, the shrinker, protocol declarations checked, the report."""

import dataclasses
import pathlib

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.protocol import check_protocol, load_protocol, protocol_for_target
from stagecheck.oracles.protocol.generate import sample_sequence
from stagecheck.oracles.protocol.shrink import shrink_sequence
from stagecheck.oracles.report.protocol_text import sequence_table
from stagecheck.spec.findings import Finding
from stagecheck.spec.protocol import Operation, Protocol, StepSpace
from stagecheck.spec.protocols import BUILTIN_PROTOCOLS
from stagecheck.spec.protocols.vllm import sampled_rows, scheduler_output
from stagecheck.spec.schema_mistakes import StandInUnsupported
from stagecheck.spec.steps import Step, StepSequence, unfold


def join(rid, prompt=1, **kw):
    return {"id": rid, "prompt": prompt, **kw}


# ---------------------------------------------------------------- the scheduler model

def test_requests_join_prefill_in_chunks_then_decode_with_drafts():
    seq = StepSequence("p", 2, [Step(joins=[join("a", 5)], chunk={"a": 2}),
                                Step(), Step(drafts={"a": 3}, accepted={"a": 9})])
    v0, v1, v2 = unfold(seq)
    assert v0.scheduled == {"a": 2} and [j["computed"] for j in v0.joins] == [0]
    assert v1.scheduled == {"a": 3} and v1.cached == [("a", 2)]
    assert v2.scheduled == {"a": 4} and v2.drafts == {"a": 3}
    assert v2.accepted == {"a": 4}            # clamped to drafts + 1
    assert v2.cached == [("a", 5)]


def test_capacity_finish_preempt_and_resume():
    seq = StepSequence("p", 2, [Step(joins=[join("a"), join("b"), join("c")]),
                                Step(finished=["a"], preempted=["b"], joins=[join("d")]),
                                Step(resumed=["b", "zz"], finished=["nobody"])])
    v0, v1, v2 = unfold(seq)
    assert v0.batch == ["a", "b"]             # c does not fit
    assert v1.finished == ["a"] and v1.preempted == ["b"] and v1.batch == ["d"]
    assert v2.batch == ["d", "b"] and v2.resumed[0]["computed"] == 0
    assert v2.finished == []


def test_a_dummy_step_changes_nothing():
    seq = StepSequence("p", 2, [Step(joins=[join("a")]), Step(kind="dummy", dummy_tokens=3),
                                Step()])
    views = unfold(seq)
    assert views[1].kind == "dummy" and views[1].dummy_tokens == 3
    assert views[2].cached == [("a", 1)]


def test_a_sequence_round_trips_as_json_and_refuses_strangers():
    seq = sample_sequence(BUILTIN_PROTOCOLS["mamba-align-steps"], 3, 5)
    assert StepSequence.from_dict(seq.to_dict()) == seq
    with pytest.raises(ValueError, match="unknown step-sequence keys"):
        StepSequence.from_dict({**seq.to_dict(), "extra": 1})
    with pytest.raises(ValueError, match="step 0 is not a step"):
        StepSequence.from_dict({**seq.to_dict(), "steps": [{"bogus": 1}]})


def test_the_vllm_scheduler_output_and_sampled_rows():
    seq = StepSequence("p", 3, [Step(joins=[join("a", 2, temperature=0.5), join("b")]),
                                Step(drafts={"b": 2}, accepted={"b": 2})])
    _, view = unfold(seq)
    out = scheduler_output(view)
    assert out.scheduled_cached_reqs.req_ids == ["a", "b"]
    assert out.num_scheduled_tokens == {"a": 3 - 2 + 0, "b": 3} or \
        out.num_scheduled_tokens["b"] == 3
    assert out.scheduled_spec_decode_tokens == {"b": [8, 8]}
    assert sampled_rows(view, ["b", "a"]) == [[7, 7, -1], [7, -1, -1]]
    with pytest.raises(StandInUnsupported):
        out.no_such_field       # noqa: B018 (a stand-in refuses what it does not model)


# ---------------------------------------------------------------- the generator

@pytest.mark.parametrize("name", BUILTIN_PROTOCOLS)
def test_sequences_are_deterministic_and_valid(name):
    protocol = BUILTIN_PROTOCOLS[name]
    for index in range(30):
        seq = sample_sequence(protocol, 7, index)
        assert seq == sample_sequence(protocol, 7, index)
        assert 1 <= len(seq.steps) <= protocol.space.steps[1]
        for view in unfold(seq):
            assert len(view.batch) <= seq.capacity
            assert len(view.completion) in (0, len(protocol.operations))
    kinds = {v.kind for i in range(60) for v in unfold(sample_sequence(protocol, 7, i))}
    assert ("dummy" in kinds) == protocol.space.dummy


def test_the_generator_draws_every_scheduler_event():
    protocol = BUILTIN_PROTOCOLS["condense-inflight-d2h"]
    seen = set()
    for index in range(200):
        for v in unfold(sample_sequence(protocol, 0, index)):
            seen |= {name for name in ("finished", "preempted", "joins", "resumed", "drafts")
                     if getattr(v, name)}
            seen |= set(v.completion)
    assert seen >= {"finished", "preempted", "joins", "resumed", "drafts", "lazy", "eager",
                    "drain"}


def test_a_single_call_protocol_draws_a_scenario():
    protocol = load_protocol("single-call:mamba-postprocess")
    seq = sample_sequence(protocol, 0, 4)
    assert len(seq.steps) == 1 and seq.data["scenario"]["schema"] == "mamba-postprocess"


# ---------------------------------------------------------------- the shrinker

def test_the_shrinker_keeps_the_failure_and_only_shrinks():
    protocol = BUILTIN_PROTOCOLS["condense-inflight-d2h"]
    seq = next(s for s in (sample_sequence(protocol, 1, i) for i in range(100))
               if any(j["prompt"] >= 3 for st in s.steps for j in st.joins)
               and len(s.steps) >= 5)

    def fails(s):
        return any(j["prompt"] >= 3 for st in s.steps for j in st.joins)

    sizes = []

    def still_fails(candidates):
        for k, c in enumerate(candidates):
            if fails(c):
                sizes.append(c.size)
                return k
        return None

    smallest, spent = shrink_sequence(protocol, seq, still_fails)
    assert fails(smallest) and spent > 0
    assert sizes == sorted(sizes, reverse=True)
    assert len(smallest.steps) == 1
    (only,) = smallest.steps[0].joins
    assert only["prompt"] == 3 and smallest.capacity == 1
    assert smallest.steps[0].completion == []


def test_a_failure_any_prompt_shows_shrinks_to_prompts_of_one_not_below():
    protocol = BUILTIN_PROTOCOLS["condense-inflight-d2h"]
    seq = next(s for s in (sample_sequence(protocol, 1, i) for i in range(100))
               if any(j["prompt"] >= 3 for st in s.steps for j in st.joins))

    def still_fails(candidates):       # fails with any request, whatever its prompt
        return next((k for k, c in enumerate(candidates)
                     if any(st.joins for st in c.steps)), None)

    smallest, spent = shrink_sequence(protocol, seq, still_fails)
    prompts = [j["prompt"] for st in smallest.steps for j in st.joins]
    assert prompts and all(p == 1 for p in prompts), prompts     # never below one


def test_steps_before_a_parity_dependent_failure_go_two_at_a_time():
    # a failure that needs its request to join at an even step (an operation whose
    # ``when`` runs on odd steps): dropping one step of two empty ones before it moves the
    # join to an odd step; dropping both keeps it even (was: shrunk to 4 steps, not 2)
    protocol = BUILTIN_PROTOCOLS["condense-inflight-d2h"]
    first = join("req-0", temperature=0.0, prefix=0)
    seq = StepSequence(protocol.name, capacity=1,
                       steps=[Step(), Step(), Step(joins=[first]), Step()])

    def fails(c):
        joined = [k for k, st in enumerate(c.steps) if st.joins]
        return bool(joined) and joined[0] % 2 == 0 and len(c.steps) > joined[0] + 1

    def still_fails(candidates):
        return next((k for k, c in enumerate(candidates) if fails(c)), None)

    assert fails(seq)
    smallest, _ = shrink_sequence(protocol, seq, still_fails)
    assert len(smallest.steps) == 2 and smallest.steps[0].joins


def test_a_long_sequence_whose_failure_shows_early_loses_its_later_steps_in_few_tries():
    # 128 steps, the failure at its second (a race of step 1 with step 0's copy): the
    # prefixes go first (an audit's 128-step protocol took 400 tries and 141 s, and kept 78)
    protocol = BUILTIN_PROTOCOLS["condense-inflight-d2h"]
    first = join("req-0", temperature=0.0, prefix=0)
    seq = StepSequence(protocol.name, capacity=1,
                       steps=[Step(joins=[first])] + [Step() for _ in range(127)])
    tries = []

    def still_fails(candidates):
        tries.extend(candidates)
        return next((k for k, c in enumerate(candidates)
                     if len(c.steps) >= 2 and c.steps[0].joins), None)

    smallest, spent = shrink_sequence(protocol, seq, still_fails)
    assert len(smallest.steps) == 2 and smallest.steps[0].joins
    assert spent <= 24, spent


# ---------------------------------------------------------------- declarations

def test_the_builtin_protocols_are_right_and_chosen_by_name():
    for protocol in BUILTIN_PROTOCOLS.values():
        assert check_protocol(protocol) == []
    assert protocol_for_target("x.py::preprocess_mamba").name == "mamba-align-steps"
    assert protocol_for_target("x.py::GPUModelRunner._dummy_run").name == "input-prep-event"
    assert protocol_for_target("x.py::GPUModelRunner.execute_model") is None   # several


def test_every_problem_of_a_declaration_names_its_part():
    bad = Protocol(name="", summary="", functions=("f",), build=None, component="not a class",
                   operations=(Operation("a", print), Operation("a", 3)),
                   device_work=("ok", "1bad"), space=StepSpace(capacity=(3, 1)),
                   row_order="x..y")
    problems = check_protocol(bad)
    text = " | ".join(problems)
    for part in ("name", "build", "component", "operations[1].run", "appear twice",
                 "device_work", "space.capacity", "row_order"):
        assert part in text, (part, text)
    assert check_protocol("nope") == [messages.PROTOCOL_PROBLEM_TYPE.format(kind="str")]
    no_state = dataclasses.replace(BUILTIN_PROTOCOLS["input-prep-event"], component="")
    assert check_protocol(no_state) == [messages.PROTOCOL_PROBLEM_NO_STATE]
    # an audit: both set passed the check, then every run drove one staging call and
    # blamed the target ("a one-call protocol ... runs one call of a staging function")
    both = dataclasses.replace(BUILTIN_PROTOCOLS["input-prep-event"],
                               staging="mamba-postprocess")
    assert check_protocol(both) == [messages.PROTOCOL_PROBLEM_BOTH_STATES.format(
        component="GPUModelRunner", staging="mamba-postprocess")]
    # the bound a value passes was the one said for its low end only ("not >= 1": 5000 is)
    big = dataclasses.replace(BUILTIN_PROTOCOLS["input-prep-event"],
                              space=StepSpace(max_prompt=5000))
    assert check_protocol(big) == [
        "space.max_prompt 5000 is not a whole number from 1 to 4096: give e.g. 1"]


def test_load_protocol_says_what_is_wrong(tmp_path):
    with pytest.raises(SchemaError, match="neither a built-in protocol"):
        load_protocol("no-such-protocol")
    with pytest.raises(SchemaError, match="does not exist"):
        load_protocol(str(tmp_path / "missing.py"))
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(SchemaError, match="has no Protocol named 'PROTOCOL'"):
        load_protocol(str(empty))
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(SchemaError, match="RuntimeError: boom"):
        load_protocol(str(broken))
    wrong = tmp_path / "wrong.py"
    wrong.write_text("from stagecheck.spec.protocol import Operation, Protocol\n"
                     "PROTOCOL = Protocol('w', 's', ('f',), build=None, operations=())\n")
    with pytest.raises(SchemaError, match="problem") as caught:
        load_protocol(str(wrong))
    assert "build" in str(caught.value) and "operations" in str(caught.value)


# ---------------------------------------------------------------- the report

def test_the_sequence_table_shows_steps_operations_copies_in_flight_and_hazards():
    seq = StepSequence("p", 2, [Step(joins=[join("req-0", 2, temperature=0.5)]),
                                Step(finished=["req-0"])])
    table = [{"step": 0, "operation": "execute_model", "completion": "lazy", "in_flight": 2,
              "hazards": [], "outcome": "returned"},
             {"step": 1, "operation": "execute_model", "completion": "eager", "in_flight": 0,
              "hazards": ["host-write-pending-upload x.cpu[0]"], "outcome": "returned"}]
    f = Finding("no_copy_hazard", "error", "m", side="candidate", scenario=seq.to_dict(),
                extra={"table": table})
    text = "\n".join(sequence_table(f))
    assert "join req-0 (prompt 2, T 0.5)" in text and "finish req-0" in text
    assert "in flight" in text and "host-write-pending-upload x.cpu[0]" in text


def test_docs_state_the_protocol_invariants_as_the_code_does():
    import pathlib

    from stagecheck.spec.protocol_invariants import PROTOCOL_DIFFERENCES, PROTOCOL_INVARIANTS
    root = pathlib.Path(__file__).resolve().parents[2]
    page = (root / "docs" / "protocols.md").read_text()
    for inv in PROTOCOL_INVARIANTS:
        assert f"- `{inv.id}`: {inv.statement}" in page, inv.id
    for key, text in PROTOCOL_DIFFERENCES.items():
        assert f"- `{key}` (two targets): {text}" in page, key
    for name in BUILTIN_PROTOCOLS:
        assert f"| `{name}` |" in page, name
    example = load_protocol(str(root / "docs" / "examples" / "token_stager_protocol.py"))
    assert check_protocol(example) == []
    assert "`host-write-pending-upload` (i)" in page and "`pinned-reused-pending-copy` (iv)" in page


def test_a_protocol_result_as_json():
    import json

    from stagecheck.oracles.protocol import ProtocolConfig, ProtocolResult
    from stagecheck.oracles.report.protocol_json import render_protocol_json
    seq = StepSequence("token-stager", 1, [Step(joins=[join("req-0")])])
    f = Finding("no_copy_hazard", "error", "m", side="candidate", scenario=seq.to_dict(),
                extra={"kind": "host-write-pending-upload"})
    result = ProtocolResult("token-stager", None, "x.py::C", ProtocolConfig(sequences=3),
                            [f], sequences_run=2, shrink_evaluations=5,
                            first_error_seconds=1.2345678901234)
    document = json.loads(render_protocol_json(result, {f.id: "/tmp/r.json"}))
    assert document["verdict"] == "different" and document["errors"] == 1
    assert document["sequences"] == {"budget": 3, "run": 2, "shrinking": 5}
    assert document["first_error_seconds"] == 1.235      # rounded as "seconds" is
    (saved,) = document["findings"]
    assert saved["replay"] == "/tmp/r.json" and saved["scenario"]["protocol"] == "token-stager"


def test_a_call_the_component_refuses_is_told_from_a_component_that_raises():
    """A protocol's build calling the component (``ctx.component``) with arguments it does
    not take is the protocol's mistake said as such (exit 2); a TypeError from the
    component's own code is a finding; one of build's own code (``len(5)``, an audit: it
    was said as arguments ctx.component refused) is build's own raise, not a refused call."""
    from types import SimpleNamespace

    from stagecheck.oracles.protocol.context import RunContext
    from stagecheck.oracles.protocol.own_code import call_refused as _call_refused

    class Component:
        def __init__(self, capacity):
            raise TypeError("raised by the component's own code")

    ctx = SimpleNamespace(code=SimpleNamespace(component=lambda: Component))

    def refused():
        return RunContext.component(ctx, 1, pin_memory=True)

    def raising():
        return RunContext.component(ctx, 1)

    def own():
        return len(5)

    errors = []
    for build in (refused, raising, own):
        try:
            build()
        except TypeError as exc:
            errors.append(exc)
    assert len(errors) == 3
    assert _call_refused(refused, errors[0]).endswith(f":{refused.__code__.co_firstlineno + 1}")
    assert _call_refused(raising, errors[1]) is None
    assert _call_refused(own, errors[2]) is None
    assert _call_refused(refused, ValueError("not a refused call")) is None


def test_protocol_findings_first_seen_together_are_one_error_headed_by_the_race():
    from stagecheck.oracles.report.protocol_json import protocol_json_document
    from stagecheck.oracles.protocol import ProtocolConfig, ProtocolResult
    from stagecheck.oracles.report.protocol_text import protocol_error_groups
    short = StepSequence("p", 1, [Step(joins=[join("req-0")])]).to_dict()
    long = StepSequence("p", 1, [Step(joins=[join("req-0")]), Step()]).to_dict()
    read = Finding("device_read_as_meant", "error", "read", side="candidate", field="w",
                   scenario=short, examples_to_find=4)
    far = Finding("no_copy_hazard", "error", "far race", side="candidate", field="a",
                  slot=0, scenario=long, examples_to_find=4)
    race = Finding("no_copy_hazard", "error", "race", side="candidate", field="b", slot=0,
                   scenario=short, examples_to_find=4)
    other = Finding("readback_as_written", "error", "later", side="candidate", field="x",
                    scenario=long, examples_to_find=9)
    groups = protocol_error_groups([read, far, race, other])
    assert [[f.message for f in g.findings] for g in groups] == [
        ["race", "far race", "read"], ["later"]]      # the shrunk sequence's race heads
    result = ProtocolResult("p", None, "x.py::C", ProtocolConfig(sequences=3),
                            [read, far, race, other])
    document = protocol_json_document(result)
    assert [g["members"] for g in document["error_groups"]] == [
        [race.id, far.id, read.id], [other.id]]
    assert {f["id"]: f["group"] for f in document["findings"]}[read.id] == race.id


def test_a_hazard_findings_id_leaves_the_allocation_counter_out():
    from stagecheck.spec.protocol_invariants import stable_region
    assert stable_region("pinned tensor 3") == stable_region("pinned tensor 7") == \
        "pinned tensor"
    assert stable_region("input_batch.temperature_cpu_tensor") == \
        "input_batch.temperature_cpu_tensor"


def test_a_race_of_the_runs_end_and_an_operations_race_read_plainly():
    from stagecheck.oracles.protocol.run import END
    from stagecheck.spec.protocol_invariants import END_OF_RUN, UNNAMED_SAID, _hazard_message
    assert END == END_OF_RUN
    end = {"step": 2, "op": END, "region": "an unnamed tensor", "slots": [0],
           "by": "download d -> c[0:1] #4 on stream 1 (step 0, sample_tokens) reads it",
           "pending": "device work w #3 on stream 0 (step 0, sample_tokens)"}
    text = _hazard_message(end)
    assert text.startswith("at the end of the run (after step 2): download d -> c[0:1] #4 "
                           "on stream 1 (step 0, sample_tokens) reads slots [0] of "
                           + UNNAMED_SAID + ", while device work w")
    assert "reads it of" not in text and "unnamed tensor" not in text
    host = dict(end, op="stage", step=1, region="ids_cpu", by="host write (torch)")
    assert _hazard_message(host).startswith("step 1 (stage): host write (torch) of ids_cpu "
                                            "slots [0] while device work w")


def test_a_protocol_documents_settings_are_named_as_the_staging_documents_are():
    import re
    from stagecheck.oracles.protocol import ProtocolConfig, ProtocolResult
    from stagecheck.oracles.report.protocol_json import protocol_json_document
    result = ProtocolResult("p", None, "x.py::C", ProtocolConfig(sequences=3, timeout=2,
                                                                 shims=("s.py",)))
    settings = protocol_json_document(result)["settings"]
    assert settings == {"examples": 3, "seed": 0, "device": "cpu", "timeout": 2.0,
                        "gpu_busy_cycles": 0, "max_capacity": 8, "shims": ["s.py"],
                        "jobs": 1}
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "json.md").read_text()
    section = page.split("### Protocol runs")[1].split("\n### ")[0]
    for key in protocol_json_document(result):
        assert re.search(rf"`{key}`", section), key
    for key in settings:
        assert f"`{key}`" in section, key


class _HandMadeGates:
    """``StreamGates`` with a driver and counters made by hand (no CUDA here): each
    counter a numpy int32, each gate put on a stream noted in ``waits``."""

    @staticmethod
    def make():
        import numpy as np

        from stagecheck.oracles.device.gate import STREAMS, StreamGates, _Counter
        waits = []

        class Gates(StreamGates):
            def _new_counters(self, driver):
                return [_Counter(np.zeros(1, dtype=np.int32), 4 * k) for k in range(STREAMS)]
        gates = Gates(None, driver=(lambda stream, address, number, how:
                                    waits.append((stream.value, number)) or 0, None))
        return gates, waits


def test_closing_the_stream_gates_ends_their_watchdog_thread_before_it_returns():
    # the CUDA model's watchdog is the checker's own thread: alive at a sequence's end it
    # read as a thread the code under test left running (a worker restart per sequence)
    gates, _ = _HandMadeGates.make()
    assert gates.hold(7) == 1
    watchdog = gates._thread
    assert watchdog is not None and watchdog.is_alive()
    gates.close()
    assert not watchdog.is_alive() and gates._thread is None
    assert gates._counters[7].opened == 1 and gates._counters[7].value[0] == 1   # let go
    assert gates.hold(7) == 0 and gates._thread is None      # no gate after the close


def test_each_stream_has_gates_of_its_own_and_opening_one_leaves_the_others_closed():
    # a blocking copy on one stream waits for that stream only: a download queued on a
    # copy stream the host never waited for must stay held (counts_read_before_event.py)
    gates, waits = _HandMadeGates.make()
    assert [gates.hold(7), gates.hold(9), gates.hold(7), gates.hold(9)] == [1, 1, 2, 2]
    assert waits == [(7, 1), (9, 1), (7, 2), (9, 2)]
    gates.open({7: 2})
    assert gates._counters[7].value[0] == 2 and gates._counters[9].value[0] == 0
    assert not gates.all_open()
    gates.open({9: 1, 7: 1})            # a lower number opens nothing again
    assert (gates._counters[7].value[0], gates._counters[9].value[0]) == (2, 1)
    gates.open({9: 5})                  # never past what was issued
    assert gates._counters[9].value[0] == 2 and gates.all_open()
    assert gates.is_open(7, 2) and not gates.is_open(7, 3)
    gates.close()


def test_streams_past_the_counters_made_at_the_start_hold_no_gate():
    # pinned memory is never allocated while gates are closed (it may wait for them)
    from stagecheck.oracles.device.gate import STREAMS
    gates, _ = _HandMadeGates.make()
    assert [gates.hold(handle) for handle in range(100, 100 + STREAMS)] == [1] * STREAMS
    assert gates.hold(7) == 0 and gates.hold(100) == 2
    gates.close()


def test_the_cuda_model_opens_the_gates_in_front_of_what_a_clock_covers_and_no_other():
    from stagecheck.oracles.device.cuda import CudaDevice
    model = CudaDevice.__new__(CudaDevice)          # its gates only: no CUDA here
    model.gates, _ = _HandMadeGates.make()
    for handle in (7, 7, 7, 9):
        model.gates.hold(handle)
    # stream 0 (handle 7): gates in front of its operations 1, 3 and 5; stream 1: of its 2
    model._gates_at = {0: (7, [1, 3, 5], [1, 2, 3]), 1: (9, [2], [1])}
    model.open_clock({0: 4})
    assert (model.gates._counters[7].opened, model.gates._counters[9].opened) == (2, 0)
    model.open_clock({0: 5, 1: 1})        # stream 1's gate is in front of its operation 2
    assert (model.gates._counters[7].opened, model.gates._counters[9].opened) == (3, 0)
    model.open_clock({1: 2})
    assert model.gates.all_open()
    model.gates.close()


def test_a_read_of_device_memory_by_the_checker_opens_its_streams_gates_at_once():
    # a protocol's observe calling out.tolist() waits for the current stream on CUDA: held
    # behind closed gates it stalled until the watchdog (0.25 s a step, 38 s for 40
    # sequences of positions_event_window.py on an H100); now the gates of what that
    # stream was issued open at once, counted as opened early, where the read is
    import torch

    from stagecheck.oracles.device.cuda import CudaDevice
    from stagecheck.oracles.device.ops import StreamState
    model = CudaDevice.__new__(CudaDevice)          # its gates only: no CUDA here
    model._torch = torch
    model.gates, _ = _HandMadeGates.make()
    for handle in (7, 7, 9):
        model.gates.hold(handle)
    model._gates_at = {0: (7, [1, 3], [1, 2]), 1: (9, [1], [1])}
    stream = StreamState(0)
    stream.clock = {0: 3}
    model.current = lambda: stream
    model.memory = lambda t: "device"

    def intercepted(func, args):        # as __torch_function__ calls it: the read is above
        model.checker_read(func, args)
    intercepted(torch.Tensor.add, (torch.zeros(2), 1))     # not a read: nothing
    assert model.gates.forced == 0 and model.gates._counters[7].opened == 0
    intercepted(torch.Tensor.tolist, (torch.zeros(2),))
    assert (model.gates._counters[7].opened, model.gates._counters[9].opened) == (2, 0)
    assert model.gates.forced == 1
    assert model.gates.stalls[0].startswith("a read of device memory by the checker's call")
    assert "test_device_protocol_parts.py" in model.gates.stalls[0]
    model.checker_read(torch.Tensor.tolist, (torch.zeros(2),))    # nothing closed: no count
    assert model.gates.forced == 1
    model.memory = lambda t: "pinned"
    stream.clock = {0: 3, 1: 1}
    model.checker_read(torch.Tensor.tolist, (torch.zeros(2),))    # host memory: no wait
    assert model.gates.forced == 1 and model.gates._counters[9].opened == 0
    model.gates.close()


def test_only_a_model_whose_reads_wait_sends_the_checkers_calls_to_it():
    from stagecheck.oracles.device.cpu import CpuDevice
    from stagecheck.oracles.device.cuda import CudaDevice
    model = CpuDevice()
    with model.passthrough():
        assert model.inside and not model.checking
    assert CudaDevice.reads_wait and not CpuDevice.reads_wait
    model.reads_wait = True
    with model.passthrough():
        assert model.checking
        with model.passthrough():
            assert model.checking
        assert model.checking
    assert not model.checking and not model.inside


def test_the_routine_cache_of_the_state_walk_holds_a_bounded_number_of_classes():
    # classes of code loaded again and again (mutants, fresh fixtures) are let go
    from stagecheck.oracles.protocol import context
    for i in range(context._ROUTINES_HELD + 10):
        assert context._routine(type(f"Made{i}", (), {})()) is False
    assert 0 < len(context._ROUTINES) <= context._ROUTINES_HELD
    assert context._routine(len) is True


def test_a_warm_up_run_that_hangs_is_the_sequences_only_run(monkeypatch):
    # on CUDA a target's first sequence runs as meant first; when that run hangs, the
    # scheduled run would wait out the time limit again: the hang is both sides at once
    from stagecheck.oracles.protocol import run
    from stagecheck.spec.protocol import Trace
    hung = Trace(ops=[{"step": 0, "op": "step", "completion": "", "outcome": "hung",
                       "in_flight": 0, "hazards": [], "result": None}])
    ran = []
    monkeypatch.setattr(run, "_warm_up", lambda *a: hung)
    monkeypatch.setattr(run, "run_sequence", lambda *a: ran.append(a[3]) or Trace())
    monkeypatch.setattr(run, "end_left_running", lambda: [])
    monkeypatch.setattr(run, "_freeze_once", lambda: None)
    seq = {"capacity": 1, "steps": []}
    monkeypatch.setattr(run.StepSequence, "from_dict", staticmethod(lambda data: data))
    (index, sides), = run._run_batch(None, [object()], [(0, seq)], {"device": "cuda"})
    assert ran == [] and index == 0
    assert [Trace.from_wire(w).failed()["outcome"] for w in sides[0]] == ["hung", "hung"]
    monkeypatch.setattr(run, "_warm_up", lambda *a: None)       # not warmed: run as always
    run._run_batch(None, [object()], [(1, seq)], {"device": "cuda"})
    assert ran == ["seen"]


def test_a_when_that_exits_is_said_to_raise_not_to_return():
    from stagecheck.oracles.protocol.problems import when_problem
    said = when_problem(1, Operation("get", print), SystemExit(0), 0)
    assert "raised SystemExit: 0" in said and "not a bool" not in said
    assert "returned 3 (not a bool)" in when_problem(1, Operation("get", print), 3, 0)


@pytest.mark.parametrize("meant, seen, said", [
    ([1, 2], [1, None], "did not read contents[1] under this completion schedule, "
                        "but read it = 2 when every copy and kernel completes when issued"),
    ([1, None], [1, 5], "read contents[1] = 5 under this completion schedule, and not at "
                        "all when every copy and kernel completes when issued"),
    ([1, 2], [1, 3], "read contents[1] = 3 under this completion schedule, 2 when"),
])
def test_an_element_device_work_did_not_read_is_not_said_to_read_none(meant, seen, said):
    # device work whose earlier reads (a cumulative length overwritten while the work was
    # pending) decided how much of an argument it read: "read contents[1] = None under
    # this completion schedule, 1 when ..." (found writing a protocol for vLLM's model
    # runner v2 StagedWriteTensor)
    from stagecheck.spec.protocol import Trace
    from stagecheck.spec.protocol_invariants import _reads
    read = {"step": 0, "op": "execute", "work": "apply_write"}
    (f,) = _reads(Trace(reads=[dict(read, values={"contents": meant})]),
                  Trace(reads=[dict(read, values={"contents": seen})]), "candidate")
    assert f.message == "step 0 (execute): apply_write " + said if said.endswith("issued") \
        else f.message.startswith("step 0 (execute): apply_write " + said), f.message
    assert "None" not in f.message


def test_an_exception_of_queued_device_work_names_the_work_and_its_launch():
    # device work launched at step 0 ran when step 1's get_output synchronized, and its
    # exception read as get_output's own: "step 1 (get_output) raised RuntimeError: The
    # expanded size of the tensor (3) must match ..." with nothing naming the kernel
    # (found writing a protocol for vLLM's model runner v2 staged writes)
    import torch
    from stagecheck.oracles.device import device_model
    from stagecheck.oracles.protocol.context import _device_work, raised_by_work

    def apply_write(out):
        raise RuntimeError("The expanded size of the tensor (3) must match")

    model = device_model()
    with model.activate():
        model.location = (0, "execute")
        out = torch.zeros(2, dtype=torch.int32, device="cuda")
        _device_work(model, "table._apply_write_kernel", apply_write)(out)
        model.location = (1, "get_output")
        with pytest.raises(RuntimeError) as caught:
            torch.cuda.synchronize()
    assert raised_by_work(caught.value) == messages.PROTOCOL_WORK_RAISED.format(
        work="table._apply_write_kernel", where="step 0 (execute)")
    assert raised_by_work(RuntimeError("host code")) == ""


def test_a_parameter_the_space_does_not_declare_names_those_it_does():
    # an audit: ctx.sequence.params["blocksize"] raised KeyError: 'blocksize', no more
    seq = StepSequence("p", 2, params={"block_size": 4})
    assert seq.params["block_size"] == 4 and seq.to_dict()["params"] == {"block_size": 4}
    with pytest.raises(KeyError, match="'blocksize' is not a parameter of the step space; "
                                       "its parameters: 'block_size'"):
        seq.params["blocksize"]
    assert type(dataclasses.replace(seq, capacity=3).params["block_size"]) is int
    with pytest.raises(KeyError, match="declares them"):
        StepSequence("p", 2).params["x"]
