"""Mamba "all" cache mode with speculative decoding: the per-step preprocess staging.

Written from the description in the research notes (vLLM v0.25-v0.31,
``vllm/v1/worker/mamba_utils.py``): forget the state indices of requests that left
(finished, preempted, resumed), stage the previous step's last scheduled block index
of every live request (-1 when there is none), mark every slot past the batch -1, and
upload the whole buffer.
"""

from itertools import chain


def forget_departed_requests(scheduler_output, mamba_state_idx):
    """Remove the entries of finished, preempted and resumed requests (absent: no-op)."""
    preempted = scheduler_output.preempted_req_ids or ()
    departed = chain(scheduler_output.finished_req_ids, preempted,
                     scheduler_output.scheduled_cached_reqs.resumed_req_ids)
    for req_id in departed:
        mamba_state_idx.pop(req_id, None)


def preprocess_mamba_all_specdec(scheduler_output, input_batch, mamba_state_idx, num_reqs,
                                 prev_last_scheduled_idx_buf):
    forget_departed_requests(scheduler_output, mamba_state_idx)
    view = prev_last_scheduled_idx_buf.np
    for slot, req_id in enumerate(input_batch.req_ids[:num_reqs]):
        view[slot] = mamba_state_idx.get(req_id, -1)
    view[num_reqs:] = -1
    prev_last_scheduled_idx_buf.copy_to_gpu()
