# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: none
# Fixture (equivalent): the fixed read-back with the device-generic torch.Event() and torch.Stream() upstream now makes
"""Speculative decoding: per-request valid sampled-token counts read back on the next step,
as ``fixed_event_synchronized_readback.py`` but with the event and the copy stream made by
``torch.Event()`` and ``torch.Stream()`` (vLLM's gpu_model_runner makes its events with
``torch.Event()`` now): the same protocol, clean.

Mirrors ``GPUModelRunner`` (vllm/v1/worker/gpu_model_runner.py, async scheduling with a
padded drafter batch): ``sample_tokens`` runs ``prepare_next_token_ids_padded`` on the
device, then ``_copy_valid_sampled_token_count`` copies the counts into the reused pinned
``valid_sampled_token_count_cpu`` on ``valid_sampled_token_count_copy_stream`` (which first
waits for the default stream) and records ``valid_sampled_token_count_event``. The next
step's ``_update_states`` took ``num_computed_tokens`` optimistically (every draft
accepted) and corrects it from the counts read by ``_get_valid_sampled_token_count``,
which synchronizes the event first. The same read-back without the event was the bug of
vllm-project/vllm#36013 (accepted-token counts). Upstream applies the correction after
launching the forward; here it runs before input preparation, which reads the result.
"""
import torch


class CachedRequestState:
    def __init__(self, req_id, num_computed_tokens):
        self.req_id = req_id
        self.num_computed_tokens = num_computed_tokens
        self.prev_num_draft_len = 0


class GPUModelRunner:
    def __init__(self, max_num_reqs, device, pin_memory=True):
        self.device, self.pin_memory = device, pin_memory
        self.requests = {}
        self.req_ids = []                  # upstream: self.input_batch.req_ids
        self.prev_req_id_to_index = None   # upstream: self.input_batch.prev_req_id_to_index
        self.scheduler_output = None
        self.valid_sampled_token_count_gpu = None
        self.valid_sampled_token_count_event = torch.Event()
        self.valid_sampled_token_count_copy_stream = torch.Stream()
        self.valid_sampled_token_count_cpu = torch.empty(
            max_num_reqs, dtype=torch.int32, device="cpu", pin_memory=pin_memory)

    def execute_model(self, scheduler_output):
        self._update_states(scheduler_output)
        num_computed = [self.requests[r].num_computed_tokens for r in self.req_ids]
        positions = torch.tensor(num_computed, dtype=torch.int32, pin_memory=self.pin_memory)
        self._model_forward(positions.to(self.device, non_blocking=True))
        self.scheduler_output = scheduler_output

    def _update_states(self, scheduler_output):
        for req_id in scheduler_output.finished_req_ids:
            self.requests.pop(req_id, None)
        self.req_ids = [r for r in self.req_ids if r in self.requests]
        for new in scheduler_output.scheduled_new_reqs:
            self.requests[new.req_id] = CachedRequestState(new.req_id, new.num_computed_tokens)
            self.req_ids.append(new.req_id)
        cached = scheduler_output.scheduled_cached_reqs
        corrections = []
        for req_id, num_computed in zip(cached.req_ids, cached.num_computed_tokens):
            req_state = self.requests[req_id]
            req_state.num_computed_tokens = num_computed  # assumes every draft was accepted
            if req_state.prev_num_draft_len:
                corrections.append(req_state)
        if not corrections:
            return
        valid_sampled_token_count = self._get_valid_sampled_token_count()
        for req_state in corrections:
            prev_index = self.prev_req_id_to_index.get(req_state.req_id)
            if prev_index is not None:
                num_accepted = valid_sampled_token_count[prev_index] - 1
                req_state.num_computed_tokens -= req_state.prev_num_draft_len - num_accepted

    def sample_tokens(self, sampled_token_ids):
        """``sampled_token_ids``: device [num_reqs, 1 + num_spec], -1 where rejected."""
        num_reqs = sampled_token_ids.shape[0]
        next_token_ids = torch.empty(num_reqs, dtype=torch.int64, device=self.device)
        valid_count = torch.empty(num_reqs, dtype=torch.int32, device=self.device)
        self.prepare_next_token_ids_padded(sampled_token_ids, next_token_ids, valid_count)
        self._copy_valid_sampled_token_count(next_token_ids, valid_count)
        spec_tokens = self.scheduler_output.scheduled_spec_decode_tokens
        self.prev_req_id_to_index = {r: i for i, r in enumerate(self.req_ids)}
        for req_id in self.req_ids:
            self.requests[req_id].prev_num_draft_len = len(spec_tokens.get(req_id, ()))

    def _copy_valid_sampled_token_count(self, next_token_ids, valid_sampled_tokens_count):
        default_stream = torch.cuda.current_stream()
        with torch.cuda.stream(self.valid_sampled_token_count_copy_stream):
            self.valid_sampled_token_count_copy_stream.wait_stream(default_stream)
            counts = valid_sampled_tokens_count
            self.valid_sampled_token_count_cpu[:counts.shape[0]].copy_(counts, non_blocking=True)
            self.valid_sampled_token_count_event.record()
        self.valid_sampled_token_count_gpu = valid_sampled_tokens_count  # kept alive
        self.prev_sampled_token_ids = next_token_ids.unsqueeze(1)

    def _get_valid_sampled_token_count(self):
        if self.prev_req_id_to_index is None:
            return []
        self.valid_sampled_token_count_event.synchronize()
        return self.valid_sampled_token_count_cpu[:len(self.prev_req_id_to_index)].tolist()

    def prepare_next_token_ids_padded(self, sampled_token_ids, next_token_ids, valid_count):
        """Device work (upstream: a drafter kernel): count the valid tokens of each row."""
        valid = sampled_token_ids != -1
        valid_count.copy_(valid.sum(dim=1))
        last = (valid.sum(dim=1) - 1).clamp(min=0).unsqueeze(1)
        next_token_ids.copy_(sampled_token_ids.gather(1, last).squeeze(1))

    def _model_forward(self, positions):
        """Device work: stands for the forward pass; reads the uploaded positions."""
        return positions + 1
