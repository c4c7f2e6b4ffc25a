"""A schema file whose parts have the wrong type (``copy="whole"``, ``tail=-1``,
``dtype=32``, ``Values("1", ...)``, ``summary=None``, ``functions="f"``...) is exit 2
naming the part, its value and the fix: never a traceback of stagecheck, never exit 3,
and never accepted (a string given for a tuple of names would be read letter by letter).
Each file is the worked example of docs/schemas.md with one part changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from stagecheck.oracles import messages
from tests.helpers import ROOT, run_stagecheck

EXAMPLE = (Path(ROOT) / "docs" / "examples" / "sample_positions_schema.py").read_text()

CASES = {
    "copy-str": ("copy=COPY_WHOLE", 'copy="whole"',
                 messages.SCHEMA_TYPE_POLICY.format(where="field 'sample_pos'", part="copy",
                                                    value="whole", kind="CopyPolicy",
                                                    example="COPY_WHOLE")),
    "tail-int": ("tail=tail_fill(-1)", "tail=-1",
                 messages.SCHEMA_TYPE_POLICY.format(where="field 'sample_pos'", part="tail",
                                                    value=-1, kind="TailPolicy",
                                                    example="tail_fill(-1)")),
    "missing-str": ('missing=MissingPolicy("num_computed_tokens")',
                    'missing="num_computed_tokens"',
                    messages.SCHEMA_TYPE_POLICY.format(
                        where="field 'sample_pos'", part="missing", value="num_computed_tokens",
                        kind="MissingPolicy", example="MissingPolicy('num_computed_tokens')")),
    "field-dtype-unknown": ('"sample_pos_buf", "int32"', '"sample_pos_buf", "int33"',
                            "dtype 'int33' is not one of int32, int64, bool"),
    "field-dtype-int": ('"sample_pos_buf", "int32"', '"sample_pos_buf", 32',
                        messages.SCHEMA_TYPE_TEXT.format(part="field 'sample_pos': dtype",
                                                         value=32)),
    "values-str": ("Values(1, 2**20)", 'Values("1", 2**20)',
                   messages.SCHEMA_TYPE_VALUES.format(where="input 'num_scheduled_tokens'",
                                                      part="low", value="1")),
    "summary-none": ('summary="last-token positions and draft counts per slot"',
                     "summary=None", messages.SCHEMA_TYPE_TEXT.format(part="summary",
                                                                      value=None)),
    "functions-str": ('functions=("stage_sample_positions",)',
                      'functions="stage_sample_positions"',
                      messages.SCHEMA_TYPE_NAMES.format(part="functions",
                                                        value="stage_sample_positions")),
    "parameters-str": ('parameters=("ctx", "scheduler_output", "req_ids", "num_reqs", '
                       '"requests")', 'parameters="ctx"',
                       messages.SCHEMA_TYPE_NAMES.format(part="parameters", value="ctx")),
    "inputs-list": ("inputs=INPUTS", "inputs=list(INPUTS)",
                    messages.SCHEMA_TYPE_TUPLE.format(part="inputs", kind="Input",
                                                      value="list")),
    "group-int": ('group="requests"', "group=3",
                  messages.SCHEMA_TYPE_GROUP.format(where="input 'num_computed_tokens'",
                                                    value=3)),
    "derivation-none": ('"len(scheduled_spec_decode_tokens.get(r, []))"', "None",
                        messages.SCHEMA_TYPE_TEXT.format(part="field 'num_drafts': derivation",
                                                         value=None)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrongly_typed_part_is_exit_2_naming_it(case, tmp_path):
    old, new, said = CASES[case]
    assert old in EXAMPLE
    path = tmp_path / f"schema_{case.replace('-', '_')}.py"
    path.write_text(EXAMPLE.replace(old, new))
    proc = run_stagecheck("schema", "check", path, timeout=240)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "bug in stagecheck" not in proc.stderr, proc.stderr
    assert said in proc.stderr, proc.stderr
