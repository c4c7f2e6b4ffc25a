"""The protocol run's options: ``ProtocolConfig`` checked by the table's options, built from
the command line's values, and the protocol a target's name chooses."""

import pytest

from stagecheck.oracles.commands.protocol import chosen_protocol
from stagecheck.oracles.errors import UsageError
from stagecheck.oracles.options import OPTIONS, PROTOCOL_FIELDS, ProtocolConfig, options_of


@pytest.mark.parametrize("field,value", [("sequences", 0), ("seed", "x"), ("device", "tpu"),
                                         ("timeout", -1), ("busy_cycles", -1),
                                         ("max_capacity", 5000), ("steps", 0), ("jobs", 0),
                                         ("batch", 0), ("shrink", "yes"), ("shims", [3])])
def test_a_bad_field_is_a_usage_error_naming_it(field, value):
    with pytest.raises(UsageError) as caught:
        ProtocolConfig(**{field: value})
    assert caught.value.option == field


def test_the_fields_take_the_tables_checks_and_limits():
    assert ProtocolConfig(sequences="12", timeout="2").sequences == 12
    with pytest.raises(UsageError) as caught:
        ProtocolConfig(max_capacity=OPTIONS["max_capacity"].limit + 1)
    assert f"{OPTIONS['max_capacity'].limit:,}" in str(caught.value)


def test_from_values_reads_the_options_a_protocol_run_reads():
    values = {OPTIONS[o].field: None for o in PROTOCOL_FIELDS.values()}
    values.update(examples=7, seed=3, device="cpu", timeout=1.5, shims=("s.py",))
    config = ProtocolConfig.from_values(values)
    assert (config.sequences, config.seed, config.timeout, config.shims) == (7, 3, 1.5,
                                                                             ("s.py",))
    assert config.busy_cycles == 0 and config.max_capacity == 8     # left at no value
    cuda = ProtocolConfig.from_values({**values, "device": "cuda"})
    assert cuda.busy_cycles == 1_000_000          # the run's default on cuda, as one call's


def test_protocol_is_one_option_of_diff_and_spec():
    assert [o.name for o in options_of("diff") if o.field == "protocol"] == ["protocol"]
    assert [o.name for o in options_of("spec") if o.field == "protocol"] == ["protocol"]
    assert [o.name for o in options_of("replay") if o.field == "protocol"] == \
        ["replay_protocol"]


@pytest.mark.parametrize("target,chosen", [
    ("f.py::GPUModelRunner.synchronize_input_prep", "input-prep-event"),
    ("f.py::GPUModelRunner._copy_valid_sampled_token_count", "valid-count-readback"),
    ("pkg.mod:GPUModelRunner._dummy_run", "input-prep-event"),
    ("f.py::stage_postprocess_inputs_to_gpu", None),   # a staging schema describes it
    ("single-loop", None),
    ("f.py::TokenStager", None),
])
def test_the_targets_name_chooses_a_builtin_protocol_only_where_one_fits(target, chosen):
    assert chosen_protocol({}, None, target)[0] == chosen


@pytest.mark.parametrize("target", ["f.py::GPUModelRunner", "f.py::GPUModelRunner.execute_model"])
def test_a_name_several_protocols_drive_is_a_usage_error_naming_them(target):
    with pytest.raises(UsageError) as raised:         # four protocols drive the class
        chosen_protocol({}, None, target, "spec")
    assert raised.value.where == "argument TARGET"
    assert "(condense-inflight-d2h, input-prep-event, mamba-align-steps, " \
        "valid-count-readback)" in raised.value.problem
    assert chosen_protocol({"protocol": "input-prep-event"}, None, target)[0] == \
        "input-prep-event"


def test_an_explicit_protocol_or_schema_decides():
    method = "f.py::GPUModelRunner.synchronize_input_prep"
    assert chosen_protocol({"protocol": "x.py"}, None, method) == ("x.py", None)
    assert chosen_protocol({"schema": "mamba-postprocess"}, None, method) == (None, None)


def test_targets_that_choose_different_protocols_are_a_usage_error():
    with pytest.raises(UsageError):
        chosen_protocol({}, "a.py::GPUModelRunner._dummy_run",
                        "b.py::GPUModelRunner._copy_valid_sampled_token_count")


# -------------------------------------------------- assert_protocol's keywords (the fixture)

def _fixture_problems(options, loaded=None, protocol="input-prep-event"):
    from stagecheck.oracles.fixture_protocol import protocol_keyword_problems
    return protocol_keyword_problems(options, protocol, loaded)


