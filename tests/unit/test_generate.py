"""The strategies build what they promise, by construction (for the seed schema)."""

from hypothesis import HealthCheck, Phase, find, given, settings

from stagecheck.oracles.generate import out_of_contract_scenarios, staging_scenarios
from stagecheck.spec import DEFAULT_SCHEMA, contract_breaches
from stagecheck.spec.schema import INT32_MAX
from stagecheck.spec.space import breach_kinds

BREACHES = breach_kinds(DEFAULT_SCHEMA)

FAST = settings(max_examples=200, database=None, deadline=None,
                suppress_health_check=list(HealthCheck))


@FAST
@given(staging_scenarios())
def test_in_contract_stream_is_in_contract(s):
    assert contract_breaches(DEFAULT_SCHEMA, s) == []
    assert len(s.req_ids) <= s.capacity
    for view in (s.initial_cpu, s.initial_gpu):
        assert all(len(v) == s.capacity for v in view.values())


@FAST
@given(out_of_contract_scenarios())
def test_out_of_contract_stream_is_labeled_and_out_of_contract(labeled):
    breach, s = labeled
    assert breach in BREACHES
    assert contract_breaches(DEFAULT_SCHEMA, s)


def _finds(condition):
    # existence is the question: the first example found, not shrunk (shrinking a
    # 1,024-slot scenario is most of the cost)
    return find(staging_scenarios(), condition,
                settings=settings(max_examples=2000, database=None, deadline=None,
                                  phases=(Phase.generate,)))


def test_the_in_contract_stream_reaches_every_case_it_promises():
    assert _finds(lambda s: s.num_reqs == 0)
    assert _finds(lambda s: s.num_reqs == s.capacity and s.capacity > 1)
    assert _finds(lambda s: len(s.req_ids) > s.num_reqs)                      # padded ids
    assert _finds(lambda s: any(r not in s.spec_decode_tokens for r in s.live_ids))
    assert _finds(lambda s: any(s.spec_decode_tokens.get(r) == [] for r in s.live_ids))
    assert _finds(lambda s: any(s.num_computed_tokens[r] > 65_535 for r in s.live_ids))
    assert _finds(lambda s: any(s.num_scheduled_tokens[r] == INT32_MAX for r in s.live_ids))
    assert _finds(lambda s: any(r not in s.mamba_state_idx for r in s.live_ids))
    assert _finds(lambda s: not s.run_prefix_state_migration and s.omit_state_idx_buf)
    assert _finds(lambda s: any(a != b for a, b in zip(
        s.initial_cpu["num_draft_tokens_buf"], s.initial_gpu["num_draft_tokens_buf"])))


def test_every_breach_is_drawn():
    assert BREACHES == ["num_reqs above capacity", "missing from num_scheduled_tokens",
                        "missing from requests", "num_scheduled_tokens beyond int32",
                        "num_computed_tokens beyond int32", "num_prompt_tokens beyond int32",
                        "mamba_state_idx beyond int32"]
    for breach in BREACHES:
        assert find(out_of_contract_scenarios(), lambda x, b=breach: x[0] == b,
                    settings=settings(max_examples=500, database=None, deadline=None,
                                      phases=(Phase.generate,)))


def test_a_value_of_the_wrong_type_is_a_breach_not_an_error():
    # num_computed_tokens["req-a"] = "1" in an edited replay file raised TypeError
    from tests.helpers import scenario
    s = scenario()
    s.inputs["num_computed_tokens"] = {**s.inputs["num_computed_tokens"], "req-a": "1"}
    assert any("num_computed_tokens['req-a']=1 does not fit" in b
               for b in contract_breaches(DEFAULT_SCHEMA, s))
