"""The three staging generations, checked by example (the way the upstream change was)."""

import pytest

from stagecheck.oracles.observe import observe
from stagecheck.oracles.targets import load_target
from stagecheck.spec import check, inputs_snapshot
from tests.helpers import scenario

GENERATIONS = ["legacy", "single-loop", "prefix-migration"]


@pytest.mark.parametrize("name", GENERATIONS)
def test_three_requests_one_padded_id(name):
    s = scenario()
    o = observe(load_target(name), s)
    assert o.returned
    assert o.cpu["mamba_state_idx_buf"] == [3, 0, 9, -1, -1, -1]
    assert o.cpu["num_scheduled_tokens_buf"] == [5, 1, 70_000, -1, -1, -1]
    assert o.cpu["num_computed_tokens_buf"] == [100, 7, 2**31 - 1, -1, -1, -1]
    assert o.cpu["num_draft_tokens_buf"] == [2, 0, 1, -1, -1, -1]
    for buffer in o.gpu:
        assert o.gpu[buffer][:3] == o.cpu[buffer][:3]
        before = s.initial_gpu.get(buffer, [False if buffer == "is_prefilling_buf" else 0] * 6)
        assert o.gpu[buffer][3:] == before[3:]       # device tail untouched
    assert max(o.req_ids_reads) < s.num_reqs        # padded id never read
    assert o.inputs_after == inputs_snapshot(load_target(name).profile, s)
    assert check(s, o, load_target(name).profile) == []


@pytest.mark.parametrize("name", GENERATIONS)
def test_missing_state_index_raises_naming_the_request(name):
    s = scenario(mamba_state_idx={"req-a": 3, "req-c": 9})
    o = observe(load_target(name), s)
    assert o.exception_type == "AssertionError"
    assert "req-b" in o.exception_message
    assert o.copies("mamba_state_idx_buf") == []
    assert check(s, o, load_target(name).profile) == []


def test_later_generation_stages_is_prefilling_and_obeys_the_flag():
    target = load_target("prefix-migration")
    assert target.profile.takes("run_prefix_state_migration")
    s = scenario()
    o = observe(target, s)
    assert o.cpu["is_prefilling_buf"][:3] == [False, True, False]
    s = scenario(run_prefix_state_migration=False, mamba_state_idx={})
    o = observe(target, s)
    assert o.returned                                    # missing index is not an error
    assert o.copies("mamba_state_idx_buf") == [] and o.writes("mamba_state_idx_buf") == []
    assert check(s, o, target.profile) == []
    s = scenario(run_prefix_state_migration=False, omit_state_idx_buf=True)
    o = observe(target, s)
    assert o.returned and "mamba_state_idx_buf" not in o.cpu   # buffer not even required


def test_legacy_copies_state_idx_before_a_keyerror_single_loop_copies_nothing():
    s = scenario(num_scheduled_tokens={"req-a": 5, "req-c": 1})
    legacy = observe(load_target("legacy"), s)
    single = observe(load_target("single-loop"), s)
    assert legacy.exception_type == single.exception_type == "KeyError"
    assert [c.stop for c in legacy.copies("mamba_state_idx_buf")] == [3]
    assert single.copies("mamba_state_idx_buf") == []
