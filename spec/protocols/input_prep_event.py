"""vLLM's input-preparation event: one event guards every host write of the reused pinned
inputs (vllm-project/vllm #24527, #25279, #34866).

The component is the runner itself (``GPUModelRunner(max_num_reqs, device,
pin_memory=True)``, vllm/v1/worker/gpu_model_runner.py, reduced to what the protocol
touches). Each step is either ``execute_model(scheduler_output)``: wait on
``prepare_inputs_event``, update the persistent batch (finished rows leave, new ones fill
the holes, ``condense``, the pinned sampling tensor re-uploaded when the batch changed),
stage and upload ``query_start_loc`` and ``seq_lens``, record the event, launch the
forward; or ``_dummy_run(num_tokens)``, the forward of an idle data-parallel rank over a
made-up batch, staging the same buffers. The forward (``_model_forward``) is the device
work: it reads the two mirrors and the device temperatures.

The race the event prevents: a host write of step N+1 into a pinned buffer whose upload of
step N is still queued, so that step N's forward reads step N+1's values.
"""

from __future__ import annotations

from stagecheck.spec.protocol import Operation, Protocol, StepSpace
from stagecheck.spec.protocols import vllm


def build(ctx):
    return ctx.component(ctx.sequence.capacity, ctx.device, pin_memory=True)


def observe(ctx) -> dict:
    """The rows of the persistent batch (host state)."""
    return {"rows": list(ctx.state.input_batch.req_ids)}


PROTOCOL = Protocol(
    name="input-prep-event",
    summary="vLLM's model runner under async scheduling: execute_model and _dummy_run "
            "stage the reused pinned inputs (query_start_loc, seq_lens, the sampling "
            "temperatures) inside one input-preparation event window",
    functions=("GPUModelRunner", "execute_model", "_dummy_run", "synchronize_input_prep",
               "_update_states", "_prepare_inputs"),
    component="GPUModelRunner",
    build=build,
    operations=(
        Operation("execute_model", vllm.execute_model, vllm.is_step,
                  "the step: update the batch, stage and upload the inputs, forward"),
        Operation("_dummy_run", vllm.dummy_run, vllm.is_dummy,
                  "a forward over a made-up batch of dummy_tokens tokens"),
    ),
    device_work=("_model_forward",),
    observe=observe,
    space=StepSpace(capacity=(1, 4), steps=(1, 8), max_prompt=8, max_drafts=0, dummy=True,
                    preemption=True),
    row_order="input_batch.req_ids",
)
