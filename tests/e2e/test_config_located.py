"""A value of ``[tool.stagecheck]`` that a command refuses after the table was read (a
schema no file holds, a save folder that is no folder) is said of the key and the file that
gave it, as the table's own checks say it (README, "Configuration"): the command line
never held ``--schema`` or ``--save-dir``, so an error naming the option sends the user
looking for something that is not there."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from stagecheck.oracles import messages

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_in(folder, *args):
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=folder,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT})


def pyproject(folder, body: str) -> str:
    path = folder / "pyproject.toml"
    path.write_text("[tool.stagecheck]\nexamples = 5\n" + textwrap.dedent(body))
    return str(path)


@pytest.mark.parametrize("key, line, flag", [
    ("schema", 'schema = "no-such-schema"', "--schema"),
    ("save-dir", 'save-dir = "/dev/null"', "--save-dir"),
])
def test_a_value_of_the_file_refused_by_the_command_is_said_of_its_key(tmp_path, key, line,
                                                                       flag):
    path = pyproject(tmp_path, line)
    proc = run_in(tmp_path, "diff", "legacy", "single-loop", "--quiet")
    assert proc.returncode == 2, proc.stderr
    where = messages.CONFIG_WHERE.format(key=key, path=path)
    assert proc.stderr.startswith(f"stagecheck: error: {where}: "), proc.stderr
    assert f"option {flag}" not in proc.stderr


def test_the_same_value_given_on_the_command_line_is_still_said_of_the_option(tmp_path):
    pyproject(tmp_path, 'schema = "mamba-postprocess"')
    proc = run_in(tmp_path, "diff", "legacy", "single-loop", "--quiet",
                  "--schema", "no-such-schema")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("stagecheck: error: option --schema: "), proc.stderr
