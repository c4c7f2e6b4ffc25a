"""File targets may name one method of a class (``file.py::Class.method``): it loads as
a function taking ``self``, with the module-level names it uses; class-level field
declarations of the helpers it uses (NamedTuple, dataclass) survive the loading."""

import pytest

from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.targets import load_function_from_source, read_file_target

SOURCE = '''
from typing import NamedTuple
from vllm.somewhere import EngineType

SCALE = 3


class Pair(NamedTuple):
    left: "EngineType"
    right: EngineType


def helper(x: EngineType) -> int:
    return x * SCALE


def step(x):
    return -x


class Proposer:
    def __init__(self):
        self.value = 1

    def step(self, x: EngineType) -> Pair:
        return Pair(helper(x) + self.value, step(x))

    @staticmethod
    def fixed():
        return 0
'''


def test_a_method_loads_as_a_function_taking_self():
    func = load_function_from_source(SOURCE, "m.py", "Proposer.step")
    assert func.__name__ == "step" and func.__qualname__ == "Proposer.step"

    class Self:
        value = 10
    # the module-level step() is still the one the method calls, not the method itself
    assert func(Self(), 2) == (16, -2)
    assert func(Self(), 2).left == 16     # NamedTuple fields kept despite the annotations


@pytest.mark.parametrize("name, words", [
    ("Nope.step", ["no module-level class 'Nope'", "Pair, Proposer"]),
    ("Proposer.nope", ["no method 'nope'", "__init__, fixed, step"]),
    ("Proposer.fixed", ["static or class method"]),
    ("helper.x", ["no module-level class 'helper'"]),
])
def test_a_wrong_method_is_named_with_the_fix(name, words):
    with pytest.raises(TargetLoadError) as info:
        load_function_from_source(SOURCE, "m.py", name)
    for word in words:
        assert word in str(info.value)


def test_the_spec_accepts_one_dot_only(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    assert read_file_target(f"{path}::Proposer.step").name == "Proposer.step"
    for bad in ("A.b.c", "A.", ".b", "A.1b"):
        with pytest.raises(TargetLoadError, match="Class.method"):
            read_file_target(f"{path}::{bad}")
