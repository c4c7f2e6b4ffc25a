"""Schema mistakes that only running shows, end to end: exit 2 naming the schema, never a
finding against the code under test (an audit)."""

import pathlib
import subprocess
import sys

from stagecheck.oracles import messages

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples" / \
    "sample_positions_schema.py"


def test_a_build_whose_call_the_function_cannot_take_is_the_schemas_mistake(tmp_path):
    """A build that passed 4 of the function's 5 parameters: every call 'raised TypeError:
    missing 1 required positional argument' against the code (exit 1); now exit 2."""
    source = EXAMPLE.read_text()
    old = "b.scenario.num_reqs, requests))"
    assert old in source
    schema = tmp_path / "schema.py"
    schema.write_text(source.replace(old, "b.scenario.num_reqs))"))
    target = EXAMPLE.parent / "sample_positions.py"
    done = subprocess.run([sys.executable, "-m", "stagecheck", "spec",
                           f"{target}::stage_sample_positions", "--schema", str(schema),
                           "--examples", "20", "--no-save"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert messages.SCHEMA_CALL_UNBOUND[0].split("{value!r}")[0].format(
        schema="sample-positions") in done.stderr, done.stderr
    assert "missing 1 required positional argument: 'requests'" in done.stderr
    assert "VIOLATES" not in done.stdout and "Traceback" not in done.stderr
