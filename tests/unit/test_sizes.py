"""The size distribution (issue 20, item 1): the real input space by default.

Capacities up to the schema's bound (1,024 for the built-in ones), draft lists up to 16,
and sizes that reach every threshold a fast path may switch on within the default
budget, while most examples stay small; a threshold shrinks to itself.
"""

from __future__ import annotations

import collections

import pytest
from hypothesis import HealthCheck, Phase, find, settings

from stagecheck.oracles.generate import staging_scenarios
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.sample import sample_breach, sample_scenario
from stagecheck.oracles.shrink import MAX_SLOTS, shrink
from stagecheck.oracles.errors import UsageError
from stagecheck.spec.schemas import DEFAULT_SCHEMA
from stagecheck.spec.space import (SMALL, contract_breaches, draft_bound, malformed,
                                   size_thresholds)

SCHEMA = DEFAULT_SCHEMA
#: the default budget per stream
BUDGET = CampaignConfig().examples


def band(s) -> str:
    if s.capacity == s.num_reqs == SCHEMA.max_capacity:
        return "full"
    if s.capacity <= SMALL:
        return "small"
    if s.num_reqs > SMALL and s.num_reqs not in THRESHOLDS:
        return "any"
    return "threshold"


THRESHOLDS = frozenset(size_thresholds(1, 1024))


def test_the_built_in_schemas_bound_capacity_at_1024_and_drafts_at_16():
    assert SCHEMA.max_capacity == 1024
    assert draft_bound(SCHEMA) == 16


def test_thresholds_are_powers_of_two_their_neighbours_capture_sizes_and_the_capacity():
    sizes = size_thresholds(1, 1024)
    for power in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):
        assert power in sizes and power - 1 in sizes or power == 1
        assert power + 1 in sizes or power == 1024
    assert all(k in sizes for k in range(8, 513, 8))         # CUDA-graph capture sizes
    assert all(k in sizes for k in range(512, 1025, 16))     # ... of 16 above 512
    assert all(k in sizes for k in range(50, 1001, 50))      # round numbers people write
    assert 1023 in sizes and 1025 not in sizes and 0 not in sizes
    assert 601 not in sizes and 999 not in sizes and 520 not in sizes
    assert size_thresholds(1, 300)[-2:] == (299, 300)        # the capacity itself
    assert sizes == tuple(sorted(sizes))


def test_most_examples_are_small_a_share_lands_on_thresholds_a_few_are_full():
    drawn = [sample_scenario(SCHEMA, 0, i) for i in range(2000)]
    shares = collections.Counter(band(s) for s in drawn)
    assert 0.6 < shares["small"] / 2000 < 0.8
    assert 0.15 < shares["threshold"] / 2000 < 0.3
    assert 0.02 < shares["any"] / 2000 < 0.08
    assert 0.02 < shares["full"] / 2000 < 0.09
    thresholds = set(size_thresholds(1, 1024))
    on = [s for s in drawn if band(s) == "threshold"]
    # every threshold-band scenario has its live count or its capacity on a threshold
    assert all(s.num_reqs in thresholds or s.capacity in thresholds for s in on)
    for s in drawn[:300]:
        assert not malformed(SCHEMA, s) and not contract_breaches(SCHEMA, s)


def test_sizes_no_threshold_names_are_drawn_too():
    """The "any" band: sizes no list names (601 to 999) are drawn, and no long run of
    sizes is never drawn (tests/quality/test_sizes_default.py: a fast path for 601 to
    999 live requests is found by default and shrunk to 601)."""
    drawn = [sample_scenario(SCHEMA, 0, i) for i in range(3000)]
    sizes = {s.num_reqs for s in drawn}
    off_list = sizes - THRESHOLDS - set(range(SMALL + 1))
    assert len(off_list) > 100
    assert sum(1 for s in drawn if 600 < s.num_reqs < 1000 and s.num_reqs not in THRESHOLDS) > 20
    longest = run = 0           # no long run of sizes above SMALL is never drawn
    for n in range(SMALL + 1, 1025):
        run = 0 if n in sizes else run + 1
        longest = max(longest, run)
    assert longest <= 32


