"""The batched engine's parts: seeded scenarios and the scenario shrinker."""

import pytest

from stagecheck.oracles.sample import sample_breach, sample_scenario
from stagecheck.oracles.shrink import shrink
from stagecheck.spec.schema import INT32_MAX, INT32_MIN
from stagecheck.spec.schemas import DEFAULT_SCHEMA
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.space import breach_kinds, contract_breaches, malformed, repaired

SCHEMA = DEFAULT_SCHEMA


def test_a_scenario_is_a_function_of_seed_and_index():
    assert sample_scenario(SCHEMA, 3, 17) == sample_scenario(SCHEMA, 3, 17)
    assert sample_scenario(SCHEMA, 3, 17) != sample_scenario(SCHEMA, 3, 18)
    assert sample_scenario(SCHEMA, 3, 17) != sample_scenario(SCHEMA, 4, 17)
    assert sample_breach(SCHEMA, 3, 17) == sample_breach(SCHEMA, 3, 17)


def test_seeded_scenarios_cover_the_space_and_stay_in_contract():
    drawn = [sample_scenario(SCHEMA, 0, i, max_capacity=8) for i in range(2000)]
    for s in drawn:
        assert not malformed(SCHEMA, s) and not contract_breaches(SCHEMA, s), s
    assert any(s.num_reqs == 0 for s in drawn)                      # empty batches
    assert any(s.num_reqs == s.capacity for s in drawn)             # full batches
    assert any(len(s.req_ids) > s.num_reqs for s in drawn)          # padded ids
    assert {s.capacity for s in drawn} == set(range(1, 9))
    live_missing = [s for s in drawn if any(r not in s.inputs["mamba_state_idx"]
                                            for r in s.live_ids)]
    assert 0.02 < len(live_missing) / len(drawn) < 0.5               # the failure path
    contents = [v for s in drawn for values in s.initial_cpu.values() for v in values]
    assert INT32_MIN in contents and INT32_MAX in contents and -1 in contents
    assert all(INT32_MIN <= v <= INT32_MAX for v in contents)
    values = [v for s in drawn for v in s.inputs["num_computed_tokens"].values()]
    assert 0 in values and INT32_MAX in values and any(1000 < v < INT32_MAX - 1 for v in values)


def test_seeded_breaches_each_break_the_contract_as_labeled():
    seen = set()
    for i in range(600):
        label, s = sample_breach(SCHEMA, 1, i)
        seen.add(label)
        assert contract_breaches(SCHEMA, s), (label, s)
    assert seen == set(breach_kinds(SCHEMA))


def _largest(predicate, count=400):
    return max((sample_scenario(SCHEMA, 5, i) for i in range(count)
                if predicate(sample_scenario(SCHEMA, 5, i))),
               key=lambda s: (s.capacity, len(s.req_ids)))


def test_the_shrinker_reaches_the_smallest_batch_that_still_fails():
    def fails(s):
        return s.num_reqs >= 2

    start = _largest(fails)
    assert start.capacity >= 6

    def still_fails(candidates):
        return next((k for k, c in enumerate(candidates) if fails(c)), None)

    smallest, spent = shrink(SCHEMA, start, still_fails)
    assert fails(smallest) and spent > 0
    assert (smallest.capacity, smallest.num_reqs, len(smallest.req_ids)) == (2, 2, 2)
    assert smallest.req_ids == ["req-0", "req-1"]
    assert not contract_breaches(SCHEMA, smallest)
    for buffer, values in smallest.initial_cpu.items():     # the sentinel fill
        assert values == ([True] * 2 if buffer == "is_prefilling_buf" else [-1] * 2)
    for buffer, values in smallest.initial_gpu.items():
        assert values == ([False] * 2 if buffer == "is_prefilling_buf" else [-2] * 2)


def test_the_shrinker_lowers_values_to_the_boundary_that_matters():
    def fails(s):
        return any(v > 1000 for v in s.inputs["num_scheduled_tokens"].values())

    start = _largest(fails, 2000)

    def still_fails(candidates):
        return next((k for k, c in enumerate(candidates) if fails(c)), None)

    smallest, _ = shrink(SCHEMA, start, still_fails)
    assert fails(smallest)
    assert len(smallest.inputs["num_scheduled_tokens"]) == 1
    (value,) = smallest.inputs["num_scheduled_tokens"].values()
    assert 1000 < value <= 2001       # halving towards 0 stops within a factor of two