def test_the_fixture_takes_exactly_the_options_a_protocol_run_reads():
    from stagecheck.oracles.options import protocol_fixture_options
    assert protocol_fixture_options() == ["gpu_busy_cycles", "jobs", "max_capacity", "shims",
                                          "timeout"]
    assert _fixture_problems({"timeout": 2, "gpu_busy_cycles": 0, "jobs": 2,
                              "shims": ["s.py"], "max_capacity": 4}) == []


def test_each_bad_keyword_of_the_fixture_is_one_line_naming_it():
    from stagecheck.oracles import messages
    problems = _fixture_problems({"bogus": 3, "kernel": "always", "timeout": -1,
                                  "steps": 2, "jobs": 0})
    assert len(problems) == 5                       # one line per keyword, sorted
    assert [p.split(":")[0] for p in problems] == [
        "keyword bogus", "keyword jobs", "keyword kernel", "keyword steps", "keyword timeout"]
    assert problems[0].startswith("keyword bogus: " + messages.FIXTURE_PROTOCOL_UNKNOWN[0]
                                  .format(value="bogus", hint=""))
    (misspelt,) = _fixture_problems({"timout": 2})
    assert misspelt.startswith("keyword timout: unknown keyword timout= (did you mean "
                               "timeout?)"), misspelt
    assert "timeout=" in problems[0] and "TypeError" not in "".join(problems)
    assert "'always' does not apply to a protocol run" in problems[2]
    assert "--kernel" in problems[2] and "leave kernel= out" in problems[2]
    assert "leave steps= out" in problems[3]
    assert problems[4] == "keyword timeout: -1 is not a positive number of seconds; give e.g. 5"


def test_the_fixtures_max_capacity_applies_only_to_a_one_call_protocol():
    from stagecheck.oracles.protocol import load_protocol
    builtin = load_protocol("input-prep-event")
    (problem,) = _fixture_problems({"max_capacity": 2}, builtin)
    low, high = builtin.space.capacity
    assert problem.startswith("keyword max_capacity: 2 does not apply to protocol "
                              f"'input-prep-event': its step space draws capacities {low} to "
                              f"{high}")
    single = load_protocol("single-call:mamba-postprocess")
    assert _fixture_problems({"max_capacity": 2}, single) == []


def test_the_fixtures_config_is_the_command_lines():
    from stagecheck.oracles.fixture_protocol import protocol_config
    config = protocol_config(7, 3, "cuda", {"timeout": 2, "jobs": 2, "shims": ["s.py"],
                                            "gpu_busy_cycles": 5})
    assert (config.sequences, config.seed, config.timeout, config.jobs, config.shims,
            config.busy_cycles) == (7, 3, 2.0, 2, ("s.py",), 5)
    assert protocol_config(1, 0, "cpu", {}).busy_cycles == 0
    with pytest.raises(UsageError) as refused:     # device work queued on a CPU run
        protocol_config(1, 0, "cpu", {"gpu_busy_cycles": 5})
    assert refused.value.option == "gpu_busy_cycles" and "device 'cpu'" in str(refused.value)


def test_docs_pytest_md_lists_exactly_the_keywords_assert_protocol_takes():
    import pathlib
    import re

    from stagecheck.oracles.options import protocol_fixture_options
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "pytest.md").read_text()
    section = page.split("### Protocols: `assert_protocol`")[1].split("\n## ")[0]
    listed = section.split("`protocol_fixture_options()`):")[1].split(". They are")[0]
    assert sorted(re.findall(r"`([a-z_]+)`", listed)) == protocol_fixture_options()


def test_docs_pytest_md_lists_exactly_the_campaign_keywords_the_fixture_takes():
    # max_drafts was taken but not listed (an audit found it by the unknown-keyword message)
    import pathlib
    import re

    from stagecheck.oracles.options import fixture_options
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "pytest.md").read_text()
    own, _, rest = page.split("The keywords `assert_equivalent`, `assert_conforms` and `run` "
                              "take besides their own (")[1].partition(")")
    listed = rest.split("`fixture_options()`):")[1].split(". A bad value")[0]
    own_names = re.findall(r"`([a-z_]+)`", own)
    assert sorted(set(own_names) | set(re.findall(r"`([a-z_]+)`", listed))) == \
        sorted(set(fixture_options()) | {"strict", "shims"})


def test_the_fixtures_unknown_keyword_message_lists_its_own_keywords_too():
    import pytest

    from stagecheck.oracles.pytest_plugin import StagecheckFixture
    with pytest.raises(pytest.fail.Exception) as failed:
        StagecheckFixture().config(exampels=3)
    message = str(failed.value)
    assert "unknown option(s) exampels= (did you mean examples?)" in message
    for keyword in ("strict=", "shims=", "max_drafts=", "examples="):
        assert keyword in message, keyword
