"""A schema written from docs/schemas.md alone, for a staging function stagecheck has no
built-in schema for (tests/user_schema/), finds the three bugs planted in it: through
the command line, with --schema, by the differential oracle and by the spec alone."""

import json
import pathlib

import pytest

from stagecheck.oracles.cli import main

HERE = pathlib.Path(__file__).resolve().parents[1] / "user_schema"
FUNCTIONS = HERE / "attention_lengths.py"
SCHEMA = HERE / "attention_lengths_schema.py"
REFERENCE = f"{FUNCTIONS}::stage_attention_lengths"

PLANTED = {
    "planted_tail_not_zeroed": {"tail_policy"},
    "planted_last_position": {"slot_alignment"},
    "planted_query_upload_first": {"copy_discipline", "mirror_consistency"},
}


def _run(tmp_path, *argv) -> tuple[int, dict]:
    out = tmp_path / "report.json"
    code = main([*argv, "--schema", str(SCHEMA), "--json", str(out),
                 "--save-dir", str(tmp_path / "findings")])
    return code, json.loads(out.read_text())


def _errors(report: dict) -> set[str]:
    return {f["invariant"] for f in report["findings"] if f["severity"] == "error"}


def test_the_schema_passes_its_check_and_the_function_needs_it(capsys):
    assert main(["schema", "check", str(SCHEMA)]) == 0
    assert main(["diff", REFERENCE, REFERENCE]) == 2
    assert "no built-in schema describes function 'stage_attention_lengths'" in \
        capsys.readouterr().err


def test_the_function_against_itself_is_clean(tmp_path):
    code, report = _run(tmp_path, "diff", REFERENCE, REFERENCE)
    assert code == 0 and report["findings"] == []


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_each_planted_bug_is_found_by_diff_and_by_the_spec_alone(tmp_path, planted):
    candidate = f"{FUNCTIONS}::{planted}"
    code, report = _run(tmp_path, "diff", "--no-out-of-contract", REFERENCE, candidate)
    assert code == 1 and _errors(report) & PLANTED[planted], _errors(report)
    code, report = _run(tmp_path, "spec", "--no-out-of-contract", candidate)
    assert code == 1 and _errors(report) & PLANTED[planted], _errors(report)
