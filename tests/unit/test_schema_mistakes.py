"""Schema mistakes that would otherwise turn into wrong verdicts: a misspelt input in a
derivation (every slot silently unchecked), a build that never makes a staged field's
buffer (identical code reported DIFFERENT), an unknown buffer name, a derivation that
never yields a value."""

import pathlib
import types

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.options import CAPACITY_LIMIT
from stagecheck.oracles.schemas import check_schema
from stagecheck.spec.scenario import RequestView, StagingScenario, UnknownInput
from stagecheck.spec.invariants import expected_value
from stagecheck.spec.schema_mistakes import SchemaCodeFailed, StandIn, StandInUnsupported

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples" / \
    "sample_positions_schema.py"


def _schema(edit: tuple[str, str]):
    """The docs' example schema with one text edit."""
    source = EXAMPLE.read_text()
    old, new = edit
    assert old in source
    module = types.ModuleType("edited_schema")
    exec(compile(source.replace(old, new), str(EXAMPLE), "exec"), module.__dict__)
    return module.SCHEMA


def test_the_unedited_example_is_sound():
    assert check_schema(_schema(("", ""))) == []


def test_a_misspelt_input_in_derive_is_a_schema_error():
    problems = check_schema(_schema(("lambda q: q.num_computed_tokens +",
                                     "lambda q: q.num_computd_tokens +")))
    assert problems and "sample_pos" in problems[0] and "num_computd_tokens" in problems[0]


def test_a_misspelt_name_is_not_read_as_a_missing_request():
    s = StagingScenario.from_dict({
        "capacity": 2, "num_reqs": 1, "req_ids": ["r"], "inputs": {"a": {"r": 1}},
        "initial_cpu": {}, "initial_gpu": {}})
    view = RequestView(s, 0, "r")
    assert view.a == 1
    with pytest.raises(UnknownInput) as info:
        view.b
    assert not isinstance(info.value, KeyError) and "'b'" in str(info.value)
    for read in (lambda: view.get("b"), lambda: view.has("b"), lambda: view.input("b")):
        with pytest.raises(UnknownInput):
            read()


def test_a_build_that_never_makes_a_staged_buffer_is_a_schema_error():
    problems = check_schema(_schema((
        'num_drafts_buf=b.buffer("num_drafts_buf"))', "num_drafts_buf=None)")))
    assert problems and "num_drafts_buf" in problems[0] and "b.buffer" in problems[0]


def test_an_unknown_buffer_name_names_the_declared_ones():
    problems = check_schema(_schema(('b.buffer("sample_pos_buf")', 'b.buffer("sample_pos")')))
    assert problems and "'sample_pos'" in problems[0] and "sample_pos_buf" in problems[0]


def test_a_derive_that_never_gives_a_value_is_a_schema_error():
    problems = check_schema(_schema(('lambda q: len(q.get("spec_decode_tokens", []))',
                                     'lambda q: {}["x"]')))
    assert problems and "num_drafts" in problems[0] and "no value" in problems[0]


class _Tensor(StandIn):
    def __init__(self):
        self.shape = (2, 3)


@pytest.mark.parametrize("use", [lambda t: t[0], lambda t: t.tolist(), lambda t: len(t),
                                 lambda t: t + 1, lambda t: list(t), lambda t: int(t)])
def test_a_stand_in_refuses_what_it_does_not_model(use):
    t = _Tensor()
    assert t.shape == (2, 3)
    with pytest.raises(StandInUnsupported) as info:
        try:
            use(t)
        except Exception:     # a target's broad except cannot hide it
            pytest.fail("caught as an Exception")
    assert info.value.stand_in == "_Tensor"


def test_a_column_shortcut_is_checked_against_derive_slot_by_slot():
    derive = '"len(scheduled_spec_decode_tokens.get(r, []))"'
    right = (derive, derive + ', column=lambda inputs, live: '
             '[len(inputs["spec_decode_tokens"].get(r, [])) for r in live]')
    assert check_schema(_schema(right)) == []
    off_by_one = (derive, derive + ', column=lambda inputs, live: '
                  '[len(inputs["spec_decode_tokens"].get(r, [])) + 1 for r in live]')
    problems = check_schema(_schema(off_by_one))
    assert problems and "num_drafts" in problems[0] and "column gives" in problems[0] \
        and "derive gives" in problems[0]
    short = (derive, derive + ", column=lambda inputs, live: [0]")
    problems = check_schema(_schema(short))
    assert problems and "values for" in problems[0] and "live requests" in problems[0]


def test_slot_alignment_reads_the_column_where_a_field_gives_one():
    from dataclasses import replace

    from stagecheck.spec.invariants import expected_column
    from stagecheck.oracles.sample import sample_scenario
    from stagecheck.spec.schemas import BUILTIN_SCHEMAS
    schema = BUILTIN_SCHEMAS["mamba-postprocess"]
    draft = schema.field("draft")
    assert draft.column is not None
    for k in range(40):
        s = sample_scenario(schema, 0, k)
        profile = schema.profiles()[0]
        by_column = expected_column(profile, s, draft)
        by_slot = expected_column(profile, s, replace(draft, column=None))
        assert by_column == by_slot


