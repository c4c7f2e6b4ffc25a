"""vLLM's Mamba prefix caching with speculative decoding ("align" mode), step after step.

The component is the runner (``GPUModelRunner(max_num_reqs, block_size, device,
pin_memory=True)``) with ``preprocess_mamba`` and ``stage_postprocess_inputs_to_gpu`` of
vllm/v1/worker/mamba_utils.py. Carried across steps: ``mamba_state_idx`` (the block column
of each request's running state) and the accepted-token counts, computed on the device,
copied back to the host and used by the next step's pre-copy as the token bias. A step is
``execute_model``: wait on ``prepare_inputs_event``; update the requests; wait on
``num_accepted_tokens_event`` and bring the counts into this step's rows;
``preprocess_mamba`` (stage the state column, source column and token bias, upload,
launch the pre-copy); upload the counts; ``stage_postprocess_inputs_to_gpu``; record;
forward. Then ``sample_tokens(sampled_token_ids)``: count the accepted tokens on the
device, the postprocess kernel, copy the counts back, record the count event.

Device work: ``_count_accepted``, ``_model_forward``, ``align_ctx.run_fused_precopy``,
``align_ctx.run_fused_postprocess``.
"""

from __future__ import annotations

from stagecheck.spec.protocol import Operation, Protocol, StepSpace
from stagecheck.spec.protocols import vllm


def build(ctx):
    return ctx.component(ctx.sequence.capacity, ctx.sequence.params.get("block_size", 4),
                         ctx.device, pin_memory=True)


def observe(ctx) -> dict:
    """The running-state columns and each request's computed tokens (host state)."""
    state = ctx.state
    return {"mamba_state_idx": dict(state.mamba_state_idx),
            "computed": {r: s.num_computed_tokens for r, s in state.requests.items()}}


PROTOCOL = Protocol(
    name="mamba-align-steps",
    summary="vLLM's Mamba align mode step after step: preprocess_mamba stages the state "
            "moves from the accepted counts the device copied back last step, "
            "stage_postprocess_inputs_to_gpu stages the postprocess kernel's inputs",
    functions=("GPUModelRunner", "preprocess_mamba", "stage_postprocess_inputs_to_gpu",
               "execute_model", "sample_tokens", "_prepare_inputs"),
    component="GPUModelRunner",
    build=build,
    operations=(
        Operation("execute_model", vllm.execute_model, vllm.is_step,
                  "update, counts, preprocess_mamba, postprocess staging, forward"),
        Operation("sample_tokens", vllm.sample_tokens("input_batch.req_ids"), vllm.has_batch,
                  "accepted counts, postprocess kernel, counts copied back"),
    ),
    device_work=("_count_accepted", "_model_forward", "align_ctx.run_fused_precopy",
                 "align_ctx.run_fused_postprocess"),
    observe=observe,
    space=StepSpace(capacity=(1, 4), steps=(1, 8), max_prompt=10, max_drafts=2,
                    dummy=False, preemption=True, params={"block_size": (4, 2, 8)}),
    row_order="input_batch.req_ids",
)