@pytest.mark.parametrize("stream", ["in", "out"])
def test_every_threshold_is_reached_within_the_default_budget(stream):
    """A fast path taken for ``num_reqs >= t`` runs, for every threshold ``t``, on
    in-contract examples of the default budget that are not on the failure path."""
    if stream == "in":
        drawn = [sample_scenario(SCHEMA, 0, i) for i in range(BUDGET)]
    else:       # the out-of-contract stream draws the same sizes before its breach
        drawn = [sample_breach(SCHEMA, 0, i)[1] for i in range(BUDGET)]
        assert max(s.capacity for s in drawn) == 1024
        return
    served = [s for s in drawn
              if all(r in s.inputs["mamba_state_idx"] for r in s.live_ids)]
    for t in size_thresholds(1, 1024):
        reaching = [s for s in served if s.num_reqs >= t]
        assert len(reaching) >= 3, t
        # ... with requests that have drafts among them (a path that forgets them shows)
        assert any(s.inputs["spec_decode_tokens"].get(r) for s in reaching
                   for r in s.live_ids), t


def test_draft_lists_reach_the_bound_and_max_drafts_changes_it():
    def lengths(max_drafts=None, count=300):
        return [len(v) for i in range(count)
                for v in sample_scenario(SCHEMA, 1, i, max_drafts=max_drafts)
                .inputs["spec_decode_tokens"].values()]
    default = lengths()
    assert max(default) == 16 and sum(n > 5 for n in default) > 100
    assert sum(n <= 4 for n in default) > len(default) / 2      # mostly short
    assert max(lengths(40)) == 40
    assert max(lengths(2)) == 2


def test_max_capacity_and_max_drafts_are_validated():
    assert CampaignConfig(max_capacity=64, max_drafts=0).max_drafts == 0
    with pytest.raises(UsageError, match="whole number >= 0") as bad:
        CampaignConfig(max_drafts=-1)
    assert bad.value.option == "max_drafts"
    with pytest.raises(UsageError, match="256") as big:
        CampaignConfig(max_drafts=1000)
    assert big.value.option == "max_drafts"
    with pytest.raises(UsageError) as none:
        CampaignConfig(max_capacity=0)
    assert none.value.option == "max_capacity"


def test_a_smaller_max_capacity_keeps_every_size_within_it():
    drawn = [sample_scenario(SCHEMA, 2, i, max_capacity=100) for i in range(500)]
    assert max(s.capacity for s in drawn) == 100
    assert any(s.num_reqs == 100 for s in drawn)
    assert {s.capacity for s in drawn} >= {64, 65, 96}


@pytest.mark.parametrize("threshold", [12, 100, 257, 1024])
def test_a_threshold_bug_shrinks_to_the_threshold(threshold):
    """The shrinker's batch pass is a binary search: a bug at ``num_reqs >= t`` found on
    a larger batch shrinks to a batch of exactly ``t`` within the budget."""
    def fails(s):
        return s.num_reqs >= threshold and any(
            s.inputs["spec_decode_tokens"].get(r) for r in s.live_ids)

    start = next(s for s in (sample_scenario(SCHEMA, 0, i) for i in range(2000))
                 if fails(s) and s.num_reqs >= min(2 * threshold, 1024))
    spent_slots = []

    def still_fails(candidates):
        spent_slots.append(sum(c.capacity for c in candidates))
        return next((k for k, c in enumerate(candidates) if fails(c)), None)

    smallest, spent = shrink(SCHEMA, start, still_fails)
    assert smallest.num_reqs == threshold
    assert sum(spent_slots) <= MAX_SLOTS + 16 * 1024
    assert not contract_breaches(SCHEMA, smallest) and not malformed(SCHEMA, smallest)


