"""A target name the file binds by assignment (an alias kept for old callers, a lambda) is
said to be one, with the def to name where it is an alias (was: "has no module-level
function 'stage'; functions there: _impl", of a name the file plainly has)."""

from __future__ import annotations

import textwrap

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.targets import load_function_from_source

IMPL = "def _impl(buf, n):\n    buf.copy_to_gpu(n)\n\n"


def refused(source: str) -> TargetLoadError:
    with pytest.raises(TargetLoadError) as info:
        load_function_from_source(textwrap.dedent(source), "t.py", "stage", spec="t.py::stage")
    return info.value


def test_an_alias_names_the_def_it_refers_to():
    error = refused(IMPL + "stage = _impl\n")
    assert "binds 'stage' by assignment at line 4 (stage = _impl)" in error.problem
    assert error.fix == messages.TARGET_ASSIGNED_FIX_ALIAS.format(
        value="t.py::stage", refers="_impl", file="t.py")


@pytest.mark.parametrize("line", ["stage = lambda buf, n: _impl(buf, n)\n",
                                  "stage: object = make()\n"])
def test_a_lambda_or_another_value_lists_the_functions_there(line):
    error = refused(IMPL + line)
    assert "binds 'stage' by assignment at line 4" in error.problem
    assert error.fix == messages.TARGET_FUNCTION_MISSING[1].format(available="_impl",
                                                                  classes="")


def test_a_name_the_file_lacks_is_still_said_to_be_missing():
    error = refused(IMPL)
    assert error.problem.startswith(messages.TARGET_FUNCTION_MISSING[0].split("{")[0])
