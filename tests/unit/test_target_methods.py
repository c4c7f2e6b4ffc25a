"""File targets may name one method of a class (``file.py::Class.method``): it loads as
a function taking ``self``, with the module-level names it uses; class-level field
declarations of the helpers it uses (NamedTuple, dataclass) survive the loading."""

import inspect
import subprocess
import sys

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

    @classmethod
    def nothing():
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
    ("Proposer.nope", ["no method 'nope'", "__init__, fixed, nothing, step"]),
    ("Proposer.nothing", ["class method without a parameter for its class",
                          "def nothing(cls, ...)"]),
    ("helper.x", ["no module-level class 'helper'"]),
    # a method's name given alone: the Class.method form that checks it (was: --protocol)
    ("fixed", ["no module-level function 'fixed'",
               "class Proposer there has a method 'fixed': give m.py::Proposer.fixed"]),
    ("hlper", ["functions there: helper, step (did you mean helper?)"]),
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


STATIC = '''
from vllm.somewhere import EngineType

SCALE = 3


def helper(x):
    return x * SCALE


class MambaUtils:
    OFFSET: EngineType = 100
    BASE = 7

    @staticmethod
    def stage(x: EngineType, y=1) -> int:
        return helper(x) + y

    @staticmethod
    def twice(x):
        return 2 * x

    @classmethod
    def based(cls, x):
        return cls.BASE + cls.twice(x) + cls.scaled(x)

    @classmethod
    def scaled(cls, x):
        return x * SCALE

    def plain(self, x):
        return self.twice(x) + MambaUtils.twice(x)
'''


def test_a_static_method_loads_as_the_plain_function_it_is(tmp_path):
    func = load_function_from_source(STATIC, "m.py", "MambaUtils.stage")
    assert func.__qualname__ == "MambaUtils.stage"
    assert list(inspect.signature(func).parameters) == ["x", "y"]
    assert func(2) == 7 and func(2, y=0) == 6


def test_a_class_method_loads_bound_to_its_class_compiled_from_the_file():
    func = load_function_from_source(STATIC, "m.py", "MambaUtils.based")
    assert list(inspect.signature(func).parameters) == ["x"]
    # cls is the class: its constant, its static and class methods called as written
    assert func(2) == 7 + 4 + 6


def test_a_plain_method_still_sees_the_static_methods_of_its_class():
    func = load_function_from_source(STATIC, "m.py", "MambaUtils.plain")

    class Self:
        twice = staticmethod(lambda x: 2 * x)
    assert func(Self(), 3) == 12


STATIC_STAGER = '''
class MambaUtils:
    @staticmethod
    def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                        mamba_state_idx):
        bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
        for i, r in enumerate(req_ids[:num_reqs]):
            assert r in mamba_state_idx, f"no state index for {r}"
            bufs[0].np[i] = mamba_state_idx[r]
            bufs[1].np[i] = scheduler_output.num_scheduled_tokens[r]
            bufs[2].np[i] = requests[r].num_computed_tokens
            bufs[3].np[i] = len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))
        for b in bufs:
            b.copy_to_gpu(num_reqs)
'''


def test_a_static_method_target_runs_end_to_end(tmp_path):
    """``FILE::Class.method`` of a static staging function loads and conforms (was: exit 2,
    'is a static or class method', whose fix, 'name a plain method', did not apply)."""
    path = tmp_path / "mamba_utils.py"
    path.write_text(STATIC_STAGER)
    proc = subprocess.run([sys.executable, "-m", "stagecheck", "spec",
                           f"{path}::MambaUtils.stage_postprocess_inputs_to_gpu",
                           "--examples", "20", "--no-save", "--quiet"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "verdict: CONFORMS" in proc.stdout
