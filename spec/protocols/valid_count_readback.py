"""A device-to-host copy read back on the next step: spec decode's valid sampled-token
counts (vllm-project/vllm #36013 for the same shape on the accepted counts).

The component is the runner (``GPUModelRunner(max_num_reqs, device, pin_memory=True)``).
``execute_model``: take each request's computed tokens from the scheduler (every draft
assumed accepted); if a request had drafts last step, wait on
``valid_sampled_token_count_event`` and correct its count from the counts the device
copied back; upload the positions from a fresh pinned tensor; forward.
``sample_tokens``: the drafter's kernel counts each row's valid tokens, then the counts
are copied into the reused pinned ``valid_sampled_token_count_cpu`` on a side stream
(after waiting for the default stream) and the event recorded.

Device work: ``prepare_next_token_ids_padded`` and ``_model_forward``. The host's
corrected computed tokens are what must not depend on when the copy lands.
"""

from __future__ import annotations

from stagecheck.spec.protocol import Operation, Protocol, StepSpace
from stagecheck.spec.protocols import vllm


def build(ctx):
    return ctx.component(ctx.sequence.capacity, ctx.device, pin_memory=True)


def observe(ctx) -> dict:
    """Each request's computed tokens after the correction (read back from the device)."""
    return {"computed": {r: s.num_computed_tokens for r, s in ctx.state.requests.items()}}


PROTOCOL = Protocol(
    name="valid-count-readback",
    summary="vLLM's spec-decode read-back: the valid sampled-token counts copied to "
            "pinned memory on a side stream and read on the next step after an event",
    functions=("GPUModelRunner", "_copy_valid_sampled_token_count",
               "_get_valid_sampled_token_count", "execute_model", "sample_tokens",
               "_update_states"),
    component="GPUModelRunner",
    build=build,
    operations=(
        Operation("execute_model", vllm.execute_model, vllm.is_step,
                  "update (the count correction reads the copy back), positions, forward"),
        Operation("sample_tokens", vllm.sample_tokens("req_ids"), vllm.has_batch,
                  "the drafter's counts, copied back on a side stream"),
    ),
    device_work=("prepare_next_token_ids_padded", "_model_forward"),
    observe=observe,
    space=StepSpace(capacity=(1, 4), steps=(1, 8), max_prompt=6, max_drafts=3,
                    dummy=False, preemption=True),
    row_order="req_ids",
)
