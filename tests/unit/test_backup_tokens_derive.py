"""The built-in specdec-backup-tokens schema derives no value, and raises nothing but
KeyError, for a request whose prompt is shorter than its num_prompt_tokens (an audit: a
'num_reqs above capacity' breach drew such a request with an empty prompt and position -1;
derive raised IndexError and 'stagecheck spec' of a built-in target was exit 2, 'fix the
schema or protocol file', for a schema the user never wrote)."""

import pytest

from stagecheck.oracles.sample import sample_breach
from stagecheck.spec.invariants import expected_value
from stagecheck.spec.scenario import MISSING, RequestView
from stagecheck.spec.schemas import BUILTIN_SCHEMAS

SCHEMA = BUILTIN_SCHEMAS["specdec-backup-tokens"]
FIELD = SCHEMA.fields[0]


@pytest.mark.parametrize("prompt,position", [([], -1), ([], 0), ([5], 1), ([5, 6], -3)])
def test_a_prompt_shorter_than_its_count_gives_no_expected_value(prompt, position):
    _, s = sample_breach(SCHEMA, 0, 1)
    r = s.req_ids[0]
    s.inputs["num_prompt_tokens"][r] = 4
    s.inputs["prompt_token_ids"][r] = prompt
    s.inputs["num_tokens_no_spec"][0] = position + 1
    with pytest.raises(KeyError):
        FIELD.derive(RequestView(s, 0, r))
    assert expected_value(s, FIELD, 0, r) is MISSING


def test_no_drawn_breach_makes_derive_raise_anything_but_key_error():
    for k in range(300):
        _, s = sample_breach(SCHEMA, 0, k)
        for i, r in enumerate(s.req_ids[:s.num_reqs]):
            expected_value(s, FIELD, i, r)