@pytest.mark.parametrize("period, rest", [(7, 3), (5, 2), (11, 9)])
def test_a_bug_on_scattered_sizes_shrinks_to_the_smallest_of_them(period, rest):
    """A condition that holds on sizes no binary search lands on (``num_reqs % 7 == 3``),
    found on a large batch, shrinks to its smallest size (``rest``), not to the first
    size the search stops at."""
    def fails(s):
        return s.num_reqs % period == rest and any(
            s.inputs["spec_decode_tokens"].get(r) for r in s.live_ids)

    start = next(s for s in (sample_scenario(SCHEMA, 0, i) for i in range(4000))
                 if fails(s) and s.num_reqs > 200)
    smallest, _ = shrink(SCHEMA, start,
                         lambda cs: next((k for k, c in enumerate(cs) if fails(c)), None))
    assert smallest.num_reqs == rest, (start.num_reqs, smallest.num_reqs)


@pytest.mark.parametrize("period", [24, 40, 100])
def test_a_bug_on_every_multiple_of_a_period_past_sixteen_shrinks_to_the_period(period):
    """A condition that holds on every multiple of a period larger than the small sizes'
    sweep (``num_reqs % 24 == 0``), found on a large batch, shrinks to the period itself
    (a divisor of every size it holds on), not to the first multiple a search stops at."""
    def fails(s):
        return s.num_reqs > 0 and s.num_reqs % period == 0 and any(
            s.inputs["spec_decode_tokens"].get(r) for r in s.live_ids)

    start = next(s for s in (sample_scenario(SCHEMA, 0, i) for i in range(6000))
                 if fails(s) and s.num_reqs >= 4 * period)
    smallest, _ = shrink(SCHEMA, start,
                         lambda cs: next((k for k, c in enumerate(cs) if fails(c)), None))
    assert smallest.num_reqs == period, (start.num_reqs, smallest.num_reqs)


def test_a_threshold_bug_that_needs_padding_ids_shrinks_to_the_threshold():
    """A bug past a threshold that shows only with padding ids (``len(req_ids)`` slots
    copied instead of ``num_reqs``), found on a large batch, loses live requests down to
    the threshold with its padding kept (the batch pass drops the padding)."""
    def fails(s):
        return s.num_reqs >= 100 and len(s.req_ids) > s.num_reqs

    start = next(s for s in (sample_scenario(SCHEMA, 0, i) for i in range(6000))
                 if fails(s) and s.num_reqs >= 150)
    smallest, _ = shrink(SCHEMA, start,
                         lambda cs: next((k for k, c in enumerate(cs) if fails(c)), None))
    assert (smallest.num_reqs, len(smallest.req_ids)) == (100, 101), \
        (start.num_reqs, smallest.num_reqs, len(smallest.req_ids))


def test_hypothesis_draws_the_same_space_large_scenarios_included():
    """The hypothesis strategies draw the same sizes: full batches of 1,024 (past
    hypothesis's own limit of decisions per example: the rest comes from a seed it
    draws) and draft lists past 5, which its shrinker takes back to the smallest."""
    quiet = settings(database=None, max_examples=2000, derandomize=True,
                     suppress_health_check=list(HealthCheck))
    big = find(staging_scenarios(), lambda s: s.num_reqs == 1024,
               settings=settings(quiet, phases=(Phase.generate,)))
    assert big.capacity == 1024 and len(big.inputs["num_scheduled_tokens"]) >= 1024
    assert not contract_breaches(SCHEMA, big)
    drafts = find(staging_scenarios(max_capacity=SMALL), lambda s: any(
        len(v) > 5 for v in s.inputs["spec_decode_tokens"].values()), settings=quiet)
    assert max(len(v) for v in drafts.inputs["spec_decode_tokens"].values()) == 6
    assert drafts.capacity <= SMALL
