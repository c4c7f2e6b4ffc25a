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
