"""A mistake in the user's protocol file is the protocol's error (a ``SchemaError``: exit 2
naming the part, its value and the fix), never a finding against the code under test.

Each fixture of ``tests/targets/protocols/_mistakes/`` runs one step sequence through the
fixed ``TokenStager`` in this process (``run_sequence``, as a worker runs it) and must
stop with the message its README names; the same sequence under the right protocol runs
clean, and the code under test raising in the same places stays an observation.
"""

import dataclasses
import importlib.util
import json
import pathlib
import re
import shlex

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import SchemaError, TargetLoadError
from stagecheck.oracles.protocol.component import load_code
from stagecheck.oracles.protocol.problems import dry_run_problems
from stagecheck.spec.protocols import BUILTIN_PROTOCOLS
from stagecheck.oracles.protocol.generate import sample_sequence
from stagecheck.oracles.protocol.run import run_sequence
from stagecheck.oracles.targets import target_ref
from stagecheck.spec.protocol import Operation

ROOT = pathlib.Path(__file__).resolve().parents[2]
MISTAKES = ROOT / "tests" / "targets" / "protocols" / "_mistakes"
STAGER = ROOT / "tests" / "targets" / "protocols" / "_machinery" / "fixed_token_stager.py"
EXAMPLE = ROOT / "docs" / "examples" / "token_stager_protocol.py"
OPTIONS = {"device": "cpu", "timeout": 10.0, "busy_cycles": 0}


