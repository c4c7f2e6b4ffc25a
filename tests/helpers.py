"""Small builders shared by the tests."""

import os
import subprocess
import sys

from stagecheck.spec import StagingScenario

#: the repository's root folder
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: the seed schema's inputs (keyword arguments of ``scenario`` that go into ``inputs``)
INPUTS = ("num_scheduled_tokens", "spec_decode_tokens", "num_computed_tokens",
          "num_prompt_tokens", "mamba_state_idx", "run_prefix_state_migration",
          "omit_state_idx_buf")
FOUR = ("mamba_state_idx_buf", "num_scheduled_tokens_buf", "num_computed_tokens_buf",
        "num_draft_tokens_buf")


def scenario(**overrides) -> StagingScenario:
    """Three live requests (one without drafts) and one padded id, sentinel-filled buffers
    (a scenario of the seed schema, ``mamba-postprocess``)."""
    inputs = dict(
        num_scheduled_tokens={"req-a": 5, "req-b": 1, "req-c": 70_000, "req-p": 4},
        spec_decode_tokens={"req-a": [11, 12], "req-c": [13], "req-p": [1, 2, 3]},
        num_computed_tokens={"req-a": 100, "req-b": 7, "req-c": 2**31 - 1, "req-p": 55},
        num_prompt_tokens={"req-a": 50, "req-b": 70, "req-c": 3, "req-p": 1},
        mamba_state_idx={"req-a": 3, "req-b": 0, "req-c": 9, "req-p": 6},
        run_prefix_state_migration=True, omit_state_idx_buf=False)
    base = dict(capacity=6, num_reqs=3, req_ids=["req-a", "req-b", "req-c", "req-p"],
                initial_cpu={b: [-1] * 6 for b in FOUR},
                initial_gpu={b: [-2] * 6 for b in FOUR})
    for key, value in overrides.items():
        (inputs if key in INPUTS else base)[key] = value
    return StagingScenario(inputs=inputs, **base)


def run_stagecheck(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m stagecheck ARGS`` from the repository's root, as a user runs it (the
    project on ``PYTHONPATH``, so that fixtures can import what they share)."""
    return subprocess.run([sys.executable, "-m", "stagecheck", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT})


def assert_outcome(proc: subprocess.CompletedProcess, code: int, words=()) -> None:
    """The run exited with ``code``, its report holds each of ``words``, and nothing it
    wrote to stderr is a traceback."""
    assert proc.returncode == code, proc.stdout + proc.stderr
    for word in words:
        assert word in proc.stdout, (word, proc.stdout)
    assert "Traceback" not in proc.stderr
