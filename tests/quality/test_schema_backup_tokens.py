"""The ``specdec-backup-tokens`` schema: a method loaded as a function taking ``self``,
its fixtures, its declarations, and its missing-input policy narrowed to the requests
it concerns (a prompt given as embeddings raises only for a prompt position)."""

import pytest

from stagecheck.oracles.compare import compare
from stagecheck.oracles.observe import observe
from stagecheck.oracles.schemas import check_schema
from stagecheck.oracles.targets import load_target
from stagecheck.spec import ERROR, INFO, StagingScenario, check
from stagecheck.spec.schemas import BUILTIN_SCHEMAS, schema_for_function
from tests.fixture_catalog import TARGETS, assert_caught, assert_clean, catalog, documented

NAME = "specdec-backup-tokens"
METHOD = "SpecDecodeBaseProposer.prepare_next_token_ids_padded"
SCHEMA = BUILTIN_SCHEMAS[NAME]
BUGGY, EQUIVALENT = catalog(NAME)
BUF = "backup_next_token_ids"


def test_the_schema_is_sound_and_chosen_by_the_method_name():
    assert check_schema(SCHEMA) == []
    assert schema_for_function("prepare_next_token_ids_padded") is SCHEMA
    assert load_target("backup-tokens").schema is SCHEMA
    path = EQUIVALENT[0]
    assert load_target(f"{path}::{METHOD}").schema is SCHEMA


def test_the_catalog_is_the_one_its_readme_documents():
    assert len(BUGGY) >= 4 and len(EQUIVALENT) >= 2
    assert documented(NAME) == {p.name for p in BUGGY + EQUIVALENT}


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.stem)
def test_buggy_refactor_is_caught(path):
    assert_caught("backup-tokens", path, METHOD)


@pytest.mark.parametrize("path", EQUIVALENT, ids=lambda p: p.stem)
def test_equivalent_rewrite_gives_no_error(path):
    assert_clean("backup-tokens", path, METHOD)


def scenario(positions=(5, 2, 3, 0, 9, 9)) -> StagingScenario:
    """The README's base: c's prompt came as embeddings; p is a padded id."""
    return StagingScenario(
        6, 4, ["req-a", "req-b", "req-c", "req-d", "req-p"],
        {"num_tokens_no_spec": list(positions),
         "num_prompt_tokens": {"req-a": 3, "req-b": 2, "req-c": 2, "req-d": 1, "req-p": 1},
         "output_token_ids": {"req-a": [14, 15], "req-b": [], "req-c": [33], "req-d": [],
                              "req-p": []},
         "prompt_token_ids": {"req-a": [11, 12, 13], "req-b": [21, 22], "req-d": [41],
                              "req-p": [51]}},
        {BUF: [7] * 6}, {BUF: [8] * 6}, schema=NAME)


def test_an_embeddings_prompt_is_served_from_its_outputs():
    s = scenario()
    assert SCHEMA.profile().first_missing(s) is None
    o = observe(load_target("backup-tokens"), s)
    assert check(s, o, SCHEMA.profile()) == []
    assert o.cpu[BUF][:4] == o.gpu[BUF][:4] == [15, 22, 33, 41]


def test_an_embeddings_prompt_asked_for_a_prompt_position_raises_value_error():
    s = scenario(positions=(5, 2, 2, 0, 9, 9))
    assert SCHEMA.profile().first_missing(s)[:2] == (2, "req-c")
    o = observe(load_target("backup-tokens"), s)
    assert o.exception_type == "ValueError" and check(s, o, SCHEMA.profile()) == []


def test_the_v020_and_v021_shapes_differ_only_in_failure_path_partial_writes():
    """Build-then-assign writes nothing before the ValueError, a per-slot loop writes the
    slots before it: info, since both raise as the contract says."""
    s = scenario(positions=(5, 2, 2, 0, 9, 9))
    a = load_target("backup-tokens")
    b = load_target(f"{TARGETS / NAME / 'equivalent_build_then_assign.py'}::{METHOD}")
    findings = compare(s, observe(a, s), observe(b, s), a.profile, b.profile)
    assert {(f.invariant, f.severity) for f in findings} == {("same_buffers", INFO)}
    findings = compare(scenario(), observe(a, scenario()), observe(b, scenario()),
                       a.profile, b.profile)
    assert findings == []


def test_a_swallowed_value_error_is_an_error():
    s = scenario(positions=(5, 2, 2, 0, 9, 9))
    t = load_target(f"{TARGETS / NAME / 'buggy_swallows_embeds_error.py'}::{METHOD}")
    (f,) = check(s, observe(t, s), t.profile)
    assert (f.invariant, f.severity, f.extra["kind"]) == ("missing_input", ERROR, "no-raise")
