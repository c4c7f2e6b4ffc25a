"""The ``mamba-preprocess-fused`` schema: its fixtures, its declarations, and its
policies (fields staged only on a state move, an empty batch staging nothing, two
declared mutations) checked directly on hand-made scenarios."""

import pytest

from stagecheck.oracles.observe import observe
from stagecheck.oracles.schemas import check_schema
from stagecheck.oracles.targets import load_target, target_from_callable
from stagecheck.spec import ERROR, StagingScenario, check
from stagecheck.spec.schemas import BUILTIN_SCHEMAS, schema_for_function
from tests.fixture_catalog import assert_caught, assert_clean, catalog, documented

NAME = "mamba-preprocess-fused"
FUNCTION = "preprocess_mamba"
SCHEMA = BUILTIN_SCHEMAS[NAME]
BUGGY, EQUIVALENT = catalog(NAME)
BUFS = ("mamba_state_idx_buf", "precopy_src_col_buf", "precopy_token_bias_buf")


def test_the_schema_is_sound_and_chosen_by_the_function_name():
    assert check_schema(SCHEMA) == []
    assert schema_for_function(FUNCTION) is SCHEMA
    assert load_target("preprocess-fused").schema is SCHEMA


def test_the_catalog_is_the_one_its_readme_documents():
    assert len(BUGGY) >= 4 and len(EQUIVALENT) >= 2
    assert documented(NAME) == {p.name for p in BUGGY + EQUIVALENT}


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.stem)
def test_buggy_refactor_is_caught(path):
    assert_caught("preprocess-fused", path, FUNCTION)


@pytest.mark.parametrize("path", EQUIVALENT, ids=lambda p: p.stem)
def test_equivalent_rewrite_gives_no_error(path):
    assert_clean("preprocess-fused", path, FUNCTION)


def scenario(req_ids=("req-a", "req-b", "req-c", "req-d"), **inputs) -> StagingScenario:
    """The README's base: block size 4; a and b cross into column 2, c computed nothing,
    d was resumed (its entry dropped) and moves from its computed column 1 to 2."""
    base = dict(num_scheduled_tokens={"req-a": 2, "req-b": 1, "req-c": 3, "req-d": 4},
                num_computed_tokens={"req-a": 7, "req-b": 8, "req-c": 0, "req-d": 5},
                mamba_state_idx={"req-a": 1, "req-b": 1, "req-d": 0, "req-gone": 9},
                num_accepted_tokens=[3, 2, 2, 1, 5, 5], block_size=4, num_speculative_blocks=1,
                finished_req_ids=["req-gone"], preempted_req_ids=[], preempted_is_none=True,
                resumed_req_ids=["req-d"])
    base.update(inputs)
    return StagingScenario(6, len(req_ids), list(req_ids), base, {b: [7] * 6 for b in BUFS},
                           {b: [8] * 6 for b in BUFS}, schema=NAME)


def test_the_reference_meets_every_policy():
    s = scenario()
    o = observe(load_target("preprocess-fused"), s)
    assert check(s, o, SCHEMA.profile()) == []
    assert [o.cpu[b][:4] for b in BUFS] == [[2, 2, 0, 2], [1, 1, -1, 1], [2, 1, 0, 0]]
    assert o.inputs_after["mamba_state_idx"] == {"req-a": 2, "req-b": 2, "req-c": 0, "req-d": 2}
    assert o.inputs_after["num_accepted_tokens"] == [1, 1, 2, 1, 5, 5]


def test_an_empty_batch_only_cleans():
    s = scenario(req_ids=())
    o = observe(load_target("preprocess-fused"), s)
    assert check(s, o, SCHEMA.profile()) == []
    assert o.events == [] and o.inputs_after["mamba_state_idx"] == {"req-a": 1, "req-b": 1}


def _every_slot_and_no_reset(scheduler_output, kv_cache_config, cache_config, mamba_state_idx,
                             input_batch, requests, forward_context, mamba_state_copy_funcs,
                             copy_bufs, align_ctx=None):
    """Stages prev and the bias on every slot (as the ReplaySSM variant does for src_col),
    never resets the accepted counts, and copies even an empty batch."""
    bs = copy_bufs.mamba_spec.block_size
    for r in scheduler_output.finished_req_ids:
        mamba_state_idx.pop(r, None)
    for r in scheduler_output.scheduled_cached_reqs.resumed_req_ids:
        mamba_state_idx.pop(r, None)
    n = len(input_batch.req_ids)
    for i, r in enumerate(input_batch.req_ids):
        computed = requests[r].num_computed_tokens
        prev = mamba_state_idx.get(r, (computed - 1) // bs)
        curr = -(-(computed + scheduler_output.num_scheduled_tokens[r]) // bs) - 1
        mamba_state_idx[r] = curr
        align_ctx.mamba_state_idx_buf.np[i] = curr
        align_ctx.precopy_src_col_buf.np[i] = prev
        align_ctx.precopy_token_bias_buf.np[i] = int(input_batch.num_accepted_tokens_cpu[i]) - 1
    for name in BUFS:
        getattr(align_ctx, name).copy_to_gpu(n)


def test_fields_staged_only_on_a_move_and_the_declared_reset_are_checked():
    target = target_from_callable(_every_slot_and_no_reset, "every-slot", SCHEMA)
    s = scenario(mamba_state_idx={"req-a": 1, "req-b": 2})     # b stays in column 2
    found = {(f.invariant, f.field, f.severity) for f in check(s, observe(target, s),
                                                                 target.profile)}
    assert found == {("slot_alignment", "src_col", ERROR), ("slot_alignment", "token_bias", ERROR),
                     ("inputs_unchanged", "num_accepted_tokens", ERROR)}
    # an empty batch may be copied as empty ranges or not at all
    s = scenario(req_ids=())
    assert check(s, observe(target, s), target.profile) == []