def test_value_shrinking_is_a_binary_search_for_the_smallest_failing_value():
    from stagecheck.oracles.shrink import _smaller_ints
    threshold = 65_536        # e.g. a count that fails only beyond uint16
    value, steps = 1_234_567, 0
    while True:
        failing = [c for c in _smaller_ints(value, 0) if c >= threshold]
        if not failing:
            break
        value, steps = failing[0], steps + 1     # the first that still fails, as shrink takes
    assert value == threshold and steps <= 21
    assert _smaller_ints(7, 7) == [] and _smaller_ints(5, 1)[:2] == [1, 3]


def test_a_breach_of_an_integer_range_or_a_missing_request_is_repaired_and_no_other_is():
    schema = DEFAULT_SCHEMA
    s = next(x for x in (sample_scenario(schema, 0, i, 16, None) for i in range(50))
             if x.num_reqs)
    assert repaired(schema, s) is None                 # in contract already
    live = s.live_ids[0]
    bad = StagingScenario.from_dict(s.to_dict())
    bad.inputs["num_computed_tokens"][live] = 2**40
    fixed = repaired(schema, bad)
    assert contract_breaches(schema, fixed) == []
    assert fixed.inputs["num_computed_tokens"][live] == INT32_MAX
    assert bad.inputs["num_computed_tokens"][live] == 2**40     # a copy was repaired
    # a live request missing from an input: given a simple entry there (an audit: a bug
    # at num_reqs == 63 showed only on an example that also lacked a request, an info)
    missing = StagingScenario.from_dict(s.to_dict())
    del missing.inputs["num_scheduled_tokens"][live]
    del missing.inputs["mamba_state_idx"][live]        # the failure path's input too
    fixed = repaired(schema, missing)
    assert contract_breaches(schema, fixed) == []
    assert fixed.inputs["num_scheduled_tokens"][live] == 1
    assert live in fixed.inputs["mamba_state_idx"]     # a success-path example
    assert live not in missing.inputs["num_scheduled_tokens"]   # a copy was repaired
    # a breach no value mends (num_reqs above capacity): none
    above = StagingScenario.from_dict(s.to_dict())
    above.num_reqs = above.capacity + 1
    assert repaired(schema, above) is None


def test_a_call_that_fails_on_every_input_shrinks_by_size_in_one_try():
    # each try of a hang or crash costs a deadline or a new worker: smallest first (was:
    # the padding first, then the batch, then the capacity: three workers for a crash)
    from stagecheck.oracles.shrink import SIZE_PASSES
    s = next(t for t in (sample_scenario(SCHEMA, 0, i) for i in range(200))
             if t.num_reqs > 2 and len(t.req_ids) > t.num_reqs)       # padded, 3+ live
    tried = []

    def always(candidates):
        tried.extend(candidates)
        return 0
    smallest, spent = shrink(SCHEMA, s, always, batch_size=1, passes=SIZE_PASSES)
    assert (smallest.num_reqs, smallest.req_ids, smallest.capacity) == (0, [], 1)
    assert spent == 1 and tried == [smallest]


@pytest.mark.parametrize("value, said", [("many", "'many' is not a whole number"),
                                         (1.5, "1.5 is not a whole number"),
                                         (None, "None is not a whole number"),
                                         (True, "True is not a whole number")])
def test_an_input_value_of_another_type_is_a_scenario_that_cannot_be_built(value, said):
    # an audit: a replay file edited to num_scheduled_tokens {"req-0": "many"} ran as an
    # out-of-contract example (EQUIVALENT, exit 0, for a buggy candidate); 1.5 ran in
    # contract and blamed the built-in baseline
    s = next(x for x in (sample_scenario(SCHEMA, 0, i) for i in range(50)) if x.num_reqs)
    assert malformed(SCHEMA, s) == []
    bad = StagingScenario.from_dict(s.to_dict())
    bad.inputs["num_scheduled_tokens"][s.live_ids[0]] = value
    assert malformed(SCHEMA, bad) == [
        f"inputs['num_scheduled_tokens'][{s.live_ids[0]!r}] = {said}"]
    drafts = StagingScenario.from_dict(s.to_dict())
    drafts.inputs["spec_decode_tokens"][s.live_ids[0]] = [1, "x"]
    assert "is not a list of whole numbers" in malformed(SCHEMA, drafts)[0]
