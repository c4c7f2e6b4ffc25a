"""Batch rows moved on the host while their accepted counts come back from the device
(vllm-project/vllm #51571, proposed fix #51599; vllm-ascend #13863).

The component is the runner (``GPUModelRunner(max_num_reqs, device, pin_memory=True)``).
``execute_model``, inside the input-preparation window: finished rows leave, new ones fill
the holes, ``condense`` moves the last rows into the holes, ``_may_reorder_batch`` swaps
prefills behind decodes; then wait on ``num_accepted_tokens_event``, bring each request's
count from its previous row into this step's row and upload the counts; forward.
``sample_tokens``: count the accepted tokens on the device, copy them back to the host
(non-blocking), record the event.

Device work: ``_count_accepted`` and ``_model_forward``. Besides the invariants of every
protocol, the forward of a step reads, in each row, the count its request was accepted on
the last step that sampled tokens (1 for a request that was not in that step's batch).
"""

from __future__ import annotations

from stagecheck.spec.protocol import Operation, Protocol, ProtocolCheck, StepSpace
from stagecheck.spec.protocols import vllm
from stagecheck.spec.steps import unfold


def build(ctx):
    return ctx.component(ctx.sequence.capacity, ctx.device, pin_memory=True)


def observe(ctx) -> dict:
    """The rows of the persistent batch (host state)."""
    return {"rows": [r for r in ctx.state.input_batch.req_ids if r is not None]}


def counts_follow_requests(seq, trace) -> list[str]:
    """Each forward reads, row by row, its request's count from the last sampled step."""
    views = unfold(seq)
    forwards = [r for r in trace.reads if r["work"] == "_model_forward"]
    out = []
    previous: dict[str, int] = {}
    k = 0
    for view in views:
        if view.kind != "step":
            continue
        if k >= len(forwards) or view.index >= len(trace.states):
            break
        read = forwards[k]          # every execute_model launches the forward
        k += 1
        if not view.scheduled:      # an empty batch samples nothing: the counts stay
            continue
        rows = trace.states[view.index]["rows"]
        counts = read["values"].get("num_accepted_tokens", [])
        for i, r in enumerate(rows):
            want = previous.get(r, 1)
            if i < len(counts) and counts[i] != want:
                out.append(f"step {view.index}: the forward read count {counts[i]} in row {i} "
                           f"({r!r}); its request was accepted {want} token(s) on the "
                           "last step that sampled" if r in previous else
                           f"step {view.index}: the forward read count {counts[i]} in row {i} "
                           f"for {r!r}, new in the batch (1 expected)")
                break
        previous = {r: view.accepted.get(r, 1) for r in view.scheduled}
    return out


PROTOCOL = Protocol(
    name="condense-inflight-d2h",
    summary="vLLM's hybrid spec decode: the accepted counts come back by a non-blocking "
            "device-to-host copy while _update_states condenses and reorders the rows",
    functions=("GPUModelRunner", "InputBatch", "condense", "_may_reorder_batch",
               "execute_model", "sample_tokens"),
    component="GPUModelRunner",
    build=build,
    operations=(
        Operation("execute_model", vllm.execute_model, vllm.is_step,
                  "update and move rows, wait, bring the counts into the rows, forward"),
        Operation("sample_tokens", vllm.sample_tokens("input_batch.req_ids"), vllm.has_batch,
                  "accepted counts on the device, copied back, event recorded"),
    ),
    device_work=("_count_accepted", "_model_forward"),
    observe=observe,
    checks=(ProtocolCheck(
        "counts_follow_requests",
        "The forward of each step reads, in each row, the number of tokens its request "
        "was accepted on the last step that sampled tokens (1 for a request that was not "
        "in that step's batch).",
        counts_follow_requests),),
    space=StepSpace(capacity=(1, 4), steps=(1, 8), max_prompt=4, max_drafts=3,
                    dummy=False, preemption=True),
    row_order="input_batch.req_ids",
)
