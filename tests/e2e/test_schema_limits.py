"""A limit of a schema is exit 2 naming it, never a finding about the code: a target
that asks a schema's stand-in for what it does not model (issue 14's stand-ins, the
quality bar's "a loader limitation is never a finding")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stagecheck.oracles import messages

ROOT = Path(__file__).resolve().parents[2]
SLICES = (f"{ROOT / 'tests' / 'targets' / 'stand_in' / 'slices_sampled_tokens.py'}"
          "::prepare_next_token_ids_padded")


def _stagecheck(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], capture_output=True,
                          text=True, timeout=240, cwd=ROOT)


@pytest.mark.parametrize("argv", [
    ["diff", "backup-tokens", SLICES, "--examples", "30"],
    ["diff", SLICES, SLICES, "--examples", "30"],          # the same code on both sides
    ["spec", SLICES, "--examples", "30"],
], ids=["diff", "self-diff", "spec"])
def test_a_stand_in_limit_is_exit_2_not_a_difference(argv, tmp_path):
    done = _stagecheck(*argv, "--save-dir", str(tmp_path / "findings"))
    assert done.returncode == 2, done.stdout + done.stderr
    first_sentence = messages.STAND_IN_UNSUPPORTED[0].split("{")[0]
    assert first_sentence in done.stderr and "TensorStandIn" in done.stderr
    assert "indexing" in done.stderr and "Traceback" not in done.stderr + done.stdout
    assert "DIFFERENT" not in done.stdout
    assert not (tmp_path / "findings").exists() or not any((tmp_path / "findings").iterdir())


@pytest.mark.parametrize("argv", [("schema", "check"), ("diff", "legacy", "single-loop",
                                                       "--examples", "5", "--schema")])
def test_a_schema_file_with_a_colon_and_no_name_is_refused_as_a_protocol_s_is(argv):
    """'schema.py:' (a NAME left out) was taken silently as the file's SCHEMA, while
    'protocol.py:' is exit 2 (PROTOCOL_NO_NAME); both say so now."""
    spec = str(ROOT / "tests" / "user_schema" / "forget_finished_schema.py") + ":"
    proc = _stagecheck(*argv, spec)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    problem, fix = messages.SCHEMA_NO_NAME
    assert problem.format(value=spec) in proc.stderr and fix in proc.stderr


def test_max_drafts_for_a_schema_without_draft_lists_is_exit_2_naming_the_schema(tmp_path):
    user = ROOT / "tests" / "user_schema"
    target = f"{user / 'attention_lengths.py'}::stage_attention_lengths"
    done = _stagecheck("spec", target, "--schema", str(user / "attention_lengths_schema.py"),
                       "--max-drafts", "4", "--examples", "5", "--no-save")
    assert done.returncode == 2, done.stdout + done.stderr
    problem, fix = messages.MAX_DRAFTS_NO_DRAFTS
    assert "option --max-drafts: " + problem.format(value=4, schema="attention-lengths") \
        in done.stderr, done.stderr
    assert fix in done.stderr and "Traceback" not in done.stderr
    kept = _stagecheck("diff", "legacy", "single-loop", "--max-drafts", "4", "--examples", "5",
                       "--no-save")                 # a schema with draft lists takes it
    assert kept.returncode == 0 and "drafts <= 4" in kept.stdout, kept.stdout + kept.stderr
