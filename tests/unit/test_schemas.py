"""Schema checks: every built-in schema passes them; each problem a schema can have is
named with its part and the fix; a schema file loads by path, and its errors are
``SchemaError`` (exit 2)."""

import dataclasses

import pytest

from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.schemas import check_declarations, check_schema, load_schema
from stagecheck.spec import StagingScenario
from stagecheck.spec.schema import (COPY_WHOLE, ID_SET, MAY_MISS, REQUIRED, TAIL_UNTOUCHED,
                                    Input, MissingPolicy, Values, tail_fill)
from stagecheck.spec.schemas import BUILTIN_SCHEMAS, schema_for_function
from stagecheck.spec.schemas.mamba_all_specdec import SCHEMA as SPECDEC
from stagecheck.spec.schemas.mamba_postprocess import SCHEMA as SEED


@pytest.mark.parametrize("name", sorted(BUILTIN_SCHEMAS))
def test_every_builtin_schema_is_sound_and_chosen_by_its_function_names(name):
    schema = BUILTIN_SCHEMAS[name]
    assert check_schema(schema) == []
    for function in schema.functions:
        assert schema_for_function(function) is schema


def _field(schema, **changes):
    return dataclasses.replace(schema, fields=(dataclasses.replace(schema.fields[0], **changes),)
                               + schema.fields[1:])


def _input(schema, name, **changes):
    return dataclasses.replace(schema, inputs=tuple(
        dataclasses.replace(i, **changes) if i.name == name else i for i in schema.inputs))


PROBLEMS = [
    (_input(SEED, "num_scheduled_tokens", values=Values(0, 10, special=(11,))),
     ["input 'num_scheduled_tokens'", "values.special 11", "widen the range or drop"]),
    (dataclasses.replace(SEED, inputs=SEED.inputs + (Input("get"),)),
     ["input 'get'", "request view has its own attribute", "rename the input"]),
    (_field(SPECDEC, tail=TAIL_UNTOUCHED, copy=COPY_WHOLE),
     ["field 'prev_last_idx'", "contradict", "TAIL_FREE", "tail_fill"]),
    (_field(SPECDEC, tail=tail_fill(2**31)),
     ["field 'prev_last_idx'", "fill value 2147483648 is not a int32 value"]),
    (_field(SEED, missing=MissingPolicy("finished")), ["missing.input 'finished'"]),
    (_field(SPECDEC, missing=MissingPolicy("finished_req_ids")),
     ["finished_req_ids' is of kind id-set", "per-request input"]),
    (_input(SEED, "mamba_state_idx", presence=REQUIRED),
     ["field 'state_idx'", "required", "never checked", "presence=MAY_MISS"]),
    (_field(SEED, missing=MissingPolicy("mamba_state_idx", applies="yes")),
     ["missing.applies must be a function"]),
]


@pytest.mark.parametrize("schema,words", PROBLEMS, ids=range(len(PROBLEMS)))
def test_a_declaration_problem_names_the_part_and_the_fix(schema, words):
    problems = check_declarations(schema)
    assert len(problems) == 1, problems
    for word in words:
        assert word in problems[0]


def test_a_missing_policy_condition_that_fails_is_named_by_the_dry_run():
    def broken(q):
        raise ZeroDivisionError("boom")
    schema = _field(SEED, missing=MissingPolicy("mamba_state_idx", applies=broken))
    (problem,) = check_schema(schema)
    assert "field 'state_idx': missing.applies raised ZeroDivisionError" in problem


def test_a_narrowed_missing_policy_applies_only_where_its_condition_holds():
    policy = MissingPolicy("idx", applies=lambda q: q.count > 1)
    s = StagingScenario(3, 2, ["req-a", "req-b"],
                        {"idx": {"req-a": 0}, "count": {"req-a": 5, "req-b": 1}})
    assert not policy.applies_to(s, 0, "req-a")       # it has the input
    assert not policy.applies_to(s, 1, "req-b")       # lacks it, but the condition is false
    s.inputs["count"]["req-b"] = 2
    assert policy.applies_to(s, 1, "req-b")
    del s.inputs["count"]["req-b"]                    # the condition cannot be read
    assert not policy.applies_to(s, 1, "req-b")
    assert "(when large)" in MissingPolicy("idx", applies_prose="(when large)").describe()


