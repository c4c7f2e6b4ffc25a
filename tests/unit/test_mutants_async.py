"""mutants of an ``async def`` target: said to be one (was: "has no module-level function
'stage' ... functions there: none", of a function the file defines; diff and spec load
the same target and report what it stages)."""

from __future__ import annotations

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.mutants.generate import generate_mutants

BODY = "    for i in range(n):\n        buf.np[i] = i\n    buf.copy_to_gpu(n)\n"


@pytest.mark.parametrize("source, name", [
    ("async def stage(buf, n):\n" + BODY, "stage"),
    ("class S:\n    async def stage(self, buf, n):\n" + BODY.replace("\n    ", "\n        ")
     .replace("    for", "        for", 1), "S.stage"),
])
def test_an_async_target_is_said_to_be_one(source, name):
    with pytest.raises(TargetLoadError) as info:
        generate_mutants(source, "t.py", name)
    assert info.value.problem == messages.MUTANTS_ASYNC_TARGET[0].format(path="t.py",
                                                                         value=name)
    assert info.value.fix == messages.MUTANTS_ASYNC_TARGET[1]


def test_a_missing_target_is_still_said_to_be_missing():
    with pytest.raises(TargetLoadError) as info:
        generate_mutants("async def other(buf, n):\n" + BODY, "t.py", "stage")
    assert "has no module-level function 'stage'" in info.value.problem
