"""The environment variables stagecheck reads: a value one does not take is refused by the
command line (exit 2 naming the variable, the value and the fix), never silently the
default (was: ``STAGECHECK_PROGRESS_INTERVAL=abc`` ran with 5 s, an audit)."""

import os
import subprocess
import sys

import pytest

from stagecheck.oracles.environment import VARIABLES, refuse_bad_environment
from stagecheck.oracles.errors import UsageError

SECONDS = [v.name for v in VARIABLES if v.takes == "seconds"]


@pytest.mark.parametrize("name", SECONDS)
@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf", "1e400", "5 s"])
def test_a_seconds_variable_refuses_what_is_no_positive_finite_number(name, value):
    with pytest.raises(UsageError) as refused:
        refuse_bad_environment({name: value})
    text = str(refused.value)
    assert text.startswith(f"environment variable {name}: {value!r} is not a value it takes")
    assert f"unset {name}" in text


@pytest.mark.parametrize("name", SECONDS)
@pytest.mark.parametrize("value", ["2", "0.05", " 10 ", ""])
def test_a_seconds_variable_takes_a_positive_number_and_an_empty_value_is_unset(name, value):
    refuse_bad_environment({name: value})


@pytest.mark.parametrize("value,taken", [("2048", True), ("64", True), ("63", False),
                                         ("4.5", False), ("lots", False), ("-100", False)])
def test_the_memory_variable_takes_a_whole_number_of_mib_from_64(value, taken):
    if taken:
        refuse_bad_environment({"STAGECHECK_MEMORY_MIB": value})
    else:
        with pytest.raises(UsageError, match="a whole number of MiB, at least 64"):
            refuse_bad_environment({"STAGECHECK_MEMORY_MIB": value})


def test_the_command_line_refuses_a_bad_variable_before_the_run(tmp_path):
    done = subprocess.run([sys.executable, "-m", "stagecheck", "diff", "legacy", "single-loop",
                           "--no-save"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "STAGECHECK_PROGRESS_INTERVAL": "abc"}, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("stagecheck: error: environment variable "
                                  "STAGECHECK_PROGRESS_INTERVAL: 'abc'"), done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
