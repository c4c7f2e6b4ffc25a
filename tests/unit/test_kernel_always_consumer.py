"""``--kernel always`` or ``--kernel-backend`` with a schema that declares no consumer kernel
is exit 2 naming the option and the schema (an audit: the run ignored them silently, exit 0,
while README says always 'says how many and how long')."""

import pathlib

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.cli import main

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples"
TARGET = f"{EXAMPLES}/sample_positions.py::stage_sample_positions"
SCHEMA = f"{EXAMPLES}/sample_positions_schema.py"


@pytest.mark.parametrize("option", [("--kernel", "always"), ("--kernel-backend", "reference")])
def test_a_kernel_option_without_a_consumer_is_refused(capsys, tmp_path, option):
    code = main(["diff", "--schema", SCHEMA, TARGET, TARGET, *option,
                 "--examples", "5", "--save-dir", str(tmp_path)])
    err = capsys.readouterr().err
    problem, fix = messages.KERNEL_ALWAYS_NO_CONSUMER
    assert code == 2
    assert f"option {option[0]}: " + problem.format(value=option[1],
                                                    schema="sample-positions") in err
    assert fix in err and not list(tmp_path.iterdir())


def test_kernel_auto_and_off_run_as_before(capsys, tmp_path):
    for mode in ("auto", "off"):
        assert main(["spec", "--schema", SCHEMA, TARGET, "--kernel", mode, "--examples", "5",
                     "--no-save", "-q"]) == 0
