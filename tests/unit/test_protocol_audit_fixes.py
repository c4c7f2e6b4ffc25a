"""Audit fixes of protocol runs, in this process: a pasted pytest test carries the run's
shims; ``ctx.function`` of a name the target lacks is the protocol's mistake with a
did-you-mean; a class compiled for a protocol names itself (never the loader's accessor)
in a load error's fix; operations and device work that no drawn sequence ran are named
(text report, JSON document)."""

import importlib.util
import json
import os
import pathlib

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import SchemaError, TargetLoadError
from stagecheck.oracles.options import ProtocolConfig
from stagecheck.oracles.protocol.campaign import ProtocolResult
from stagecheck.oracles.protocol.component import load_code
from stagecheck.oracles.protocol.generate import sample_sequence
from stagecheck.oracles.protocol.load import load_protocol
from stagecheck.oracles.protocol.ran import never_ran, never_ran_lines, note_ran
from stagecheck.oracles.protocol.run import run_sequence
from stagecheck.oracles.report.protocol_json import protocol_json_document
from stagecheck.oracles.report.protocol_snippet import protocol_pytest_example
from stagecheck.oracles.report.protocol_text import render_protocol
from stagecheck.oracles.targets import target_ref
from stagecheck.spec import Finding
from stagecheck.spec.protocol import Trace

ROOT = pathlib.Path(__file__).resolve().parents[2]
STAGER = ROOT / "tests" / "targets" / "protocols" / "_machinery" / "fixed_token_stager.py"
EXAMPLE = ROOT / "docs" / "examples" / "token_stager_protocol.py"
OPTIONS = {"device": "cpu", "timeout": 10.0, "busy_cycles": 0}


