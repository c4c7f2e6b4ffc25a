"""One option table (issue 19, item 3): the parser, the [tool.stagecheck] keys, the JSON
settings, the reproduce line and every config object are derived from options.TABLE."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.cli import build_parser
from stagecheck.oracles.config import KEYS, load_config
from stagecheck.oracles.errors import ConfigError, UsageError
from stagecheck.oracles.mutants.runners import MutantsConfig
from stagecheck.oracles.commands import COMMANDS
from stagecheck.oracles.options import (LIMITS, OPTIONS, TABLE, BenchConfig,
                                        CampaignConfig, KernelConfig, ReplayConfig, RunOptions,
                                        SymbolicConfig, build, option_for, options_of,
                                        reproduce_flags, settings)

CONFIGS = {"diff": (CampaignConfig, RunOptions), "spec": (CampaignConfig, RunOptions),
           "symbolic": (SymbolicConfig,), "kernel": (KernelConfig,), "bench": (BenchConfig,),
           "mutants": (MutantsConfig,), "replay": (ReplayConfig,)}


def parsers() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    found = dict(sub.choices)
    # the options of 'protocol' are its 'check''s (the dry run loads a target)
    (nested,) = [a for a in found["protocol"]._actions
                 if isinstance(a, argparse._SubParsersAction)]
    found["protocol"] = nested.choices["check"]
    return found


def test_every_command_has_a_frozen_config_object_built_from_the_table():
    assert set(CONFIGS) | {"schema", "protocol"} == set(COMMANDS)   # no options: subcommands
    for o in TABLE:            # every option belongs to commands that exist
        assert set(o.commands) <= set(COMMANDS), o.name
    for command, classes in CONFIGS.items():
        for cls in classes:
            assert cls.__dataclass_params__.frozen, cls
            for f in dataclasses.fields(cls):
                if f.name not in ("run", "file", "control"):
                    assert option_for(command, f.name) is not None, (command, f.name)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_parser_of_each_command_has_exactly_its_options_of_the_table(command):
    parser = parsers()[command]
    flags = {s for a in parser._actions for s in a.option_strings if s.startswith("--")}
    flags.discard("--help")
    assert flags == {o.flag for o in options_of(command)}
    text = " ".join(parser.format_help().split())
    for option in options_of(command):
        assert option.flag in text
        if option.action == "value":      # every value's help says its default
            assert "(default: " in " ".join(option.help_text().split())
    defaults = parser.parse_args([w for w in ("a", "b") if command in ("diff", "symbolic",
                                                                        "bench")] +
                                 (["a"] if command in ("spec", "mutants", "replay", "protocol") else []))
    for option in options_of(command):
        if option.action == "value":
            assert getattr(defaults, option.dest) == option.default_text(), option.name


def test_the_timeout_default_is_in_diffs_help():   # issue 23, item 15
    text = " ".join(parsers()["diff"].format_help().split())
    assert "hang (default: 5)" in text


def test_config_keys_are_the_options_with_a_key_and_nothing_else(tmp_path, monkeypatch):
    assert set(KEYS) == {o.key for o in TABLE if o.key is not None}
    for key, spec in KEYS.items():
        option = next(o for o in TABLE if o.key == key)
        assert spec.commands == option.key_commands and spec.dest == option.dest
        assert set(spec.commands) <= set(option.commands)
    # an option without a key (its flag's spelling included) is refused as a key
    for key in ("json", "max-paths", "kernel-examples", "list"):
        (tmp_path / "pyproject.toml").write_text(f"[tool.stagecheck]\n{key} = 1\n")
        monkeypatch.chdir(tmp_path)
        with pytest.raises(ConfigError, match="is not a key of"):
            load_config()


def test_kernel_keeps_its_own_examples_default():
    assert "kernel" not in KEYS["examples"].commands
    assert OPTIONS["kernel_examples"].key is None and KernelConfig().examples == 100


@pytest.mark.parametrize("field,value,needle", [
    ("examples", 0, "is not a whole number >= 1"), ("timeout", float("inf"), "positive number"),
    ("max_capacity", 5000, "larger than 4,096"), ("kernel", "x", "is not one of auto"),
    ("deferred_copies", "yes", "is not true or false"), ("engine", "fast", "is not one of"),
])
def test_the_config_objects_refuse_what_the_options_refuse(field, value, needle):
    with pytest.raises(UsageError, match=needle) as caught:
        CampaignConfig.from_options(**{field: value})
    assert caught.value.option == field
    with pytest.raises(UsageError) as same:
        option_for("diff", field).check(field, value)
    assert str(same.value) == str(caught.value)


def test_symbolic_kernel_bench_and_replay_validate_their_fields():
    with pytest.raises(UsageError, match="positive number of seconds"):
        SymbolicConfig(timeout=0)
    with pytest.raises(UsageError, match="whole number >= 1"):
        SymbolicConfig(max_paths=0)
    with pytest.raises(UsageError, match="is not a device"):
        KernelConfig(device="tpu")
    with pytest.raises(UsageError, match="is not a device"):
        BenchConfig(device="gpu")
    with pytest.raises(UsageError, match="is not a device"):
        ReplayConfig("f.json", device="tpu")
    assert ReplayConfig("f.json", shims=["a.py"]).shims == ("a.py",)
    with pytest.raises(UsageError, match="0 is not a whole number >= 1") as caught:
        MutantsConfig(budget=0)
    assert caught.value.option == "budget"
    assert MutantsConfig(oracles="spec, differential").oracles == ("spec", "differential")


def test_limits_come_from_the_table():
    for o in TABLE:
        if o.limit is not None:
            assert LIMITS[o.field] == o.limit
    assert LIMITS["examples"] == 10_000_000 and LIMITS["max_capacity"] == 4096


@pytest.mark.parametrize("command", ["diff", "symbolic", "kernel", "bench", "mutants"])
def test_settings_name_every_option_of_the_command_with_a_settings_name(command):
    names = {o.setting for o in options_of(command, cli=False) if o.setting is not None}
    assert set(settings(command, {})) == names
    assert "json" not in names and "quiet" not in names


def test_reproduce_flags_say_what_differs_from_the_defaults_and_pinned_ones_always():
    defaults = {"examples": 300, "seed": 0, "timeout": 5.0, "deferred_copies": False,
                "out_of_contract": True, "shims": (), "engine": "batched"}
    words, left = reproduce_flags("diff", {"examples": 300, "seed": 4, "timeout": 2.5,
                                           "deferred_copies": True, "out_of_contract": False,
                                           "shims": ("a.py",), "engine": "hypothesis"},
                                  defaults)
    assert words == ["--examples", "300", "--seed", "4", "--timeout", "2.5",
                     "--deferred-copies", "--no-out-of-contract", "--shim", "a.py"]
    assert left == {"engine": "hypothesis"}
    # every flag the line writes parses back to the same values
    args = build_parser().parse_args(["diff", "a", "b", *words])
    assert (args.seed, args.timeout, args.deferred_copies, args.out_of_contract) == \
        ("4", "2.5", True, False)


def test_the_cli_builds_each_config_from_the_table():
    args = build_parser().parse_args(["mutants", "t", "--budget", "20", "--no-out-of-contract",
                                      "--oracles", "spec"])
    values = {o.field: getattr(args, o.dest) for o in options_of("mutants")}
    config = build(MutantsConfig, "mutants", values)
    assert (config.budget, config.out_of_contract, config.oracles) == (20, False, ("spec",))
    assert config.campaign().examples == 20 and config.campaign().out_of_contract is False


def test_messages_of_the_checks_are_constants():
    assert messages.TOO_LARGE[0].startswith("{value!r} is larger than")


def test_a_timeout_below_the_floor_runs_as_the_floor_and_the_settings_say_so():
    # the JSON settings once kept --timeout 0.05 while every call ran under 0.1 s
    from stagecheck.oracles.options import TIMEOUT_FLOOR, ProtocolConfig
    assert TIMEOUT_FLOOR == 0.1
    assert RunOptions(timeout=0.05).timeout == TIMEOUT_FLOOR
    assert RunOptions(timeout=0.25).timeout == 0.25
    assert ProtocolConfig(timeout=1e-6).timeout == TIMEOUT_FLOOR
    assert settings("diff", dataclasses.asdict(RunOptions(timeout=0.01)))["timeout"] == 0.1
    with pytest.raises(UsageError):
        RunOptions(timeout=0)                        # nothing is still refused


def test_a_number_of_seconds_too_large_for_a_float_is_a_usage_error():
    # run.timeout = 10**400 in an edited replay file was an internal error (OverflowError)
    from stagecheck.oracles.options import seconds
    with pytest.raises(UsageError):
        seconds("timeout", 10 ** 400)


@pytest.mark.parametrize("name,value", [
    ("examples", "١٢"), ("examples", "1_000"), ("examples", " 5"), ("examples", "5 "),
    ("examples", "+5"), ("seed", "١٢"), ("seed", "1_0"), ("seed", " 5"),
    ("timeout", "١٢"), ("timeout", "1_0"), ("timeout", " 5"),
])
def test_numbers_are_plain_ascii_text(name, value):
    # int() and float() take Arabic-Indic digits, '_' and spaces: an audit's finding
    with pytest.raises(UsageError, match="is not a") as raised:
        OPTIONS[name].check(name, value)
    assert raised.value.value == value


@pytest.mark.parametrize("name,value,expected", [
    ("examples", "500", 500), ("seed", "-7", -7), ("timeout", "5", 5.0),
    ("timeout", ".5", 0.5), ("timeout", "5.", 5.0), ("timeout", "1e1", 10.0),
])
def test_plain_numbers_still_pass(name, value, expected):
    assert OPTIONS[name].check(name, value) == expected


@pytest.mark.parametrize("line,said", [("kernel = false", "false is not one of auto"),
                                       ('save-dir = ""', "save-dir was given an empty path")])
def test_a_bad_value_in_the_file_is_said_in_the_files_words(tmp_path, monkeypatch, line, said):
    """An audit: ``kernel = false`` was said as "False is not one of ...", and ``save-dir
    = ""`` as "--save-dir was given an empty path": the command line's words."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.stagecheck]\n{line}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        load_config()
    assert said in str(refused.value) and "False" not in str(refused.value)
