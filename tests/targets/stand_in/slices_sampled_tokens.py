"""A backup-tokens method that also reads the sampled token ids (as some engine forks
do): the schema's tensor stand-in models only shape, dtype, device and stride, so this
is a limit of the schema (exit 2), never a difference in the code."""


def prepare_next_token_ids_padded(self, sampled_token_ids, requests, gpu_input_batch,
                                  discard_request_mask):
    num_reqs = gpu_input_batch.num_reqs
    positions = gpu_input_batch.num_tokens_no_spec
    backup = self.backup_next_token_ids
    try:
        first = sampled_token_ids[:num_reqs]      # the stand-in cannot slice
    except Exception:                             # not even hidden by a broad except
        first = None
    for slot in range(num_reqs):
        state = requests[gpu_input_batch.req_ids[slot]]
        backup.np[slot] = state.get_token_id(int(positions[slot]) - 1)
    backup.copy_to_gpu(num_reqs)
    return backup.gpu if first is not None else backup.gpu