def _example():
    spec = importlib.util.spec_from_file_location("audit_token_stager_protocol", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PROTOCOL


def test_the_pasted_test_passes_the_runs_shims_by_their_absolute_paths(tmp_path, monkeypatch):
    """An audit: the pasted ``ProtocolConfig(...)`` dropped ``--shim``, so a target that
    needs one failed to load where the test was pasted, instead of showing the finding."""
    monkeypatch.chdir(tmp_path)
    finding = Finding("no_copy_hazard", "error", "a race", scenario={"steps": []})
    config = ProtocolConfig(sequences=1, shims=("shims/vllm_names.py",))
    source = protocol_pytest_example(finding, None, "t.py::TokenStager", "p.py", config)
    shim = os.path.join(str(tmp_path), "shims", "vllm_names.py")
    assert f"shims=({shim!r},))" in source, source
    namespace: dict = {}
    exec(compile(source, "pasted_test.py", "exec"), namespace)     # it is Python as printed
    # a run without shims says none
    plain = protocol_pytest_example(finding, None, "t.py::TokenStager", "p.py",
                                    ProtocolConfig(sequences=1))
    assert "shims=" not in plain


def _missing_function_protocol(tmp_path: pathlib.Path, name: str):
    path = tmp_path / "asks_protocol.py"
    path.write_text(EXAMPLE.read_text().replace(
        "def stage(ctx):\n", f"def stage(ctx):\n    ctx.function({name!r})(1)\n", 1))
    assert path.read_text() != EXAMPLE.read_text()
    spec = importlib.util.spec_from_file_location("asks_protocol", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PROTOCOL, path


def test_ctx_function_of_a_name_the_target_lacks_names_it_with_a_did_you_mean(tmp_path):
    """An audit: ``ctx.function('helpr')`` returned None, and calling it was said as the
    protocol's TypeError ('NoneType' object is not callable) or, in build, as arguments
    ctx.component refused."""
    stager = tmp_path / "helped_stager.py"
    stager.write_text(STAGER.read_text() + "\n\ndef token_count(n):\n    return n\n")
    protocol, path = _missing_function_protocol(tmp_path, "token_cout")
    seq = sample_sequence(protocol, 0, 1)
    code = load_code(target_ref(f"{stager}::TokenStager", None, ()), protocol.component)
    with pytest.raises(SchemaError) as raised:
        run_sequence(code, protocol, seq, "seen", OPTIONS)
    text = str(raised.value)
    assert raised.value.fix == messages.PROTOCOL_FUNCTION_MISSING[1]
    assert "(its functions: token_count)" in raised.value.problem
    assert "ctx.function('token_cout')" in text and "no module-level function 'token_cout'" \
        in text and messages.DID_YOU_MEAN.format(option="token_count") in text, text
    assert f"{path}:" in text         # the protocol's line that asked


def test_a_class_that_needs_a_shim_is_named_in_the_fix_never_the_loaders_accessor(tmp_path):
    """An audit: the fix said "load the function as
    'package.module:__stagecheck_component__'", a name of stagecheck's own loader."""
    stager = tmp_path / "engine_stager.py"
    stager.write_text(STAGER.read_text().replace(
        "import torch\n", "import torch\nfrom vllm.config import tokens_per_row\n").replace(
        "n = len(token_ids)", "n = tokens_per_row(len(token_ids))"))
    assert "tokens_per_row(" in stager.read_text()
    code = load_code(target_ref(f"{stager}::TokenStager", None, ()), "TokenStager")
    with pytest.raises(TargetLoadError) as raised:
        code.component()
    text = str(raised.value)
    assert "'package.module:TokenStager'" in text, text
    assert "__stagecheck" not in text


def _result(ran: set, sequences: int = 3, steps: int = 7) -> ProtocolResult:
    result = ProtocolResult("token-stager", None, "x.py::TokenStager",
                            ProtocolConfig(sequences=max(1, sequences)))
    result.sequences_run, result.steps_run, result.ran = sequences, steps, set(ran)
    return result


def test_what_no_sequence_ran_is_noted_from_the_traces():
    protocol = _example()
    result = _result(set(), 0, 0)
    ran = Trace(ops=[{"step": -1, "op": "build", "completion": "", "outcome": "raised X",
                      "in_flight": 0, "hazards": [], "result": None}])
    note_ran(result, 4, [(ran.to_wire(), ran.to_wire())])
    result.sequences_run = 1
    assert result.steps_run == 4
    never = never_ran(protocol, result)     # the build raised: nothing of the step ran
    assert never == {"operations": [op.name for op in protocol.operations],
                     "device_work": list(protocol.device_work), "sequences": 1, "steps": 4,
                     "cut_short": 1}
    # every run ended early: the warning says the operations were not reached (was: "make
    # its when true", when the build had raised in every run)
    lines = never_ran_lines(never)
    assert lines and all(messages.PROTOCOL_NEVER_REACHED in line for line in lines), lines
    step = Trace(ops=[{"step": 0, "op": protocol.operations[0].name, "completion": "lazy",
                       "outcome": None, "in_flight": 1, "hazards": [], "result": None}],
                 reads=[{"step": 0, "op": protocol.operations[0].name,
                         "work": protocol.device_work[0], "values": {}}])
    note_ran(result, 2, [(step.to_wire(), step.to_wire())])
    assert never_ran(protocol, result)["operations"] == [
        op.name for op in protocol.operations[1:]]
    assert never_ran(protocol, result)["cut_short"] == 1     # the second reached its end
    # some sequence's run reached its end: the when is the likely cause, as before
    some = {"operations": ["x"], "device_work": [], "sequences": 2, "steps": 5, "cut_short": 1}
    (line,) = never_ran_lines(some)
    assert messages.PROTOCOL_NEVER_RAN_WHY["operation"] in line
    assert messages.PROTOCOL_NEVER_REACHED in never_ran_lines(dict(some, cut_short=2))[0]
    # the campaign's report shows the findings below the warning; protocol check shows
    # none, only the command that reports them (was: "the error findings above", in both)
    assert "findings below" in messages.PROTOCOL_NEVER_REACHED
    assert messages.PROTOCOL_NEVER_REACHED_CHECK in never_ran_lines(
        dict(some, cut_short=2), "of the dry run", messages.PROTOCOL_NEVER_REACHED_CHECK)[0]
    assert never_ran(protocol, result)["device_work"] == list(protocol.device_work[1:])


def test_the_reports_warn_of_an_operation_and_device_work_that_never_ran():
    """An audit: an operation whose ``when`` was false at every step let a racy target
    pass with 'HOLDS THE PROTOCOL', and nothing said the operation never ran."""
    protocol = _example()
    result = _result({("operation", op.name) for op in protocol.operations[1:]})
    result.never_ran = never_ran(protocol, result)
    first = protocol.operations[0].name
    assert result.never_ran["operations"] == [first]
    report = render_protocol(result)
    warning = messages.PROTOCOL_NEVER_RAN.format(
        what="operation", name=first, sequences=3, steps=7, run="run",
        why=messages.PROTOCOL_NEVER_RAN_WHY["operation"])
    assert warning in report.splitlines(), report
    assert report.index(warning) < report.index("verdict: ")
    for work in protocol.device_work:
        assert f"warning: device work {work!r} never ran in the 3 step sequence(s)" in report
    document = json.loads(json.dumps(protocol_json_document(result)))
    assert document["never_ran"] == {"operations": [first],
                                     "device_work": list(protocol.device_work),
                                     "sequences": 3, "steps": 7, "cut_short": 0}
    # everything ran: no warning, and empty lists
    every = _result({("operation", op.name) for op in protocol.operations}
                    | {("device work", w) for w in protocol.device_work})
    every.never_ran = never_ran(protocol, every)
    assert "warning: " not in render_protocol(every)
    assert protocol_json_document(every)["never_ran"]["operations"] == []
    assert never_ran_lines(every.never_ran) == [] and never_ran_lines(None) == []


class _Reruns:
    """A runner whose reruns of one sequence give the traces it was made with, in order."""

    def __init__(self, wires: list) -> None:
        self.wires, self.asked = wires, []

    def run(self, batch):
        self.asked.append(len(batch))
        return [(index, [(wire, wire)]) for (index, _), wire in zip(batch, self.wires)]


def test_a_protocol_that_moves_only_now_and_then_is_refused_when_any_rerun_moves():
    """A difference between runs is checked against several reruns of its sequence
    (``UNSTEADY_RUNS``), not one: a ``when`` or a result that changes only now and then
    agreed with itself on the first rerun and gave a finding against the code."""
    from stagecheck.oracles.protocol.campaign import UNSTEADY_RUNS, _Search

    protocol = _example()
    seq = sample_sequence(protocol, 0, 1)
    code = load_code(target_ref(f"{STAGER}::TokenStager", None, ()), protocol.component)
    wire = run_sequence(code, protocol, seq, "meant", OPTIONS).to_wire()
    trace = Trace.from_wire(wire)
    moved = Trace.from_wire(wire)
    moved.ops = trace.ops[:-1]                        # the last operation did not run
    steady, unsteady = [wire] * UNSTEADY_RUNS, [wire] * (UNSTEADY_RUNS - 1) + [moved.to_wire()]
    assert UNSTEADY_RUNS >= 3
    pair = ProtocolResult(protocol.name, "old.py::Runner", "new.py::Runner", ProtocolConfig())
    itself = ProtocolResult(protocol.name, "old.py::Runner", "old.py::Runner", ProtocolConfig())
    for reruns, refused, result, said in (
            (steady, False, pair, ""),
            (unsteady, True, pair, "protocol {!r}: the baseline's two runs of the same step"),
            # a target against itself (protocol check's self-run): no baseline to name
            (unsteady, True, itself, "protocol {!r}: two runs of the same step sequence")):
        runner = _Reruns(reruns)
        search = _Search(protocol, ["baseline"], None, runner, ProtocolConfig(), result, 0.0,
                         None, None)
        if refused:
            with pytest.raises(SchemaError) as raised:
                search._refuse_unsteady(seq, [(wire, wire)])
            assert said.format(protocol.name) in str(raised.value)
        else:
            search._refuse_unsteady(seq, [(wire, wire)])      # steady: nothing refused
        assert runner.asked == [UNSTEADY_RUNS]


def test_a_protocol_file_takes_its_name_after_two_colons_as_a_target_does(tmp_path):
    """``--protocol p.py::NAME`` (the form of ``target.py::name``) was refused as "has no
    Protocol named ':PROTOCOL'"; both forms name the file's protocol."""
    path = tmp_path / "p.py"
    path.write_text(EXAMPLE.read_text() + "\nOTHER = PROTOCOL\n")
    for spec in (f"{path}::PROTOCOL", f"{path}:PROTOCOL", f"{path}::OTHER", str(path)):
        assert load_protocol(spec).name == _example().name, spec
    with pytest.raises(SchemaError) as missing:
        load_protocol(f"{path}::NOPE")
    assert "has no Protocol named 'NOPE'" in str(missing.value)


def test_a_misspelt_keyword_of_a_declaration_is_refused_with_the_one_it_meant(tmp_path):
    """``Protocol(operatons=...)`` was refused with Python's TypeError alone."""
    source = EXAMPLE.read_text()
    for old, new, meant in (("Protocol(", "Protocol(operatons=(), ", "operations"),
                            ('Operation("stage", stage, ', 'Operation("stage", stage, wen=1, ',
                             "when")):
        assert old in source
        path = tmp_path / f"{meant}.py"
        path.write_text(source.replace(old, new, 1))
        with pytest.raises(SchemaError) as raised:
            load_protocol(str(path))
        assert f"(did you mean keyword {meant}?)" in str(raised.value)


def test_a_declaration_without_a_part_it_needs_names_the_part(tmp_path):
    """``Protocol(...)`` without ``build`` was refused with Python's TypeError alone."""
    source = EXAMPLE.read_text()
    assert "    build=build,\n" in source
    path = tmp_path / "nobuild.py"
    path.write_text(source.replace("    build=build,\n", "", 1))
    with pytest.raises(SchemaError) as raised:
        load_protocol(str(path))
    assert messages.PROTOCOL_PART_MISSING.format(cls="Protocol", parts="build=...") \
        in str(raised.value)


def test_a_misspelt_built_in_protocol_name_says_the_one_it_meant():
    with pytest.raises(SchemaError) as raised:
        load_protocol("input-prep-evnt")
    assert "(did you mean input-prep-event?)" in str(raised.value)
    with pytest.raises(SchemaError) as far:
        load_protocol("frobnicate")
    assert "did you mean" not in str(far.value)


def test_a_schedule_read_finding_is_named_by_the_argument_whose_read_moved():
    """Two bugs of one device work (``temperature[0]`` and ``input_ids[1]`` of
    ``_model_forward``) had one finding id: the field named the work alone."""
    from stagecheck.spec.protocol_invariants import _reads

    def traces(arg, index):
        values = {"temperature": [0.7], "input_ids": [1, 2]}
        read = {"step": 0, "op": "execute_model", "work": "_model_forward", "values": values}
        moved = dict(values, **{arg: [v + 1 if k == index else v
                                      for k, v in enumerate(values[arg])]})
        return Trace(reads=[read]), Trace(reads=[dict(read, values=moved)])

    found = {arg: _reads(*traces(arg, index), "candidate") for arg, index in
             (("temperature", 0), ("input_ids", 1))}
    assert [f.field for f in found["temperature"]] == ["_model_forward(temperature)"]
    assert [f.field for f in found["input_ids"]] == ["_model_forward(input_ids)"]
    assert found["temperature"][0].id != found["input_ids"][0].id
