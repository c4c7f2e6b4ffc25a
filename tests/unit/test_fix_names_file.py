"""The fix of a schema or protocol error that stopped a run names the file the run was
given ('stagecheck schema check path/to/schema.py'), not a literal FILE, and drops the
command for the kind of file the run was not given."""

from stagecheck.oracles import messages
from stagecheck.oracles.commands.base import file_named
from stagecheck.oracles.errors import SchemaError


def _failed(template=messages.SCHEMA_CODE_FAILED):
    return SchemaError.of(template, "field 'x': derive", error="ValueError: no")


def test_schema_run_names_its_schema_file_and_not_the_protocol_command():
    fix = file_named(_failed(), {"schema": "my schemas/s.py"}).fix
    assert "'stagecheck schema check 'my schemas/s.py''" in fix
    assert "protocol check" not in fix and "FILE" not in fix


def test_protocol_run_names_its_protocol_file_and_not_the_schema_command():
    fix = file_named(_failed(), {"protocol": "p.py"}).fix
    assert "'stagecheck protocol check p.py'" in fix
    assert "schema check" not in fix and "FILE" not in fix
    fix = file_named(_failed(messages.PROTOCOL_CHECK_RAISED), {"protocol": "p.py"}).fix
    assert "'stagecheck protocol check p.py TARGET'" in fix


def test_without_a_file_the_fix_keeps_both_commands():
    fix = file_named(_failed(), {}).fix
    assert "'stagecheck schema check FILE' or 'stagecheck protocol check FILE'" in fix
