"""A mutants run of no mutant is a usage error, never a clean verdict (an audit's finding)."""

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import UsageError
from stagecheck.oracles.mutants.generate import generate_mutants, require_mutants

SOURCE = '''
def stage(ctx, req_ids, num_reqs):
    for i, r in enumerate(req_ids[:num_reqs]):
        ctx.buf.np[i] = 1
    ctx.buf.copy_to_gpu(num_reqs)
'''


def test_some_mutants_pass():
    mutants = generate_mutants(SOURCE, "s.py", "stage")
    require_mutants(mutants, "s.py::stage", None, lambda: mutants)


def test_operators_that_make_none_are_named_with_those_that_would():
    none = generate_mutants(SOURCE, "s.py", "stage", operators=["swapped_views"])
    assert none == []
    with pytest.raises(UsageError) as raised:
        require_mutants(none, "s.py::stage", ("swapped_views",),
                        lambda: generate_mutants(SOURCE, "s.py", "stage"))
    assert raised.value.option == "operators"
    text = str(raised.value)
    assert text.startswith("no operator of swapped_views applies to s.py::stage: 0 mutants")
    assert "apply to it are " in text and "early_return" in text


def test_a_target_no_operator_applies_to_is_refused():
    with pytest.raises(UsageError) as raised:
        require_mutants([], "s.py::stage", ("swapped_views",), lambda: [])
    assert messages.NO_MUTANTS_NONE in str(raised.value)
    with pytest.raises(UsageError) as raised:
        require_mutants([], "s.py::stage", None, lambda: [])
    assert raised.value.option is None and "nothing would be checked" in str(raised.value)
