"""Spec-decode backup tokens: the host staging that starts ``prepare_next_token_ids_padded``.

Written from the description in the research notes (vLLM v0.20/v0.21,
``SpecDecodeBaseProposer`` in ``vllm/v1/spec_decode/llm_base_proposer.py``): for every
live slot, the id of the request's last token before any draft (the token used when
the sampled one is discarded) is staged, and the live range is uploaded. The method
then launches a Triton kernel over the staged device view (the whole ``.gpu`` tensor);
that part is not written here, so this reference returns that view instead.
"""


def prepare_next_token_ids_padded(self, sampled_token_ids, requests, gpu_input_batch,
                                  discard_request_mask):
    num_reqs = gpu_input_batch.num_reqs
    positions = gpu_input_batch.num_tokens_no_spec
    backup = self.backup_next_token_ids
    for slot in range(num_reqs):
        state = requests[gpu_input_batch.req_ids[slot]]
        backup.np[slot] = state.get_token_id(int(positions[slot]) - 1)
    backup.copy_to_gpu(num_reqs)
    return backup.gpu