def _protocol(path: pathlib.Path):
    """The file's PROTOCOL, imported as a worker imports it (its functions keep the file's
    name: that is how a mistake of the protocol is told from the target's)."""
    spec = importlib.util.spec_from_file_location(f"mistake_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PROTOCOL


def _run(protocol, target: str = f"{STAGER}::TokenStager", run: str = "seen"):
    seq = sample_sequence(protocol, 0, 1)
    code = load_code(target_ref(target, None, ()), protocol.component)
    return run_sequence(code, protocol, seq, run, OPTIONS)


def _catalog() -> dict[str, str]:
    """file -> the name of its message constant, from the README's table."""
    rows = re.findall(r"^\| `(\w+\.py)` \| .* \| `(\w+)` \|$",
                      (MISTAKES / "README.md").read_text(), re.M)
    return dict(rows)


def _pattern(template) -> str:
    """A regular expression of a message's problem: its fixed text, any field's value."""
    return ".*".join(re.escape(part) for part in re.split(r"\{[^}]*\}", template[0]))


def test_the_readme_lists_every_fixture_and_names_a_message_that_exists():
    catalog = _catalog()
    assert set(catalog) == {p.name for p in MISTAKES.glob("*.py")}
    assert all(isinstance(getattr(messages, name, None), tuple) for name in catalog.values())


@pytest.mark.parametrize("name", sorted(_catalog()))
def test_a_mistake_of_the_protocol_is_its_error_naming_the_part_and_the_fix(name):
    template = getattr(messages, _catalog()[name])
    with pytest.raises(SchemaError) as raised:
        _run(_protocol(MISTAKES / name))
    error = raised.value
    assert re.fullmatch(_pattern(template), error.problem), (error.problem, template[0])
    assert error.fix == template[1]
    text = str(error)
    if "RAISED" in _catalog()[name]:        # its own code: the protocol file and line
        assert re.search(re.escape(str(MISTAKES / name)) + r":\d+", text), text
    expected = {"device_work_names_tensor.py": ("'ids_gpu'", "a device tensor"),
                "row_order_missing.py": ("'input_batch.req_ids'", "'input_batch' is not there"),
                "operation_returns_device_tensor.py": ("operation 'stage'", "device tensor"),
                "observe_not_plain.py": ("observe returned a Snapshot object", "holds an address"),
                "when_raises.py": ("operations[0] ('stage').when raised AttributeError",),
                "when_not_bool.py": ("operations[0] ('stage').when returned 0 (not a bool)",),
                "build_misspelt_context.py": ("componnent",),
                "build_typeerror.py": ("TypeError: object of type 'int' has no len()",
                                       "build_typeerror.py:9"),
                "function_missing.py": ("ctx.function('token_ids')", "function_missing.py:12",
                                        "(its functions: none)"),
                "function_missing_in_build.py": ("ctx.function('make_stager')",
                                                 "function_missing_in_build.py:10"),
                "observe_raises.py": ("KeyError", "observe"),
                "build_returns_none.py": ("the build of protocol 'token-stager' returned None",
                                          "return the state")}.get(name, ())
    for part in expected:
        assert part in text, text


def test_the_right_protocol_runs_the_same_sequences_clean():
    trace = _run(_protocol(EXAMPLE))
    assert trace.failed() is None and trace.stopped is None and trace.ops


def test_the_code_under_test_raising_in_build_or_observe_stays_an_observation(tmp_path):
    """Only the protocol's own code is its mistake: the component's constructor raising,
    or a method of the state that observe calls raising, is what the run observed."""
    source = STAGER.read_text()
    raising = tmp_path / "raising_stager.py"
    raising.write_text(source.replace(
        "    def __init__(self, max_tokens, device, pin_memory=True):\n",
        "    def __init__(self, max_tokens, device, pin_memory=True):\n"
        "        raise ValueError('the component failed')\n"))
    assert raising.read_text() != source
    trace = _run(_protocol(EXAMPLE), f"{raising}::TokenStager")
    failed = trace.failed()
    assert failed["op"] == "build" and "ValueError: the component failed" in failed["outcome"]

    observed = tmp_path / "observed_stager.py"
    observed.write_text(source + "\n\ndef broken_count(state):\n    raise KeyError('count')\n")
    protocol = dataclasses.replace(_protocol(EXAMPLE), observe=_observer(tmp_path))
    trace = _run(protocol, f"{observed}::TokenStager")
    failed = trace.failed()
    assert failed["op"] == "observe" and "KeyError: 'count'" in failed["outcome"], failed


def _observer(tmp_path: pathlib.Path):
    """An observe in a file of its own that calls the target's function ``broken_count``."""
    path = tmp_path / "observer_protocol.py"
    path.write_text("def observe(ctx):\n    return ctx.function('broken_count')(ctx.state)\n")
    spec = importlib.util.spec_from_file_location("observer_protocol", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.observe


def test_a_target_method_the_class_lacks_is_a_load_error():
    code = load_code(target_ref(f"{STAGER}::TokenStager.nope", None, ()), "TokenStager")
    with pytest.raises(TargetLoadError) as raised:
        code.component()
    text = str(raised.value)
    assert "has no method 'nope'" in text and "embed, stage" in text
    # a method it has (or inherits) loads the class
    assert load_code(target_ref(f"{STAGER}::TokenStager.embed", None, ()),
                     "TokenStager").component().__name__ == "TokenStager"


@pytest.mark.parametrize("suffix", ["", ":OTHER"])
def test_a_replay_whose_protocol_file_moved_says_to_give_its_new_path(tmp_path, suffix):
    from stagecheck.oracles.report.protocol_replay import replay_protocol

    gone = tmp_path / "moved away" / "my_protocol.py"
    seq = sample_sequence(_protocol(EXAMPLE), 0, 1)
    replay = tmp_path / "finding.json"
    replay.write_text(json.dumps({
        "stagecheck_protocol_replay": 1, "replay_id": "no_copy_hazard-0", "device": "cpu",
        "protocol": f"{gone}{suffix}", "baseline": None,
        "candidate": f"{STAGER}::TokenStager", "shims": [],
        "finding": {"id": "no_copy_hazard-0", "scenario": seq.to_dict()}}))
    with pytest.raises(SchemaError) as raised:
        replay_protocol(str(replay))
    text = str(raised.value)
    assert f"the protocol file {str(gone)!r}" in text and "does not exist any more" in text
    assert text.endswith(f"stagecheck replay {shlex.quote(str(replay))} --protocol "
                         f"NEWPATH{suffix}"), text


def test_a_moved_protocol_files_fix_gives_the_targets_outside_the_repository_too(tmp_path):
    """The fix a moved protocol file's refusal gives also names a target outside the
    repository that the command line did not give (was: '--protocol NEWPATH' alone, which
    failed next on the untrusted target); one the command line gave is left out."""
    from stagecheck.oracles.report.protocol_replay import replay_protocol

    outside = tmp_path / "stager.py"
    outside.write_text(pathlib.Path(STAGER).read_text())
    replay = tmp_path / "finding.json"
    replay.write_text(json.dumps({
        "stagecheck_protocol_replay": 1, "replay_id": "no_copy_hazard-0", "device": "cpu",
        "protocol": str(tmp_path / "gone.py"), "baseline": None,
        "candidate": f"{outside}::TokenStager", "shims": [],
        "finding": {"id": "no_copy_hazard-0",
                    "scenario": sample_sequence(_protocol(EXAMPLE), 0, 1).to_dict()}}))
    with pytest.raises(SchemaError) as raised:
        replay_protocol(str(replay))
    assert str(raised.value).endswith(
        f"--protocol NEWPATH --candidate {shlex.quote(f'{outside}::TokenStager')}"), raised.value
    with pytest.raises(SchemaError) as given:
        replay_protocol(str(replay), candidate=f"{outside}::TokenStager")
    assert str(given.value).endswith("--protocol NEWPATH"), given.value


# ------------------------------------------------ the declaration's step space and checks

def _checked(**changes):
    from stagecheck.oracles.protocol.problems import check_protocol
    return check_protocol(dataclasses.replace(_protocol(EXAMPLE), **changes))


@pytest.mark.parametrize("space,expected", [
    ({"params": {"block_size": [4, 8]}},
     messages.PROTOCOL_PROBLEM_PARAM_VALUES.format(name="block_size", value=[4, 8])),
    ({"params": {"block_size": ()}},
     messages.PROTOCOL_PROBLEM_PARAM_VALUES.format(name="block_size", value=())),
    ({"params": [("block_size", (4,))]},
     messages.PROTOCOL_PROBLEM_PARAMS.format(value=[("block_size", (4,))])),
    ({"params": {"block size": (4,)}},
     messages.PROTOCOL_PROBLEM_PARAM_NAME.format(value="block size")),
    ({"temperatures": ()}, messages.PROTOCOL_PROBLEM_TEMPERATURES.format(value=())),
])
def test_a_step_space_mistake_names_its_part_and_the_fix(space, expected):
    from stagecheck.spec.protocol import StepSpace
    problems = _checked(space=StepSpace(**space))
    assert problems == [expected]
    part = "space.temperatures" if "temperatures" in space else "space.params"
    assert problems[0].startswith(part) and "give e.g. StepSpace(" in problems[0]


@pytest.mark.parametrize("statement", ["", "   ", None])
def test_a_check_without_a_statement_is_refused_naming_it(statement):
    from stagecheck.spec.protocol import ProtocolCheck
    check = ProtocolCheck("mine", statement, lambda seq, trace: [])
    assert _checked(checks=(check,)) == [messages.PROTOCOL_PROBLEM_CHECK_STATEMENT.format(
        k=0, value=statement, id="mine")]


def test_a_protocols_own_check_prints_its_statement_as_the_invariant():
    from stagecheck.oracles.report.protocol_text import protocol_finding_lines
    from stagecheck.spec.findings import Finding
    f = Finding("mine", "error", "row 0 read 2", side="candidate",
                extra={"kind": "mine", "statement": "Each row reads its count."})
    assert "  invariant: Each row reads its count." in protocol_finding_lines(f)
    bare = Finding("mine", "error", "row 0 read 2", side="candidate", extra={"kind": "mine"})
    assert not any(line.strip() == "invariant:" for line in protocol_finding_lines(bare))


def test_code_that_uses_what_device_work_returned_meets_a_limit_of_the_model(tmp_path):
    """Device work is queued, so under the model a call of it returns nothing: code that
    uses its result stops the run as a limit (exit 2, its message), not as a finding;
    code that ignores it (the fixed stager) runs clean."""
    source = STAGER.read_text()
    using = tmp_path / "using_stager.py"
    using.write_text(source.replace("        self.embed(self.ids_gpu[:n])\n",
                                    "        self.last = self.embed(self.ids_gpu[:n]).sum()\n"))
    assert using.read_text() != source
    with pytest.raises(SchemaError) as raised:
        _run(_protocol(EXAMPLE), f"{using}::TokenStager")
    error = raised.value
    assert re.fullmatch(_pattern(messages.PROTOCOL_DEVICE_RESULT_USED), error.problem)
    assert "'embed'" in error.problem and "its attribute .sum" in error.problem
    assert error.fix == messages.PROTOCOL_DEVICE_RESULT_USED[1]


def test_plain_data_is_read_the_same_every_run_and_other_objects_are_refused():
    """What an operation or observe returns is compared as plain data: dataclasses as their
    fields, values with a stable text as that text; an object whose text holds an address
    (it would differ between two runs of the same code) or a value that holds itself is
    the protocol's mistake."""
    import enum

    import numpy as np

    from stagecheck.oracles.protocol.results import NotPlain as _NotPlain, plain as _plain

    @dataclasses.dataclass
    class Counts:
        ids: list
        total: np.int64

    class Color(enum.Enum):
        RED = 1

    assert _plain(Counts([1, 2], np.int64(3))) == {"dataclass": "Counts", "ids": [1, 2],
                                                    "total": 3}
    assert _plain({"c": Color.RED, "s": {3, 1}}) == {"c": "<Color.RED: 1>", "s": [1, 3]}
    with pytest.raises(_NotPlain) as raised:
        _plain({"rows": [1, object()]})
    assert raised.value.args[0] == "the value['rows'][1]"
    assert raised.value.args[1].startswith("an object object (its text <object object at ")
    looped = [1]
    looped.append(looped)
    with pytest.raises(_NotPlain, match="holds itself"):
        _plain(looped)


def test_results_compare_equal_across_runs_nan_included_and_are_bounded():
    """NaN != NaN: a result holding one would differ from itself between the two runs of
    a correct target; it is read as the text 'nan'. A result of more than PLAIN_ITEMS
    values, characters of text or bytes is the protocol's mistake, not a worker out of
    memory."""
    from stagecheck.oracles.protocol.results import PLAIN_ITEMS, plain_result as _plain_result

    protocol = _protocol(EXAMPLE)
    nan = float("nan")
    first = _plain_result(protocol, {"x": nan, "rows": [[1.0, nan]], "t": nan}, "observe", 0)
    again = _plain_result(protocol, {"x": nan, "rows": [[1.0, nan]], "t": nan}, "observe", 0)
    assert first == again == {"x": "nan", "rows": [[1.0, "nan"]], "t": "nan"}
    assert _plain_result(protocol, b"\x01\xff", "observe", 0) == "01ff"
    for huge, said in (([0] * (PLAIN_ITEMS + 1), "values and characters"),
                       (bytes(PLAIN_ITEMS + 1), "bytes"),
                       ("x" * (PLAIN_ITEMS + 1), "values and characters"),
                       (["ab"] * (PLAIN_ITEMS // 2), "values and characters")):
        with pytest.raises(SchemaError) as raised:
            _plain_result(protocol, {"big": huge}, "observe", 3)
        assert re.search(rf"returned [\d,]+ {said} \(more than {PLAIN_ITEMS:,}",
                         str(raised.value)), str(raised.value)
        assert "observe returned" in str(raised.value) and "after step 3" in str(raised.value)


def _own_file(tmp_path: pathlib.Path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("part", ["observe", "operation"])
def test_a_loop_of_the_protocols_own_code_is_its_error_not_a_hang_of_the_target(tmp_path, part):
    """Every user-code call in a worker has a deadline, observe too; where the limit stops
    the protocol's own function in its own code, the protocol hung (exit 2, its file and
    line), and never a finding against the code under test."""
    module = _own_file(tmp_path, "looping_protocol", (
        "def observe(ctx):\n    while True:\n        pass\n\n"
        "def stage(ctx):\n    ctx.state.stage([1])\n    while True:\n        pass\n"))
    protocol = _protocol(EXAMPLE)
    if part == "observe":
        protocol = dataclasses.replace(protocol, observe=module.observe)
    else:
        protocol = dataclasses.replace(protocol, operations=(
            dataclasses.replace(protocol.operations[0], run=module.stage),))
    seq = sample_sequence(protocol, 0, 1)
    code = load_code(target_ref(f"{STAGER}::TokenStager", None, ()), protocol.component)
    with pytest.raises(SchemaError) as raised:
        run_sequence(code, protocol, seq, "seen", dict(OPTIONS, timeout=0.5))
    text = str(raised.value)
    said = "observe after step 0" if part == "observe" else "code for operation 'stage'"
    assert f"its own {said} did not return within 0.5 s" in text, text
    assert re.search(re.escape(str(tmp_path / "looping_protocol.py")) + r":\d+", text), text
    assert raised.value.fix == messages.PROTOCOL_CODE_HUNG[1]


def test_observe_calling_target_code_that_hangs_is_the_targets_hang(tmp_path):
    spinning = tmp_path / "spinning_stager.py"
    spinning.write_text(STAGER.read_text() + "\n\ndef spin(state):\n    while True:\n"
                        "        pass\n")
    module = _own_file(tmp_path, "spin_protocol",
                       "def observe(ctx):\n    return ctx.function('spin')(ctx.state)\n")
    protocol = dataclasses.replace(_protocol(EXAMPLE), observe=module.observe)
    seq = sample_sequence(protocol, 0, 1)
    code = load_code(target_ref(f"{spinning}::TokenStager", None, ()), protocol.component)
    trace = run_sequence(code, protocol, seq, "seen", dict(OPTIONS, timeout=0.5))
    failed = trace.failed()
    assert failed["op"] == "observe" and failed["outcome"] == "hung", failed


@pytest.mark.parametrize("run", ["seen", "meant"])
def test_device_work_that_hangs_is_the_targets_hang_within_the_limit(tmp_path, run):
    """Device work runs when the model completes it (at an operation's start, inside a
    synchronisation, at the run's end): wherever that is, a hang in it is stopped by the
    per-call limit and is the run's outcome, not a worker that never answers."""
    hanging = tmp_path / "hanging_embed_stager.py"
    hanging.write_text(STAGER.read_text().replace(
        "        return ids * 2", "        while True:\n            pass"))
    protocol = _protocol(EXAMPLE)
    seq = sample_sequence(protocol, 0, 1)
    code = load_code(target_ref(f"{hanging}::TokenStager", None, ()), protocol.component)
    trace = run_sequence(code, protocol, seq, run, dict(OPTIONS, timeout=0.5))
    failed = trace.failed()
    assert (failed or {}).get("outcome") == "hung" or "hung" in (trace.stopped or ""), \
        (failed, trace.stopped)


def test_a_device_work_path_listed_twice_is_a_problem_of_the_declaration():
    """Listing a method twice wrapped it twice (its reads noted twice, correct code
    condemned): the declaration says so instead."""
    from stagecheck.oracles.protocol.problems import check_protocol

    protocol = dataclasses.replace(_protocol(EXAMPLE), device_work=("embed", "embed"))
    assert check_protocol(protocol) == [
        messages.PROTOCOL_PROBLEM_DEVICE_WORK_TWICE.format(names="'embed'")]
    assert check_protocol(_protocol(EXAMPLE)) == []


def test_a_protocol_file_imports_its_names_from_stagecheck_spec():
    """docs/protocols.md: a protocol file may import stagecheck.spec's Protocol,
    Operation, StepSpace, ProtocolCheck and StandIn."""
    import stagecheck.spec as spec
    from stagecheck.spec import protocol, schema

    for name in ("Protocol", "Operation", "StepSpace", "ProtocolCheck"):
        assert getattr(spec, name) is getattr(protocol, name) and name in spec.__all__
    assert spec.StandIn is schema.StandIn and "StandIn" in spec.__all__


def test_cannot_build_names_the_class_the_target_names(tmp_path):
    other = tmp_path / "other_component.py"
    other.write_text(STAGER.read_text() + "\n\nclass Other:\n    def __init__(self):\n"
                     "        pass\n")
    protocol = _protocol(EXAMPLE)
    code = load_code(target_ref(f"{other}::Other", None, ()), protocol.component)
    with pytest.raises(SchemaError) as raised:
        run_sequence(code, protocol, sample_sequence(protocol, 0, 1), "seen", OPTIONS)
    assert "cannot build Other: TypeError" in str(raised.value), str(raised.value)


def test_a_folder_given_as_protocol_or_under_a_report_path_is_named_as_such(tmp_path):
    from stagecheck.oracles.protocol.load import load_protocol
    from stagecheck.oracles.report.files import probe_file

    with pytest.raises(SchemaError) as raised:
        load_protocol(str(tmp_path))
    assert raised.value.problem == messages.PROTOCOL_FOLDER[0].format(value=str(tmp_path))
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert probe_file(str(plain / "deeper" / "r.json")) == f"{str(plain)!r} is a file, not a folder"
    assert probe_file(str(tmp_path / "gone" / "r.json")) == \
        f"folder {str(tmp_path / 'gone')!r} does not exist"


def test_schema_or_protocol_code_that_raised_is_named_by_file_and_line(tmp_path):
    """A protocol's check (or a schema's derive) raising while the checker judges is
    exit 2 naming where in the user's file it raised."""
    from stagecheck.spec.schema_mistakes import SchemaCodeFailed

    module = _own_file(tmp_path, "raising_check", "def check(seq, trace):\n    return 1 / 0\n")
    try:
        module.check(None, None)
    except ZeroDivisionError as exc:
        failed = SchemaCodeFailed("checks[0] ('odd')", exc)
    assert failed.error == (f"ZeroDivisionError: division by zero at "
                            f"{tmp_path / 'raising_check.py'}:2")


def test_a_check_that_returns_no_list_is_said_to_return_it_not_to_raise():
    from stagecheck.spec.protocol import ProtocolCheck, Trace
    from stagecheck.spec.protocol_invariants import _check_messages
    from stagecheck.spec.schema_mistakes import SchemaCodeFailed
    check = ProtocolCheck("c1", "rows are fine", lambda seq, trace: "oops")
    with pytest.raises(SchemaCodeFailed) as raised:
        _check_messages(0, check, None, Trace(), "token-stager")
    assert str(raised.value) == ("protocol 'token-stager': checks[0] ('c1') returned a str "
                                 "'oops', not a list of messages (strings; an empty list "
                                 "where it holds)")
    assert raised.value.returned and "raised" not in str(raised.value)
    # a long answer is cut where it says so (was: a string cut open, its quote missing)
    check = ProtocolCheck("c1", "rows are fine", lambda seq, trace: "x; " * 60)
    with pytest.raises(SchemaCodeFailed) as raised:
        _check_messages(0, check, None, Trace(), "token-stager")
    assert "returned a str 'x; x; " in str(raised.value)
    assert "...', not a list" not in str(raised.value)
    assert "x...', not" not in str(raised.value) and "x..., not a list" in str(raised.value)


@pytest.mark.parametrize("part, change", [
    ("operations[0].run", lambda p: dataclasses.replace(
        p, operations=(Operation("stage", lambda state, step: None),))),
    ("operations[0].run", lambda p: dataclasses.replace(
        p, operations=(Operation("stage", lambda: None),))),
    ("observe", lambda p: dataclasses.replace(p, observe=lambda ctx, step: None)),
    ("build", lambda p: dataclasses.replace(p, build=lambda: None)),
])
def test_a_protocol_function_that_cannot_take_its_argument_is_a_problem_of_the_protocol(
        part, change):
    # before, the TypeError of the call read as the code under test's (exit 1)
    from stagecheck.oracles.protocol.problems import check_protocol
    problems = check_protocol(change(_protocol(EXAMPLE)))
    assert len(problems) == 1, problems
    assert problems[0].startswith(part) and "cannot be called with" in problems[0]
    assert "(e.g. def " in problems[0]
    assert check_protocol(_protocol(EXAMPLE)) == []


def test_a_check_message_is_read_as_plain_text_without_calling_its_own_methods():
    # a str subclass whose __str__ ends the process: rendered later in the checker, it
    # ended the run with exit 0; its text is taken once, as a plain str, without it
    import os as _os

    from stagecheck.spec.protocol import ProtocolCheck
    from stagecheck.spec.protocol_invariants import _check_messages

    class Hostile(str):
        def __str__(self):
            _os._exit(0)

        __repr__ = __format__ = __str__

    check = ProtocolCheck("c", "holds", lambda seq, trace: [Hostile("slot 3 is stale")])
    (message,) = _check_messages(0, check, None, None, "p")
    assert type(message) is str and message == "slot 3 is stale"

    class Listish(list):
        def __iter__(self):
            raise RuntimeError("never iterated")

    from stagecheck.spec.schema_mistakes import SchemaCodeFailed
    odd = ProtocolCheck("c", "holds", lambda seq, trace: Listish(["x"]))
    with pytest.raises(SchemaCodeFailed) as raised:
        _check_messages(0, odd, None, None, "p")
    assert "an object of type Listish" in str(raised.value)

    # a message of 30 MB went to stdout whole: it is shortened, saying by how much
    huge = ProtocolCheck("c", "holds", lambda seq, trace: ["x" * 3_000_000])
    (message,) = _check_messages(0, huge, None, None, "p")
    assert message == "x" * 2000 + "... (2998000 more characters)"


def test_a_protocol_file_that_raises_on_import_is_told_with_its_line(tmp_path):
    # Operation("execute", execute()) calls the operation while the file is imported: the
    # message gave the error but not where it was raised
    path = tmp_path / "called.py"
    path.write_text("from stagecheck.spec import Operation\n\n\ndef execute(ctx):\n"
                    "    pass\n\n\nOPERATIONS = (Operation('execute', execute()),)\n")
    from stagecheck.oracles.protocol import load_protocol
    with pytest.raises(SchemaError) as raised:
        load_protocol(str(path))
    assert "raised TypeError: execute() missing 1 required positional argument: 'ctx' at " \
           "line 8" in raised.value.problem
    assert raised.value.fix == messages.PROTOCOL_IMPORT[1]


@pytest.mark.parametrize("check_id", ["../../etc/x y\u202e", "ids/non-negative", "a b", "-x",
                                      "x" * 65, "dots.in.it"])
def test_a_check_id_that_is_not_identifier_like_is_refused_naming_it(check_id):
    # a check's id starts its findings' ids and replay file names: '../' lost the file,
    # '/' wrote into a sub-folder
    from stagecheck.spec.protocol import ProtocolCheck
    check = ProtocolCheck(check_id, "holds", lambda seq, trace: [])
    assert _checked(checks=(check,)) == [messages.PROTOCOL_PROBLEM_CHECK_ID.format(
        k=0, value=check_id)]


@pytest.mark.parametrize("check_id", ["mine", "ids-non-negative", "c1", "_x", "A_b-9"])
def test_identifier_like_check_ids_are_accepted(check_id):
    from stagecheck.spec.protocol import ProtocolCheck
    assert _checked(checks=(ProtocolCheck(check_id, "holds", lambda seq, trace: []),)) == []


def test_two_checks_with_one_id_are_refused_naming_the_id():
    # a check's id names its findings and replay files: two checks of one id would share
    # them, and a replay would run the wrong check
    from stagecheck.spec.protocol import ProtocolCheck
    checks = (ProtocolCheck("mine", "holds", lambda seq, trace: []),
              ProtocolCheck("other", "holds", lambda seq, trace: []),
              ProtocolCheck("mine", "holds too", lambda seq, trace: []))
    assert _checked(checks=checks) == [messages.PROTOCOL_PROBLEM_CHECK_TWICE.format(
        ids="'mine'")]


@pytest.mark.parametrize("path, guess", [("embd", "embed"), ("_embed", "embed"),
                                         ("nothing_like_it", None)])
def test_a_misspelt_device_work_path_says_the_closest_name(tmp_path, path, guess):
    # 'prefill_token_ids.apply_write_kernel' for '_apply_write_kernel' said only that the
    # state lacks it (found writing a protocol for vLLM's model runner v2 staged writes)
    source = (MISTAKES / "device_work_names_tensor.py").read_text()
    protocol = tmp_path / "misspelt_device_work.py"
    protocol.write_text(source.replace('device_work=("embed", "ids_gpu")',
                                       f'device_work=("{path}",)'))
    with pytest.raises(SchemaError) as raised:
        _run(_protocol(protocol))
    assert re.fullmatch(_pattern(messages.PROTOCOL_DEVICE_WORK_MISSING), raised.value.problem)
    said = messages.DID_YOU_MEAN.format(option=guess) if guess else "(did you mean"
    assert (said in raised.value.problem) == bool(guess), raised.value.problem


# ------------------------------------------------ the declaration's name and functions

@pytest.mark.parametrize("name", ["../x", "a/b", "..", "x..y", "-x", "token stager",
                                  "tok\x1b[31m", "x" * 101, "a\\b"])
def test_a_name_that_is_not_a_plain_name_is_refused_naming_it(name):
    shown = name if len(name) <= 100 else name[:100] + "..."
    assert _checked(name=name) == [messages.PROTOCOL_PROBLEM_NAME_CHARS.format(
        value=shown, most=100)]


@pytest.mark.parametrize("name", ["token-stager", "single-call:specdec-backup-tokens",
                                  "v2.token_stager", "x" * 100])
def test_a_plain_name_is_accepted(name):
    assert _checked(name=name) == []


def test_functions_that_name_nothing_are_refused_with_the_fix():
    problems = _checked(functions=())
    assert problems == [messages.PROTOCOL_PROBLEM_FUNCTIONS_EMPTY.format(value=())]
    assert problems[0].startswith("functions () names nothing")
    assert "functions=('TokenStager', 'stage')" in problems[0]


def test_operations_not_in_a_tuple_are_said_once_not_blamed_on_the_space():
    # an audit: a single Operation given as ``operations`` was said, then drawing the
    # sequences failed on it and that was said as "fix the space", a space that was right
    from stagecheck.oracles.protocol.problems import check_protocol
    protocol = BUILTIN_PROTOCOLS["input-prep-event"]
    broken = dataclasses.replace(protocol, operations=protocol.operations[0])
    said = check_protocol(broken)
    assert any("is not a non-empty tuple" in line for line in said), said
    assert dry_run_problems(broken) == []