def test_a_column_without_derive_or_not_callable_is_refused():
    field = ('lambda q: len(q.get("spec_decode_tokens", [])),\n'
             '          "len(scheduled_spec_decode_tokens.get(r, []))"')
    no_derive = (field, 'None, "not checked", column=lambda inputs, live: [0] * len(live)')
    problems = check_schema(_schema(no_derive))
    assert problems and "num_drafts" in problems[0] and "derive is None" in problems[0]
    not_callable = (field, field + ", column=3")
    problems = check_schema(_schema(not_callable))
    assert problems and "column must be a function" in problems[0]


# an audit, writing schemas from docs/schemas.md alone: three declarations that schema
# check passed (exit 0), each of which made every later run wrong or stuck

def test_a_field_whose_derived_values_do_not_fit_its_dtype_is_named():
    # values up to 2**40 staged as int32: every correct function 'raised OverflowError'
    problems = check_schema(_schema(('Input("num_scheduled_tokens", values=Values(1, 2**20))',
                                     'Input("num_scheduled_tokens", values=Values(1, 2**40))')))
    head = messages.SCHEMA_DERIVE_UNFIT.split("{value!r}")[0].format(name="sample_pos")
    assert problems and problems[0].startswith(head) and "int32 cannot hold" in problems[0]


def test_a_list_length_with_the_bounds_swapped_is_named():
    # was: 'generate: drawing a scenario raised ValueError: low > high; fix the generate
    # hook', for a schema with no generate hook
    problems = check_schema(_schema(('dtype="int-list"', 'dtype="int-list", length=(5, 2)')))
    assert problems == [messages.SCHEMA_LENGTH_BAD.format(name="spec_decode_tokens",
                                                          length=(5, 2))]


@pytest.mark.parametrize("capacity", [0, CAPACITY_LIMIT + 1])
def test_a_max_capacity_outside_what_the_option_takes_is_named(capacity):
    # 0 ran as 1; 10**7 was 'did not finish loading and its dry run ... (a hang)'
    problems = check_schema(_schema(("inputs=INPUTS,", f"max_capacity={capacity}, "
                                                       "inputs=INPUTS,")))
    assert problems == [messages.SCHEMA_MAX_CAPACITY_BAD.format(value=capacity,
                                                                limit=CAPACITY_LIMIT)]


def test_a_derive_that_raises_on_an_out_of_contract_scenario_is_named():
    # an audit: the built-in specdec-backup-tokens derive raised IndexError on a breach
    # only, which schema check (in-contract dry run) passed and every run then stopped on
    problems = check_schema(_schema((
        "lambda q: len(q.get(\"spec_decode_tokens\", []))",
        "lambda q: len(q.get(\"spec_decode_tokens\", [])) + [0][q.num_scheduled_tokens "
        "> 2**20]")))
    head = messages.SCHEMA_DERIVE_BREACH.split("{error}")[0].format(name="num_drafts")
    assert problems and problems[0].startswith(head) and "IndexError" in problems[0]


# an audit: two schema mistakes that schema check passed and a run then blamed on the code

@pytest.mark.parametrize("derive,said", [('str(len(q.get("spec_decode_tokens", [])))', "'"),
                                         ('len(q.get("spec_decode_tokens", [])) / 2', "0.5")])
def test_a_derive_that_returns_what_no_slot_holds_is_a_schema_error(derive, said):
    """A derive returning a string (or a fraction) for an int32 field was a slot_alignment
    error against every correct function ("holds 0, expected '0'")."""
    problems = check_schema(_schema(('lambda q: len(q.get("spec_decode_tokens", [])),',
                                     f"lambda q: {derive},")))
    head = messages.SCHEMA_DERIVE_TYPE.split("{said}")[0].format(name="num_drafts")
    assert problems and problems[0].startswith(head + "returned " + said), problems
    assert "which its int32 buffer cannot hold" in problems[0]


def test_a_derive_value_no_slot_holds_is_said_of_its_own_slot():
    """The slot the refusal names is the slot derived (was: slot 0 for any slot, where a
    single value was checked)."""
    s = StagingScenario.from_dict({
        "capacity": 2, "num_reqs": 2, "req_ids": ["a", "b"], "inputs": {},
        "initial_cpu": {}, "initial_gpu": {}})
    field = types.SimpleNamespace(name="x", dtype="int32", derive=lambda q: "1")
    with pytest.raises(SchemaCodeFailed) as refused:
        expected_value(s, field, 1, "b")
    assert refused.value.what == "field 'x': derive (slot 1, 'b')" and refused.value.returned