SCHEMA_FILE = '''
from stagecheck.spec.schema import Call, Field, Input, StagingSchema

def build(b, profile):
    return Call((b.buffer("buf"), b.req_ids(), b.scenario.num_reqs, b.table("value")))

MINE = StagingSchema(
    name="mine", summary="one value per slot", functions=("stage_mine",),
    parameters=("buf", "req_ids", "num_reqs", "values"),
    inputs=(Input("value"),),
    fields=(Field("value", "buf", "int32", lambda q: q.value, "values[r]"),),
    build=build)
BROKEN = StagingSchema(
    name="broken", summary="", functions=("f",), parameters=("a",), inputs=(),
    fields=(Field("x", "buf", "int16", None, "x"),), build=build)
'''


def test_a_schema_file_loads_by_path_and_name(tmp_path):
    path = tmp_path / "schema.py"
    path.write_text(SCHEMA_FILE)
    assert load_schema(f"{path}:MINE").name == "mine"
    with pytest.raises(SchemaError) as info:
        load_schema(str(path))                          # no SCHEMA in it
    assert "BROKEN, MINE" in str(info.value)
    with pytest.raises(SchemaError) as info:
        load_schema(f"{path}:BROKEN")
    assert "dtype 'int16' is not one of int32, int64, bool" in str(info.value)
    assert f"stagecheck schema check {path}:BROKEN" in str(info.value)
    # a file that defines no schema at all says what the name holds (was: "with one of:
    # none")
    (tmp_path / "five.py").write_text("SCHEMA = 5\n")
    with pytest.raises(SchemaError) as info:
        load_schema(str(tmp_path / "five.py"))
    assert "defines no StagingSchema (SCHEMA is of type int)" in str(info.value)
    assert "assign one: SCHEMA = StagingSchema(...)" in str(info.value)
    with pytest.raises(SchemaError) as info:
        load_schema(f"{tmp_path / 'five.py'}:OTHER")
    assert "(OTHER is not defined)" in str(info.value)


MANY_PROBLEMS = SCHEMA_FILE + '''
from stagecheck.spec.schema import COPY_WHOLE, Values
BROKEN = StagingSchema(
    name="broken", summary="", functions=("f",), parameters=("a",),
    inputs=(Input("a", values=Values(5, 1)), Input("a")),
    fields=(Field("x", "buf", "int16", None, "x", copy=COPY_WHOLE),), build=build)
'''


def test_schema_check_lists_every_problem_and_exits_2(tmp_path, capsys):
    from stagecheck.oracles.cli import main
    path = tmp_path / "schema.py"
    path.write_text(MANY_PROBLEMS)
    assert main(["schema", "check", f"{path}:BROKEN"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4, err
    assert all(line.startswith("stagecheck: error: schema 'broken': ") for line in err)
    assert main(["schema", "check", f"{path}:MINE"]) == 0
    assert main(["diff", "--schema", f"{path}:BROKEN", "legacy", "legacy"]) == 2
    assert "option --schema" in capsys.readouterr().err
    assert main(["schema", "check", str(tmp_path / "none.py")]) == 2
    assert "argument SCHEMA" in capsys.readouterr().err


def test_the_worked_example_of_the_docs_is_the_files_it_names_and_is_sound():
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[2]
    page = (root / "docs" / "schemas.md").read_text()
    schema_file = root / "docs" / "examples" / "sample_positions_schema.py"
    function = (root / "docs" / "examples" / "sample_positions.py").read_text()
    assert schema_file.read_text() in page
    assert function[function.index("def "):] in page
    assert len(schema_file.read_text().splitlines()) <= 40
    assert check_schema(load_schema(str(schema_file))) == []


def test_a_misspelt_builtin_schema_name_gets_the_closest_one():
    with pytest.raises(SchemaError) as raised:
        load_schema("mamba-postproces")
    assert "(did you mean mamba-postprocess?)" in str(raised.value)
    assert "built-in schemas are mamba-postprocess" in str(raised.value)
    with pytest.raises(SchemaError) as raised:       # nothing close: no guess
        load_schema("qqqq")
    assert "did you mean" not in str(raised.value)
