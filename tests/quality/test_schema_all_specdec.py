"""The ``mamba-all-specdec`` schema: its fixtures, its declarations, and its policies
(tail filled with -1, whole-buffer copy, -1 for a missing index, the declared cleanup)
checked directly on hand-made scenarios."""

import pytest

from stagecheck.oracles.observe import observe
from stagecheck.oracles.schemas import check_schema
from stagecheck.oracles.targets import load_target, target_from_callable
from stagecheck.spec import ERROR, StagingScenario, check
from stagecheck.spec.schemas import BUILTIN_SCHEMAS, schema_for_function
from tests.fixture_catalog import assert_caught, assert_clean, catalog, documented

NAME = "mamba-all-specdec"
FUNCTION = "preprocess_mamba_all_specdec"
SCHEMA = BUILTIN_SCHEMAS[NAME]
BUGGY, EQUIVALENT = catalog(NAME)
BUF = "prev_last_scheduled_idx_buf"


def test_the_schema_is_sound_and_chosen_by_the_function_name():
    assert check_schema(SCHEMA) == []
    assert schema_for_function(FUNCTION) is SCHEMA
    assert load_target("specdec").schema is SCHEMA


def test_the_catalog_is_the_one_its_readme_documents():
    assert len(BUGGY) >= 4 and len(EQUIVALENT) >= 2
    assert documented(NAME) == {p.name for p in BUGGY + EQUIVALENT}


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.stem)
def test_buggy_refactor_is_caught(path):
    assert_caught("specdec", path, FUNCTION)


@pytest.mark.parametrize("path", EQUIVALENT, ids=lambda p: p.stem)
def test_equivalent_rewrite_gives_no_error(path):
    assert_clean("specdec", path, FUNCTION)


def scenario(**inputs) -> StagingScenario:
    """Capacity 6, three live requests and one padded id; stale host (7) and device (8)
    values everywhere; req-b finished, req-c without an entry, req-gone gone."""
    base = dict(mamba_state_idx={"req-a": 3, "req-b": 4, "req-p": 5, "req-gone": 9},
                finished_req_ids=["req-b", "req-gone"], preempted_req_ids=[],
                preempted_is_none=True, resumed_req_ids=[])
    base.update(inputs)
    return StagingScenario(6, 3, ["req-a", "req-b", "req-c", "req-p"], base,
                           {BUF: [7] * 6}, {BUF: [8] * 6}, schema=NAME)


def test_the_reference_meets_every_policy():
    s = scenario()
    o = observe(load_target("specdec"), s)
    assert check(s, o, SCHEMA.profile()) == []
    assert o.cpu[BUF] == o.gpu[BUF] == [3, -1, -1, -1, -1, -1]
    assert o.inputs_after["mamba_state_idx"] == {"req-a": 3, "req-p": 5}
    assert [(c.start, c.stop) for c in o.copies(BUF)] == [(0, 6)]


def _stage_live_copy_live(scheduler_output, input_batch, mamba_state_idx, num_reqs, buf):
    """No cleanup, no tail fill, a live-range copy: three policies broken at once."""
    for i, req_id in enumerate(input_batch.req_ids[:num_reqs]):
        buf.np[i] = mamba_state_idx.get(req_id, -1)
    buf.copy_to_gpu(num_reqs)


def test_each_broken_policy_is_named():
    s = scenario(resumed_req_ids=["req-a"])
    target = target_from_callable(_stage_live_copy_live, "live-only", SCHEMA)
    found = {(f.invariant, f.severity) for f in check(s, observe(target, s), target.profile)}
    assert found == {("slot_alignment", ERROR), ("tail_policy", ERROR),
                     ("mirror_consistency", ERROR), ("copy_discipline", ERROR),
                     ("inputs_unchanged", ERROR)}


def test_preempted_ids_count_unless_the_set_is_none():
    s = scenario(preempted_req_ids=["req-a"], preempted_is_none=False)
    o = observe(load_target("specdec"), s)
    assert check(s, o, SCHEMA.profile()) == []
    assert o.cpu[BUF][:3] == [-1, -1, -1]
    assert "req-a" not in o.inputs_after["mamba_state_idx"]
