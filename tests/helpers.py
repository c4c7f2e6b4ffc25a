"""Small builders shared by the tests."""

from stagecheck.spec import StagingScenario

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
